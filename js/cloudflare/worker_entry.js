// Serves HTTP requests through the Worker's default export, scheduled events through
// its scheduled() handler and queue batches through its queue() handler.
//
// The host delivers `{k: "fetch", id, request}`; the answer is one `respond`
// notification carrying either the response or the error that stopped it. A scheduled
// event comes as `{k: "fetch", id, scheduled: {cron, scheduledTime}}` (the same path, so
// it is moved off a stuck isolate like a request) and is answered with
// `{id, scheduled: {outcome: "ok" | "exception", noRetry, error?}}`, workerd's outcome.
// A service binding call from another isolate comes as `{k: "fetch", id, rpc: {entrypoint,
// kind: "fetch" | "call", ...}}` (celld/isolate/worker_pool.py call_entrypoint) and is
// answered with `{id, rpc: {response} | {v} | {e}}`: the response, or the method's result or
// error, structured-cloned.
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const cloudflare = globalThis.__celld_cloudflare;
  const web = globalThis.__celld_web;
  const {
    ObjectDefineProperty, PromisePrototypeThen, PromiseResolve, PromiseReject, SafeMap, TypeError,
  } = globalThis.__celld_primordials;
  const Response = globalThis.Response;

  /** How long waitUntil() work may run on after the response (Cloudflare's limit). */
  const WAIT_UNTIL_MS = 30_000;

  /** Requests this isolate serves: id -> {id, waits, responded, finished, cap}. A request
   * lives until its response is sent and its waitUntil() promises settle; then its
   * timers and unanswered host requests (fetches) are dropped, as in workerd. */
  const live = new SafeMap();

  /** The `ctx` argument of a fetch handler. */
  class ExecutionContext {
    #pending;
    constructor(pending) {
      this.#pending = pending;
      ObjectDefineProperty(this, "props", { value: {}, enumerable: true });
    }
    waitUntil(promise) {
      this.#pending(promise);
    }
    passThroughOnException() {
      // There is no origin behind celld to pass through to: errors become 500s.
    }
  }

  function logWaitUntilError(error) {
    const shape = host.describeError(error);
    host.notify("log", {
      level: "error",
      text: `Uncaught (in waitUntil) ${shape.name}: ${shape.message}\n${shape.stack}`,
    });
  }

  function tracker(owner) {
    return (promise) => {
      if (owner.finished) return; // the request is over; there is nothing to extend
      owner.waits++;
      const settled = () => {
        owner.waits--;
        maybeFinish(owner);
      };
      PromisePrototypeThen(PromiseResolve(promise), settled, (error) => {
        logWaitUntilError(error);
        settled();
      });
    };
  }

  function maybeFinish(owner) {
    if (!owner.responded || owner.finished) return;
    if (owner.sockets > 0) return; // a WebSocket it accepted is open: the request lives on
    if (owner.waits === 0) {
      finish(owner);
      return;
    }
    if (owner.cap === null) {
      // waitUntil work may outlive the response by WAIT_UNTIL_MS, then it is cut off.
      owner.cap = host.runAs(owner, () => host.requestCancellable("timer", { ms: WAIT_UNTIL_MS }));
      PromisePrototypeThen(owner.cap.promise, () => {
        host.notify("log", {
          level: "warn",
          text: `waitUntil() work was still running ${WAIT_UNTIL_MS} ms after the response; it was cancelled`,
        });
        finish(owner);
      });
    }
  }

  /** The request is over: drop its timers and what the host still owes it. `told`: the
   * host already knows (its `respond` said `done`), so no `done` message follows. */
  function finish(owner, told = false) {
    if (owner.finished) return;
    owner.finished = true;
    live.delete(owner.id);
    if (owner.cap !== null) owner.cap.cancel();
    web.clearTimersOf(owner);
    host.cancelOwned(owner);
    if (live.size === 0) {
      // Nothing is being served: whatever is left (timers set after an await, whose
      // request could not be told) belongs to no one.
      web.clearTimersOf(null);
      host.cancelOwned(null);
    }
    if (!told) host.notify("done", { id: owner.id });
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

  /** The `controller` argument of a scheduled handler. */
  class ScheduledController {
    #flags;
    constructor(cron, scheduledTime, flags) {
      this.#flags = flags;
      ObjectDefineProperty(this, "cron", { value: cron, enumerable: true });
      ObjectDefineProperty(this, "scheduledTime", { value: scheduledTime, enumerable: true });
    }
    noRetry() {
      this.#flags.noRetry = true;
    }
  }

  function resolveScheduled(main, ctx) {
    const exported = main.default;
    if (typeof exported === "function" && exported.prototype instanceof cloudflare.WorkerEntrypoint) {
      const instance = new exported(ctx, cloudflare.env);
      if (typeof instance.scheduled === "function") return (controller) => instance.scheduled(controller);
    } else if (exported && typeof exported.scheduled === "function") {
      return (controller) => exported.scheduled(controller, cloudflare.env, ctx);
    }
    return null;
  }

  /** Send a request's answer. A request with nothing left to wait for (no waitUntil work,
   * no open WebSocket) is over with it: the answer says so (`done`), one message instead of
   * a `respond` and a `done`. */
  function respond(owner, fields) {
    if (owner.finished) return;
    const over = owner.sockets === 0 && owner.waits === 0;
    if (over) fields.done = true;
    try {
      host.notify("respond", fields);
    } catch (error) {
      host.notify("respond", { id: owner.id, error: host.describeError(error), done: over });
    }
    owner.responded = true;
    if (over) finish(owner, true);
    else maybeFinish(owner);
  }

  /** Send a response's head (and a small body); a streamed body follows through its pipe,
   * and the request is served until all of it has been accepted (its timers and fetches
   * live on meanwhile, as in workerd). */
  function respondWith(owner, response) {
    if (owner.finished) return;
    const { wire, pump } = web.responseToHost(response);
    if (pump === null) {
      respond(owner, { id: owner.id, response: wire });
      return;
    }
    try {
      host.notify("respond", { id: owner.id, response: wire });
    } catch (error) {
      host.notify("pipe.abort", { p: wire.pipe, error: host.describeError(error) });
      respond(owner, { id: owner.id, error: host.describeError(error) });
      return;
    }
    const sent = () => {
      owner.responded = true;
      maybeFinish(owner);
    };
    // A stream that fails aborts its pipe with the error, which the host logs.
    PromisePrototypeThen(pump(owner), sent, sent);
  }

  /** Run the scheduled() handler: its outcome as workerd reports it. A Worker without one
   * gets workerd's error, with noRetry set (retrying cannot help). */
  function runScheduled(owner, message, ctx) {
    const flags = { noRetry: false };
    const event = message.scheduled;
    const outcome = host.runAs(owner, () => {
      try {
        const handler = resolveScheduled(globalThis.__celld_main, ctx);
        if (handler === null) {
          flags.noRetry = true;
          throw new Error("Handler does not export a scheduled() function");
        }
        return PromiseResolve(handler(new ScheduledController(event.cron, event.scheduledTime, flags)));
      } catch (error) {
        return PromiseReject(error);
      }
    });
    PromisePrototypeThen(
      outcome,
      () => respond(owner, { id: message.id, scheduled: { outcome: "ok", noRetry: flags.noRetry } }),
      (error) => respond(owner, {
        id: message.id,
        scheduled: { outcome: "exception", noRetry: flags.noRetry, error: host.describeError(error) },
      }),
    );
  }

  /** The object a service binding call reaches: an instance of the named entrypoint (or
   * the default export's class), or the default export object itself. */
  function entrypointTarget(main, name, ctx) {
    const exported = name === null || name === undefined ? main.default : main[name];
    if (typeof exported === "function" && exported.prototype instanceof cloudflare.WorkerEntrypoint) {
      return { instance: new exported(ctx, cloudflare.env), object: null };
    }
    if (name !== null && name !== undefined) {
      throw new TypeError(`The Worker has no named entrypoint "${name}" (an exported class extending WorkerEntrypoint).`);
    }
    if (exported && typeof exported === "object") return { instance: null, object: exported };
    throw new TypeError("The Worker has no default export to call.");
  }

  function cloneFailure(error) {
    try {
      return web.serialize(error);
    } catch (cloneError) {
      const shape = host.describeError(error);
      return web.serialize(new Error(`${shape.name}: ${shape.message}`));
    }
  }

  async function serveRpc(call, ctx) {
    const target = entrypointTarget(globalThis.__celld_main, call.entrypoint, ctx);
    if (call.kind === "fetch") {
      const request = web.requestFromWire(call.request);
      const response = target.instance !== null
        ? await target.instance.fetch(request)
        : await target.object.fetch(request, cloudflare.env, ctx);
      if (!(response instanceof Response)) {
        throw new TypeError("The Worker's fetch handler did not return a Response");
      }
      return { response: await web.responseToWire(response) };
    }
    if (target.instance === null) {
      throw new TypeError(
        "The receiving Worker does not support RPC, because its default export is not a class extending WorkerEntrypoint.",
      );
    }
    const method = call.method === "constructor" ? undefined : target.instance[call.method];
    if (typeof method !== "function") {
      throw new TypeError(`The RPC receiver does not implement the method "${call.method}".`);
    }
    const args = web.deserialize(call.args);
    return { v: web.serialize(await method.apply(target.instance, args)) };
  }

  function runRpc(owner, message, ctx) {
    const outcome = host.runAs(owner, () => {
      try {
        return PromiseResolve(serveRpc(message.rpc, ctx));
      } catch (error) {
        return PromiseReject(error);
      }
    });
    PromisePrototypeThen(
      outcome,
      (answer) => respond(owner, { id: message.id, rpc: answer }),
      (error) => respond(owner, { id: message.id, rpc: { e: cloneFailure(error) } }),
    );
  }

  host.on("fetch", (message) => {
    const owner = {
      id: message.id, waits: 0, responded: false, finished: false, cap: null, sockets: 0,
      socketOpened() {
        owner.sockets++;
      },
      socketClosed() {
        owner.sockets--;
        maybeFinish(owner);
      },
    };
    live.set(message.id, owner);
    const keepGoing = tracker(owner);
    const ctx = new ExecutionContext(keepGoing);
    cloudflare.setWaitUntil(keepGoing);
    if (message.scheduled !== undefined) {
      runScheduled(owner, message, ctx);
      return;
    }
    if (message.rpc !== undefined) {
      runRpc(owner, message, ctx);
      return;
    }
    if (message.queue !== undefined) {
      // A batch for the queue() handler (js/bindings/queue.js).
      globalThis.__celld_queues.run(owner, message, ctx, (fields) => respond(owner, fields));
      return;
    }
    const outcome = host.runAs(owner, () => {
      try {
        const request = web.requestFromWire(message.request);
        return PromiseResolve(resolveHandler(globalThis.__celld_main, ctx)(request));
      } catch (error) {
        return PromiseReject(error);
      }
    });
    const fail = (error) => respond(owner, { id: message.id, error: host.describeError(error) });
    // No callback here returns a promise: resolving with one would look up its `then`,
    // which user code may have replaced.
    PromisePrototypeThen(outcome, (response) => {
      if (!(response instanceof Response)) {
        fail(new TypeError(
          `The Worker's fetch handler returned ${response === null ? "null" : typeof response}, not a Response`,
        ));
        return;
      }
      try {
        respondWith(owner, response);
      } catch (error) {
        fail(error);
      }
    }, fail);
  });

  // The host gave up on a request (it hung, or the client went away): end it here too.
  host.on("drop", (message) => {
    const owner = live.get(message.id);
    if (owner !== undefined) {
      owner.responded = true;
      owner.waits = 0;
      finish(owner);
    }
  });
})();
