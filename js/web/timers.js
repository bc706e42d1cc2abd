// Timers (setTimeout & co.), scheduler.wait, performance and navigator.
//
// Every timer of the isolate lives in one binary heap here, ordered by deadline and then
// by the order the timers were set. The host holds one `timer` request, for the earliest
// deadline: 100,000 timers cost their memory in the isolate and a single host timer, not
// 100,000 tasks on the server's event loop. When it fires, the timers then due run one
// per job (the microtasks a callback queues run before the next timer), and the host
// timer is set again for the next deadline. clearTimeout marks a timer dead (the heap
// drops it when it comes up, and is compacted when the dead outnumber the live); when no
// timer is left the host timer is withdrawn, so a cleared timer does not count as work
// still pending for the request that set it.
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;
  const {
    Number, NumberIsFinite, ObjectCreate, ObjectFreeze, PromisePrototypeThen, PromiseResolve,
    RangeError, ReflectApply, SafeMap, SafeSet, String,
  } = globalThis.__celld_primordials;

  /** Timers one isolate may hold at once: setting one more throws. A timer costs some
   * 260 bytes of the isolate's memory besides its callback (about 380 with a small arrow
   * function): this many take about 75 MiB, inside the 128 MiB default. */
  const MAX_TIMERS = 200_000;

  // performance: QuickJS has one (monotonic), but its timeOrigin is not an epoch time.
  // Deadlines count from the turn's clock (host.turnTime, the same clock read once per
  // turn); the host timer is set from the live one.
  const nativeNow = globalThis.performance && globalThis.performance.now
    ? globalThis.performance.now.bind(globalThis.performance)
    : () => Date.now();

  /** id -> live timer {id, fn, ms, repeat, owner, deadline, seq, dead}: a dictionary
   * object, as QuickJS's Map hashes small integer keys into few buckets. A live timer is
   * always in the heap (an interval leaves it only to be put back as it fires). Eight
   * properties: QuickJS sizes an object's property table in steps, and a ninth would
   * cost 64 bytes more per timer. */
  let active = ObjectCreate(null);
  let count = 0;
  /** owner -> set of its live timers, cleared when its request is over. */
  const byOwner = new SafeMap();
  /** A binary heap of timers by (deadline, seq); holds `dead` cleared timers too. */
  let heap = [];
  let dead = 0;
  let nextId = 1;
  let nextSeq = 0;
  /** The host timer: {deadline, cancel}, or null when none is set. */
  let armed = null;
  let armQueued = false;
  /** While due timers run: the time and sequence number the batch started at (timers set
   * or re-armed meanwhile wait for the next batch, so a 0 ms interval cannot spin). */
  let running = false;
  let batchNow = 0;
  let batchSeq = 0;
  /** Bumped when the isolate is reset for another run: a batch of the old run stops. */
  let epoch = 0;
  /** Owns the host timer: no request's end cancels it (`host.cancelOwned(owner)`; the
   * Worker entry calls `cancelOwned(null)` only after `clearTimersOf(null)` withdrew it). */
  const HEAP_OWNER = ObjectFreeze({ owner: "timer heap" });
  const RESOLVED = PromiseResolve(undefined);

  function before(a, b) {
    return a.deadline < b.deadline || (a.deadline === b.deadline && a.seq < b.seq);
  }

  function siftUp(i) {
    const timer = heap[i];
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(timer, heap[parent])) break;
      heap[i] = heap[parent];
      i = parent;
    }
    heap[i] = timer;
  }

  function siftDown(i) {
    const n = heap.length;
    const timer = heap[i];
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap[child + 1], heap[child])) child++;
      if (!before(heap[child], timer)) break;
      heap[i] = heap[child];
      i = child;
    }
    heap[i] = timer;
  }

  function popTop() {
    const top = heap[0];
    const last = heap[heap.length - 1];
    heap.length -= 1;
    if (heap.length > 0) {
      heap[0] = last;
      siftDown(0);
    }
    return top;
  }

  /** The earliest live timer (dropping dead ones on the way), or undefined. */
  function peekLive() {
    while (heap.length > 0 && heap[0].dead) {
      popTop();
      dead--;
    }
    return heap[0];
  }

  /** Rebuild the heap without its dead timers once they are most of it. */
  function maybeCompact() {
    if (dead < 1024 || dead * 2 < heap.length) return;
    const live = [];
    for (let i = 0; i < heap.length; i++) {
      if (!heap[i].dead) live[live.length] = heap[i];
    }
    heap = live;
    dead = 0;
    for (let i = (heap.length >> 1) - 1; i >= 0; i--) siftDown(i);
  }

  function insert(timer, now) {
    timer.deadline = now + timer.ms;
    timer.seq = nextSeq++;
    heap[heap.length] = timer;
    siftUp(heap.length - 1);
    if (!running && (armed === null || timer.deadline < armed.deadline)) queueArm();
  }

  /** Set the host timer once the current job is done: a turn that sets many timers
   * sends one request for the earliest, not one per new earliest. */
  function queueArm() {
    if (armQueued) return;
    armQueued = true;
    PromisePrototypeThen(RESOLVED, arm);
  }

  function disarm() {
    if (armed !== null) {
      armed.cancel();
      armed = null;
    }
  }

  /** Make the host timer match the earliest live timer (none: withdraw it). */
  function arm() {
    armQueued = false;
    if (running) return; // the batch sets it as it ends
    const top = peekLive();
    if (top === undefined) {
      disarm();
      return;
    }
    if (armed !== null && armed.deadline <= top.deadline) return; // it fires first anyway
    disarm();
    const ms = top.deadline - nativeNow();
    const request = host.runAs(
      HEAP_OWNER, () => host.requestCancellable("timer", { ms: ms > 0 ? ms : 0 }),
    );
    const mine = { deadline: top.deadline, cancel: request.cancel };
    armed = mine;
    PromisePrototypeThen(request.promise, () => {
      if (armed !== mine) return; // withdrawn meanwhile
      armed = null;
      running = true;
      batchNow = nativeNow();
      batchSeq = nextSeq;
      runNext(epoch);
    }, (error) => web.reportError(error));
  }

  /** Run the next timer due in this batch, then queue the one after it as a job. */
  function runNext(batchEpoch) {
    if (batchEpoch !== epoch) return;
    const timer = peekLive();
    if (timer === undefined || timer.deadline > batchNow || timer.seq >= batchSeq) {
      running = false;
      arm();
      return;
    }
    popTop();
    if (timer.repeat) insert(timer, host.turnTime());
    else forget(timer);
    try {
      host.runAs(timer.owner, () => {
        try {
          const fn = timer.fn;
          fn(); // as a plain call: `this` is not the timer record
        } catch (error) {
          web.reportError(error);
        }
      });
    } finally {
      PromisePrototypeThen(RESOLVED, () => runNext(batchEpoch));
    }
  }

  function delayOf(ms) {
    const n = Number(ms);
    return NumberIsFinite(n) && n > 0 ? n : 0;
  }

  /** The timer's callback as a function of no arguments. */
  function callbackOf(fn, args) {
    if (typeof fn !== "function") {
      const code = String(fn); // string callbacks, as browsers allow
      return () => (0, eval)(code);
    }
    if (args.length === 0) return fn;
    return () => ReflectApply(fn, undefined, args);
  }

  function forget(timer) {
    delete active[timer.id];
    count--;
    const owned = byOwner.get(timer.owner);
    if (owned !== undefined) {
      owned.delete(timer);
      if (owned.size === 0) byOwner.delete(timer.owner);
    }
  }

  /** Forget every timer at once (a request's end with nothing else served, a reset). */
  function forgetAll() {
    for (let i = 0; i < heap.length; i++) heap[i].dead = true;
    active = ObjectCreate(null);
    count = 0;
    byOwner.clear();
    heap = [];
    dead = 0;
  }

  function schedule(fn, ms, args, repeat) {
    if (count >= MAX_TIMERS) {
      throw new RangeError(
        `timers: limit reached (${MAX_TIMERS} timers are pending in this isolate)`,
      );
    }
    const id = nextId++;
    const owner = host.owner();
    const timer = {
      id, fn: callbackOf(fn, args), ms: delayOf(ms), repeat, owner, deadline: 0, seq: 0,
      dead: false,
    };
    active[id] = timer;
    count++;
    let owned = byOwner.get(owner);
    if (owned === undefined) {
      owned = new SafeSet();
      byOwner.set(owner, owned);
    }
    owned.add(timer);
    insert(timer, host.turnTime());
    return id;
  }

  function clear(id) {
    // Workers timers are plain numbers; accept objects with a numeric valueOf too.
    const timer = active[Number(id)];
    if (timer !== undefined) drop(timer);
  }

  function drop(timer) {
    forget(timer);
    timer.dead = true;
    dead++;
    maybeCompact();
    if (count === 0 && !running) disarm();
  }

  /** Clear every timer `owner` set (null: every timer at all): its request is over. */
  function clearTimersOf(owner) {
    if (owner === null) {
      forgetAll();
      if (!running) disarm();
      return;
    }
    const owned = byOwner.get(owner);
    if (owned === undefined) return;
    const timers = [];
    owned.forEach((timer) => {
      timers[timers.length] = timer;
    });
    for (let i = 0; i < timers.length; i++) drop(timers[i]);
  }
  web.clearTimersOf = clearTimersOf;

  // Another run gets the isolate: the host forgot the host timer, and the old run's
  // timers would never fire.
  host.afterReset(() => {
    epoch++;
    forgetAll();
    armed = null;
    running = false;
  });

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
