// A CommonJS module awaiting inside a function, as a package would.
exports.later = async (als, tick) => {
  await tick();
  return als.getStore();
};
