// AbortController and AbortSignal (abort, timeout, any).
"use strict";
(() => {
  const { ArrayFrom, ArrayPrototypePush } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const CREATE = Symbol("create");
  const signals = new WeakMap();

  function newSignal() {
    return new AbortSignal(CREATE);
  }

  /** Abort `signal` with `reason` (an AbortError DOMException when undefined). */
  function signalAbort(signal, reason) {
    const s = signals.get(signal);
    if (s.aborted) return;
    s.aborted = true;
    s.reason = reason === undefined ? new DOMException("This operation was aborted", "AbortError") : reason;
    const dependents = s.dependents;
    s.dependents = [];
    signal.dispatchEvent(new Event("abort"));
    for (const ref of dependents) {
      const dependent = ref.deref();
      if (dependent) signalAbort(dependent, s.reason);
    }
  }

  class AbortSignal extends EventTarget {
    constructor(key) {
      if (key !== CREATE) throw new TypeError("Illegal constructor");
      super();
      signals.set(this, { aborted: false, reason: undefined, onabort: null, dependents: [] });
    }

    get aborted() {
      return signals.get(this).aborted;
    }

    get reason() {
      return signals.get(this).reason;
    }

    get onabort() {
      return signals.get(this).onabort;
    }

    set onabort(handler) {
      const s = signals.get(this);
      if (s.onabort) this.removeEventListener("abort", s.onabort);
      s.onabort = typeof handler === "function" ? handler : null;
      if (s.onabort) this.addEventListener("abort", s.onabort);
    }

    throwIfAborted() {
      const s = signals.get(this);
      if (s.aborted) throw s.reason;
    }

    static abort(reason) {
      const signal = newSignal();
      signalAbort(signal, reason);
      return signal;
    }

    static timeout(ms) {
      const n = Number(ms);
      if (!Number.isFinite(n) || n < 0) {
        throw new TypeError("AbortSignal.timeout: the delay must be a non-negative number");
      }
      const signal = newSignal();
      setTimeout(() => {
        signalAbort(signal, new DOMException("The operation was aborted due to timeout", "TimeoutError"));
      }, n);
      return signal;
    }

    static any(list) {
      const sources = ArrayFrom(list);
      for (const source of sources) {
        if (!(source instanceof AbortSignal)) throw new TypeError("AbortSignal.any: every item must be an AbortSignal");
      }
      const signal = newSignal();
      const already = sources.find((source) => source.aborted);
      if (already) {
        signalAbort(signal, already.reason);
        return signal;
      }
      // Weak links: a combined signal nobody holds must not be kept alive by its sources.
      const ref = new WeakRef(signal);
      for (const source of sources) ArrayPrototypePush(signals.get(source).dependents, ref);
      return signal;
    }
  }

  class AbortController {
    #signal = newSignal();

    get signal() {
      return this.#signal;
    }

    abort(reason) {
      signalAbort(this.#signal, reason);
    }
  }

  for (const Class of [AbortSignal, AbortController]) {
    web.hideMethods(Class);
    web.setToStringTag(Class, Class.name);
    web.defineGlobal(Class.name, Class);
  }
  web.newAbortSignal = newSignal;
  web.signalAbort = signalAbort;
  /** A signal that follows `parent` (used by Request to own its signal). */
  web.followSignal = (parent) => (parent ? AbortSignal.any([parent]) : newSignal());
})();
