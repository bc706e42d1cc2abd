// node:perf_hooks: `performance` (the global one, given mark, measure and the entry lists),
// PerformanceObserver, and createHistogram. monitorEventLoopDelay is refused by name: the
// event loop it would watch is the host's, not the Worker's.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const performance = globalThis.performance;
  const Performance = globalThis.Performance;

  class PerformanceEntry {
    #name; #type; #start; #duration; #detail;
    constructor(name, type, start, duration, detail) {
      this.#name = name; this.#type = type; this.#start = start; this.#duration = duration;
      this.#detail = detail ?? null;
    }
    get name() { return this.#name; }
    get entryType() { return this.#type; }
    get startTime() { return this.#start; }
    get duration() { return this.#duration; }
    get detail() { return this.#detail; }
    toJSON() {
      return { name: this.name, entryType: this.entryType, startTime: this.startTime,
        duration: this.duration, detail: this.detail };
    }
  }
  class PerformanceMark extends PerformanceEntry {
    constructor(name, options = {}) {
      super(String(name), "mark", options.startTime ?? performance.now(), 0, options.detail);
    }
  }
  class PerformanceMeasure extends PerformanceEntry {}

  const entries = [];
  const observers = new Set();

  function add(entry) {
    entries.push(entry);
    for (const observer of observers) observer._offer(entry);
    return entry;
  }

  function timeOf(mark, fallback) {
    if (mark === undefined) return fallback;
    if (typeof mark === "number") return mark;
    for (let i = entries.length - 1; i >= 0; i--) {
      if (entries[i].entryType === "mark" && entries[i].name === mark) return entries[i].startTime;
    }
    throw new DOMException(`The "${mark}" performance mark has not been set`, "SyntaxError");
  }

  const methods = {
    mark(name, options) {
      return add(new PerformanceMark(name, options));
    },
    measure(name, startOrOptions, endMark) {
      let start;
      let end;
      let detail;
      if (startOrOptions && typeof startOrOptions === "object") {
        start = timeOf(startOrOptions.start, 0);
        end = startOrOptions.end !== undefined ? timeOf(startOrOptions.end)
          : startOrOptions.duration !== undefined ? start + startOrOptions.duration : performance.now();
        detail = startOrOptions.detail;
      } else {
        start = timeOf(startOrOptions, 0);
        end = timeOf(endMark, performance.now());
      }
      return add(new PerformanceMeasure(String(name), "measure", start, end - start, detail));
    },
    getEntries() { return entries.slice(); },
    getEntriesByName(name, type) {
      return entries.filter((e) => e.name === name && (type === undefined || e.entryType === type));
    },
    getEntriesByType(type) { return entries.filter((e) => e.entryType === type); },
    clearMarks(name) { remove("mark", name); },
    clearMeasures(name) { remove("measure", name); },
  };

  function remove(type, name) {
    for (let i = entries.length - 1; i >= 0; i--) {
      if (entries[i].entryType === type && (name === undefined || entries[i].name === name)) {
        entries.splice(i, 1);
      }
    }
  }

  for (const [name, fn] of Object.entries(methods)) {
    if (!(name in Performance.prototype)) {
      Object.defineProperty(Performance.prototype, name, {
        value: fn, writable: true, configurable: true, enumerable: false,
      });
    }
  }

  class PerformanceObserverEntryList {
    #list;
    constructor(list) { this.#list = list; }
    getEntries() { return this.#list.slice(); }
    getEntriesByName(name, type) {
      return this.#list.filter((e) => e.name === name && (type === undefined || e.entryType === type));
    }
    getEntriesByType(type) { return this.#list.filter((e) => e.entryType === type); }
  }

  class PerformanceObserver {
    #callback; #types = new Set(); #buffer = []; #queued = false;
    static get supportedEntryTypes() { return ["mark", "measure"]; }
    constructor(callback) {
      if (typeof callback !== "function") throw new TypeError("PerformanceObserver needs a callback");
      this.#callback = callback;
    }
    observe(options = {}) {
      const types = options.entryTypes ?? (options.type !== undefined ? [options.type] : []);
      for (const type of types) this.#types.add(type);
      observers.add(this);
      if (options.buffered) for (const entry of entries) this._offer(entry);
    }
    disconnect() {
      observers.delete(this);
      this.#buffer = [];
    }
    takeRecords() {
      const records = this.#buffer;
      this.#buffer = [];
      return records;
    }
    _offer(entry) {
      if (!this.#types.has(entry.entryType)) return;
      this.#buffer.push(entry);
      if (this.#queued) return;
      this.#queued = true;
      queueMicrotask(() => {
        this.#queued = false;
        const records = this.takeRecords();
        if (records.length) this.#callback(new PerformanceObserverEntryList(records), this);
      });
    }
  }

  /** Node's RecordableHistogram, over the values recorded (kept exactly). */
  class RecordableHistogram {
    #values = [];
    #exceeds = 0;
    record(value) {
      const n = typeof value === "bigint" ? Number(value) : value;
      if (!Number.isFinite(n) || n < 1) {
        const error = new RangeError(`The value of "val" is out of range. It must be >= 1. Received ${value}`);
        error.code = "ERR_OUT_OF_RANGE";
        throw error;
      }
      this.#values.push(n);
    }
    recordDelta() {
      const now = performance.now() * 1e6;
      if (this._last !== undefined) this.record(Math.max(1, Math.round(now - this._last)));
      this._last = now;
    }
    get count() { return this.#values.length; }
    get min() { return this.#values.length ? Math.min(...this.#values) : 9223372036854776000; }
    get max() { return this.#values.length ? Math.max(...this.#values) : 0; }
    get mean() {
      return this.#values.length ? this.#values.reduce((a, b) => a + b, 0) / this.#values.length : NaN;
    }
    get stddev() {
      if (!this.#values.length) return NaN;
      const mean = this.mean;
      return Math.sqrt(this.#values.reduce((a, b) => a + (b - mean) ** 2, 0) / this.#values.length);
    }
    get exceeds() { return this.#exceeds; }
    percentile(p) {
      if (!(p > 0 && p <= 100)) {
        const error = new RangeError(`The value of "percentile" is out of range. It must be > 0 && <= 100. Received ${p}`);
        error.code = "ERR_OUT_OF_RANGE";
        throw error;
      }
      if (!this.#values.length) return 0;
      const sorted = this.#values.slice().sort((a, b) => a - b);
      return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
    }
    get percentiles() {
      const out = new Map();
      for (const p of [0, 50, 75, 87.5, 100]) out.set(p, p === 0 ? this.min : this.percentile(p));
      return out;
    }
    reset() { this.#values = []; this.#exceeds = 0; this._last = undefined; }
  }

  function monitorEventLoopDelay() {
    const error = new Error(
      "celld: perf_hooks.monitorEventLoopDelay is not provided: the event loop it would watch is celld's own, shared by every Worker");
    error.code = "ERR_METHOD_NOT_IMPLEMENTED";
    throw error;
  }

  const perfHooks = {
    performance,
    Performance,
    PerformanceEntry,
    PerformanceMark,
    PerformanceMeasure,
    PerformanceObserver,
    PerformanceObserverEntryList,
    createHistogram: () => new RecordableHistogram(),
    monitorEventLoopDelay,
    constants: {
      NODE_PERFORMANCE_GC_MAJOR: 4, NODE_PERFORMANCE_GC_MINOR: 1, NODE_PERFORMANCE_GC_INCREMENTAL: 8,
      NODE_PERFORMANCE_GC_WEAKCB: 16, NODE_PERFORMANCE_GC_FLAGS_NO: 0,
      NODE_PERFORMANCE_GC_FLAGS_CONSTRUCT_RETAINED: 2, NODE_PERFORMANCE_GC_FLAGS_FORCED: 4,
      NODE_PERFORMANCE_GC_FLAGS_SYNCHRONOUS_PHANTOM_PROCESSING: 8,
      NODE_PERFORMANCE_GC_FLAGS_ALL_AVAILABLE_GARBAGE: 16,
      NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY: 32, NODE_PERFORMANCE_GC_FLAGS_SCHEDULE_IDLE: 64,
    },
  };
  modules["node:perf_hooks"] = Object.freeze(Object.assign(Object.create(null), perfHooks, {
    default: perfHooks,
  }));
})();
