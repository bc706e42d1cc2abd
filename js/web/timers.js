// Timers (setTimeout & co.), scheduler.wait, performance and navigator.
//
// A timer is a `timer` host request that resolves after `ms` of wall time. Clearing
// a timer withdraws that request, so the host stops waiting for it (a long cleared
// timer must not count as work still pending for the request that set it).
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;
  const { Number, NumberIsFinite, PromisePrototypeThen, ReflectApply, SafeMap, String } =
    globalThis.__celld_primordials;
  // id -> {fn, args, ms, repeat, owner}. A timer belongs to the request that set it
  // (when known) and is cleared when that request is over (see clearTimersOf).
  const active = new SafeMap();
  let nextId = 1;

  function delayOf(ms) {
    const n = Number(ms);
    return NumberIsFinite(n) && n > 0 ? n : 0;
  }

  function arm(id) {
    const timer = active.get(id);
    const generation = ++timer.generation;
    const request = host.runAs(timer.owner, () => host.requestCancellable("timer", { ms: timer.ms }));
    timer.cancel = request.cancel;
    PromisePrototypeThen(request.promise, () => {
      const current = active.get(id);
      if (current !== timer || timer.generation !== generation) return; // cleared
      if (timer.repeat) arm(id);
      else active.delete(id);
      host.runAs(timer.owner, () => {
        try {
          if (typeof timer.fn === "function") ReflectApply(timer.fn, undefined, timer.args);
          else (0, eval)(String(timer.fn)); // string callbacks, as browsers allow
        } catch (error) {
          web.reportError(error);
        }
      });
    }, (error) => web.reportError(error));
  }

  function schedule(fn, ms, args, repeat) {
    const id = nextId++;
    active.set(id, { fn, args, ms: delayOf(ms), repeat, generation: 0, owner: host.owner() });
    arm(id);
    return id;
  }

  function clear(id) {
    // Workers timers are plain numbers; accept objects with a numeric valueOf too.
    const key = Number(id);
    const timer = active.get(key);
    if (!timer) return;
    active.delete(key);
    timer.cancel();
  }

  /** Clear every timer `owner` set (null: every timer at all): its request is over. */
  function clearTimersOf(owner) {
    const ids = [];
    active.forEach((timer, id) => {
      if (owner === null || timer.owner === owner) ids[ids.length] = id;
    });
    for (let i = 0; i < ids.length; i++) clear(ids[i]);
  }
  web.clearTimersOf = clearTimersOf;

  web.defineGlobal("setTimeout", function setTimeout(fn, ms = 0, ...args) {
    return schedule(fn, ms, args, false);
  });
  web.defineGlobal("setInterval", function setInterval(fn, ms = 0, ...args) {
    return schedule(fn, ms, args, true);
  });
  web.defineGlobal("clearTimeout", function clearTimeout(id) {
    clear(id);
  });
  web.defineGlobal("clearInterval", function clearInterval(id) {
    clear(id);
  });

  /** Wait `ms` of wall time; rejects with the signal's reason if it aborts first. */
  function wait(ms, options = {}) {
    const signal = options && options.signal;
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) {
        reject(signal.reason);
        return;
      }
      const id = setTimeout(resolve, ms);
      if (signal) {
        signal.addEventListener("abort", () => {
          clearTimeout(id);
          reject(signal.reason);
        }, { once: true });
      }
    });
  }
  web.wait = wait;

  const scheduler = {};
  Object.defineProperty(scheduler, "wait", { value: wait, enumerable: true });
  web.defineGlobal("scheduler", scheduler);

  // performance: QuickJS has one, but its timeOrigin is not an epoch time.
  const nativeNow = globalThis.performance && globalThis.performance.now
    ? globalThis.performance.now.bind(globalThis.performance)
    : () => Date.now();
  const startNative = nativeNow();
  const timeOrigin = Date.now();
  class Performance {
    get timeOrigin() {
      return timeOrigin;
    }

    now() {
      return nativeNow() - startNative;
    }

    toJSON() {
      return { timeOrigin };
    }
  }
  web.hideMethods(Performance);
  web.setToStringTag(Performance, "Performance");
  web.defineGlobal("Performance", Performance);
  web.defineGlobal("performance", new Performance());

  class Navigator {
    get userAgent() {
      return "Cloudflare-Workers";
    }

    get hardwareConcurrency() {
      return 1;
    }

    get language() {
      return "en";
    }
  }
  web.hideMethods(Navigator);
  web.setToStringTag(Navigator, "Navigator");
  web.defineGlobal("Navigator", Navigator);
  web.defineGlobal("navigator", new Navigator());
})();
