// Bindings that need Cloudflare's network (Workers AI, Vectorize, Browser Rendering,
// Analytics Engine, email sending). The Worker starts; any use of one throws an Error
// that names the binding and says why (celld/bindings/offline.py logs the warning).
"use strict";
(() => {
  function unavailable(binding, service) {
    const fail = (what) => {
      throw new Error(
        `env.${binding}.${String(what)}(): ${service} needs Cloudflare's network and is not available under celld`,
      );
    };
    return new Proxy(Object.create(null), {
      get(_target, property) {
        if (property === Symbol.toPrimitive || property === "then" || typeof property === "symbol") {
          return undefined;
        }
        if (property === "toJSON") return () => ({ binding, service });
        return (..._args) => fail(property);
      },
    });
  }

  globalThis.__celld_cloudflare.onEnv((message, env) => {
    for (const o of message.offline || []) env[o.binding] = unavailable(o.binding, o.service);
  });
})();
