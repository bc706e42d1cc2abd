// Serves HTTP requests through the Worker's default export.
//
// The host delivers `{k: "fetch", id, request}`; the answer is one `respond`
// notification carrying either the response or the error that stopped it.
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const cloudflare = globalThis.__celld_cloudflare;

  /** The `ctx` argument of a fetch handler. */
  class ExecutionContext {
    #pending;
    constructor(pending) {
      this.#pending = pending;
      Object.defineProperty(this, "props", { value: {}, enumerable: true });
    }
    waitUntil(promise) {
      this.#pending(promise);
    }
    passThroughOnException() {
      // There is no origin behind celld to pass through to: errors become 500s.
    }
  }

  function keepGoing(promise) {
    Promise.resolve(promise).catch((error) => {
      const shape = host.describeError(error);
      host.notify("log", {
        level: "error",
        text: `Uncaught (in waitUntil) ${shape.name}: ${shape.message}\n${shape.stack}`,
      });
    });
  }

  function resolveHandler(main, ctx) {
    const exported = main.default;
    if (typeof exported === "function" && exported.prototype instanceof cloudflare.WorkerEntrypoint) {
      const instance = new exported(ctx, cloudflare.env);
      if (typeof instance.fetch !== "function") {
        throw new TypeError("The Worker's default export has no fetch() method");
      }
      return (request) => instance.fetch(request);
    }
    if (exported && typeof exported.fetch === "function") {
      return (request) => exported.fetch(request, cloudflare.env, ctx);
    }
    throw new TypeError(
      "The Worker has no fetch handler: export default { fetch(request, env, ctx) { ... } }",
    );
  }

  host.on("fetch", (message) => {
    const ctx = new ExecutionContext(keepGoing);
    cloudflare.setWaitUntil(keepGoing);
    let outcome;
    try {
      const request = globalThis.__celld_web.requestFromWire(message.request);
      outcome = Promise.resolve(resolveHandler(globalThis.__celld_main, ctx)(request));
    } catch (error) {
      outcome = Promise.reject(error);
    }
    outcome
      .then((response) => {
        if (!(response instanceof Response)) {
          throw new TypeError(
            `The Worker's fetch handler returned ${response === null ? "null" : typeof response}, not a Response`,
          );
        }
        return globalThis.__celld_web.responseToWire(response);
      })
      .then(
        (wire) => host.notify("respond", { id: message.id, response: wire }),
        (error) => host.notify("respond", { id: message.id, error: host.describeError(error) }),
      );
  });
})();
