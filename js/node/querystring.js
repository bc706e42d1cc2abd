// node:querystring and node:punycode from unenv (vendored in js/vendor/unenv-node.js): ports
// of Node's querystring and of punycode.js, the code wrangler bundles for them too.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const make = globalThis.__celld_unenv_node;
  delete globalThis.__celld_unenv_node;
  const { querystring, punycode } = make();
  for (const [name, namespace] of [["node:querystring", querystring], ["node:punycode", punycode]]) {
    const exports = Object.assign(Object.create(null), namespace);
    modules[name] = Object.freeze(exports);
  }
})();
