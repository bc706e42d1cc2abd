// TypeScript: types are stripped before awaits are rewritten.
export async function twice(als: { getStore(): unknown }, tick: () => Promise<void>): Promise<unknown[]> {
  const fn: () => Promise<void> = await Promise.resolve(tick);
  await fn();
  return [als.getStore(), await Promise.resolve(als.getStore())];
}

export function fails(): never {
  throw new Error("line 9");
}
