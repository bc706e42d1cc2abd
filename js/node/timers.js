// node:timers and node:timers/promises. Under nodejs_compat workerd's global timer functions
// are node:timers' own (setTimeout returns a Timeout object), and setImmediate and
// clearImmediate are globals too; so here. Timers run on the runtime's (js/web/timers.js):
// a Timeout wraps a timer id and converts to that number; ref()/unref() are kept as flags,
// since a Worker's timers never hold a process open.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const web = globalThis.__celld_web;
  const webSetTimeout = globalThis.setTimeout;
  const webSetInterval = globalThis.setInterval;
  const webClear = globalThis.clearTimeout;
  const host = globalThis.__celld_host;

  class Timeout {
    #id;
    #ref = true;
    #start;
    constructor(start) {
      this.#start = start;
      this.#id = start(this);
    }
    ref() { this.#ref = true; return this; }
    unref() { this.#ref = false; return this; }
    hasRef() { return this.#ref; }
    refresh() {
      webClear(this.#id);
      this.#id = this.#start(this);
      return this;
    }
    close() {
      webClear(this.#id);
      return this;
    }
    [Symbol.toPrimitive]() {
      return this.#id;
    }
  }

  class Immediate extends Timeout {}

  function callable(callback) {
    if (typeof callback !== "function") {
      const error = new TypeError('The "callback" argument must be of type function.');
      error.code = "ERR_INVALID_ARG_TYPE";
      throw error;
    }
    return callback;
  }

  // (each callback runs in the async context it was scheduled in: js/node/async_hooks.js)
  function setTimeout(callback, ms, ...args) {
    const bound = host.bindContext(callable(callback));
    return new Timeout((t) => webSetTimeout(() => bound.apply(t, args), ms));
  }
  function setInterval(callback, ms, ...args) {
    const bound = host.bindContext(callable(callback));
    return new Timeout((t) => webSetInterval(() => bound.apply(t, args), ms));
  }
  function setImmediate(callback, ...args) {
    const bound = host.bindContext(callable(callback));
    return new Immediate((t) => webSetTimeout(() => bound.apply(t, args), 0));
  }
  function clear(timer) {
    if (timer instanceof Timeout) timer.close();
    else if (timer != null) webClear(timer);
  }

  // -- node:timers/promises -------------------------------------------------------------

  function abortError(signal) {
    const error = new Error("The operation was aborted", { cause: signal.reason });
    error.name = "AbortError";
    error.code = "ABORT_ERR";
    return error;
  }

  function delayed(ms, value, options = {}, immediate = false) {
    const signal = options && options.signal;
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) return reject(abortError(signal));
      const onAbort = () => {
        webClear(id);
        reject(abortError(signal));
      };
      const id = webSetTimeout(() => {
        if (signal) signal.removeEventListener("abort", onAbort);
        resolve(value);
      }, immediate ? 0 : ms);
      if (signal) signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  async function* interval(ms, value, options = {}) {
    const signal = options && options.signal;
    if (signal && signal.aborted) throw abortError(signal);
    let ticks = 0;
    let wake = null;
    const id = webSetInterval(() => {
      ticks++;
      if (wake) { const w = wake; wake = null; w(); }
    }, ms);
    const onAbort = () => { if (wake) { const w = wake; wake = null; w(); } };
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
    try {
      for (;;) {
        if (signal && signal.aborted) throw abortError(signal);
        if (ticks === 0) await new Promise((resolve) => { wake = resolve; });
        if (signal && signal.aborted) throw abortError(signal);
        while (ticks > 0) {
          ticks--;
          yield value;
        }
      }
    } finally {
      webClear(id);
      if (signal) signal.removeEventListener("abort", onAbort);
    }
  }

  const scheduler = {
    wait: (ms, options) => delayed(ms, undefined, options),
    yield: () => delayed(0, undefined, {}, true),
  };

  const promises = {
    setTimeout: (ms, value, options) => delayed(ms, value, options),
    setImmediate: (value, options) => delayed(0, value, options, true),
    setInterval: interval,
    scheduler,
  };

  const timers = {
    setTimeout,
    setInterval,
    setImmediate,
    clearTimeout: clear,
    clearInterval: clear,
    clearImmediate: clear,
    Timeout,
    promises,
    /** Node's legacy timer list functions: deprecated there, refused here by name. */
    active: refused("active"),
    enroll: refused("enroll"),
    unenroll: refused("unenroll"),
  };

  function refused(name) {
    return () => {
      const error = new Error(`celld: timers.${name} (deprecated in Node) is not provided; use setTimeout`);
      error.code = "ERR_METHOD_NOT_IMPLEMENTED";
      throw error;
    };
  }

  web.defineGlobal("setTimeout", setTimeout);
  web.defineGlobal("setInterval", setInterval);
  web.defineGlobal("clearTimeout", clear);
  web.defineGlobal("clearInterval", clear);
  web.defineGlobal("setImmediate", setImmediate);
  web.defineGlobal("clearImmediate", clear);
  modules["node:timers"] = Object.freeze(Object.assign(Object.create(null), timers, { default: timers }));
  modules["node:timers/promises"] = Object.freeze(Object.assign(Object.create(null), promises, {
    default: promises,
  }));
})();
