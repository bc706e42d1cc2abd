// node:async_hooks: AsyncLocalStorage and AsyncResource, with the context carried as workerd
// carries it: through `await`, promise callbacks, timers, setImmediate and queueMicrotask;
// each event the host delivers (a request, an alarm) and each workflow step callback starts
// in the empty context (under wrangler dev a step callback does not see run()'s store).
//
// A context is an immutable Map (AsyncLocalStorage -> store). The current one is `current`.
// QuickJS keeps no context across `await`, so the bundler rewrites every `await X` of a
// Worker that imports this module into `__celld_ar(__celld_ac(), await __celld_as(X))`
// (celld/isolate/async_context.py): the context is taken before the function suspends and
// made current again in the job that resumes it. Promise callbacks and timers take the
// context when they are registered and run in it. createHook returns a hook that is never
// called, as workerd's does; the async ids are refused.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const host = globalThis.__celld_host;
  const { PromisePrototypeThen, PromiseResolve, ReflectApply, SafeMap } = globalThis.__celld_primordials;

  const EMPTY = new SafeMap();
  let current = EMPTY;

  /** Run `fn` with `context` current, and put back the one before. */
  function runIn(context, fn, thisArg, args) {
    const previous = current;
    current = context;
    try {
      return ReflectApply(fn, thisArg, args);
    } finally {
      current = previous;
    }
  }

  /** `fn`, bound to the context current now (a callback registered now runs in it). */
  function bindCurrent(fn) {
    if (typeof fn !== "function") return fn;
    const context = current;
    if (context === EMPTY) {
      return function bound(...args) { return runIn(EMPTY, fn, this, args); };
    }
    return function bound(...args) { return runIn(context, fn, this, args); };
  }

  // -- what the rewritten `await` calls ----------------------------------------------------

  const THROWN = Symbol("thrown");
  const failed = (error) => ({ [THROWN]: error });
  const hidden = { configurable: false, enumerable: false, writable: false };
  Object.defineProperty(globalThis, "__celld_ac", { ...hidden, value: () => current });
  Object.defineProperty(globalThis, "__celld_as", {
    ...hidden,
    value: (operand) => PromisePrototypeThen(PromiseResolve(operand), (value) => [value], failed),
  });
  Object.defineProperty(globalThis, "__celld_ar", {
    ...hidden,
    value: (context, outcome) => {
      current = context;
      if (outcome !== null && typeof outcome === "object" && THROWN in outcome) throw outcome[THROWN];
      return outcome[0];
    },
  });

  // -- registrations carry the context -----------------------------------------------------

  const PromisePrototype = Promise.prototype;
  const originalThen = PromisePrototype.then;
  Object.defineProperty(PromisePrototype, "then", {
    configurable: true,
    enumerable: false,
    writable: true,
    value: function then(onFulfilled, onRejected) {
      return ReflectApply(originalThen, this, [bindCurrent(onFulfilled), bindCurrent(onRejected)]);
    },
  });
  const originalQueueMicrotask = globalThis.queueMicrotask;
  Object.defineProperty(globalThis, "queueMicrotask", {
    configurable: true,
    enumerable: false,
    writable: true,
    value: function queueMicrotask(callback) {
      return ReflectApply(originalQueueMicrotask, globalThis, [bindCurrent(callback)]);
    },
  });
  // Timers (js/node/timers.js) and step callbacks (js/workflows/step.js) ask the bridge to
  // bind what they will call later; every delivered event starts in the empty context.
  host.setContextHooks(bindCurrent, () => { current = EMPTY; });

  // -- the API -------------------------------------------------------------------------------

  class AsyncLocalStorage {
    #enabled = true;

    static bind(fn) {
      return bindCurrent(fn);
    }

    static snapshot() {
      const context = current;
      return (fn, ...args) => runIn(context, fn, undefined, args);
    }

    getStore() {
      return this.#enabled ? current.get(this) : undefined;
    }

    run(store, fn, ...args) {
      const context = new SafeMap(current);
      context.set(this, store);
      this.#enabled = true;
      return runIn(context, fn, undefined, args);
    }

    exit(fn, ...args) {
      if (!current.has(this)) return ReflectApply(fn, undefined, args);
      const context = new SafeMap(current);
      context.delete(this);
      return runIn(context, fn, undefined, args);
    }

    enterWith(store) {
      const context = new SafeMap(current);
      context.set(this, store);
      this.#enabled = true;
      current = context;
    }

    disable() {
      this.#enabled = false;
      if (current.has(this)) {
        const context = new SafeMap(current);
        context.delete(this);
        current = context;
      }
    }

    get name() {
      return "";
    }
  }

  class AsyncResource {
    #context = current;
    #type;
    constructor(type, options) {
      if (typeof type !== "string") {
        const error = new TypeError('The "type" argument must be of type string.');
        error.code = "ERR_INVALID_ARG_TYPE";
        throw error;
      }
      this.#type = type;
      void options;
    }

    static bind(fn, type, thisArg) {
      return new AsyncResource(type || fn.name || "bound-anonymous-fn").bind(fn, thisArg);
    }

    runInAsyncScope(fn, thisArg, ...args) {
      return runIn(this.#context, fn, thisArg, args);
    }

    bind(fn, thisArg) {
      const resource = this;
      return function bound(...args) {
        return resource.runInAsyncScope(fn, thisArg === undefined ? this : thisArg, ...args);
      };
    }

    emitDestroy() {
      return this;
    }

    asyncId() {
      return 0;
    }

    triggerAsyncId() {
      return 0;
    }

    get type() {
      return this.#type;
    }
  }

  function notProvided(name) {
    return () => {
      const error = new Error(
        `celld: async_hooks.${name} is not provided: celld tracks no async ids; use AsyncLocalStorage or AsyncResource`);
      error.code = "ERR_METHOD_NOT_IMPLEMENTED";
      throw error;
    };
  }

  /** workerd's createHook: a hook whose callbacks are never called. */
  function createHook(callbacks) {
    void callbacks;
    return { enable() { return this; }, disable() { return this; } };
  }

  const asyncHooks = {
    AsyncLocalStorage,
    AsyncResource,
    createHook: createHook,
    executionAsyncId: notProvided("executionAsyncId"),
    executionAsyncResource: notProvided("executionAsyncResource"),
    triggerAsyncId: notProvided("triggerAsyncId"),
  };
  modules["node:async_hooks"] = Object.freeze(Object.assign(Object.create(null), asyncHooks, {
    default: asyncHooks,
  }));
})();
