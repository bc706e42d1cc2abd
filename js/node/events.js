// node:events: EventEmitter with Node's listener semantics, and events.once().
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const kEvents = Symbol("events");
  const kMax = Symbol("maxListeners");
  let defaultMaxListeners = 10;

  function listenersOf(emitter) {
    if (!Object.prototype.hasOwnProperty.call(emitter, kEvents)) {
      Object.defineProperty(emitter, kEvents, { value: new Map(), configurable: true });
    }
    return emitter[kEvents];
  }

  function checkListener(listener) {
    if (typeof listener !== "function") {
      throw new TypeError(`The "listener" argument must be of type function. Received ${typeof listener}`);
    }
  }

  class EventEmitter {
    constructor() {
      listenersOf(this);
    }
    static get defaultMaxListeners() { return defaultMaxListeners; }
    static set defaultMaxListeners(n) { defaultMaxListeners = n; }
    setMaxListeners(n) { this[kMax] = n; return this; }
    getMaxListeners() { return this[kMax] ?? defaultMaxListeners; }
    addListener(name, listener) { return this.on(name, listener); }
    on(name, listener, prepend = false) {
      checkListener(listener);
      const map = listenersOf(this);
      if (map.has("newListener") && name !== "newListener") {
        this.emit("newListener", name, listener.listener ?? listener);
      }
      const list = map.get(name) || [];
      if (prepend) list.unshift(listener);
      else list.push(listener);
      map.set(name, list);
      return this;
    }
    prependListener(name, listener) { return this.on(name, listener, true); }
    once(name, listener) {
      checkListener(listener);
      return this.on(name, onceWrapper(this, name, listener));
    }
    prependOnceListener(name, listener) {
      checkListener(listener);
      return this.on(name, onceWrapper(this, name, listener), true);
    }
    off(name, listener) { return this.removeListener(name, listener); }
    removeListener(name, listener) {
      checkListener(listener);
      const map = listenersOf(this);
      const list = map.get(name);
      if (!list) return this;
      for (let i = list.length - 1; i >= 0; i--) {
        if (list[i] === listener || list[i].listener === listener) {
          list.splice(i, 1);
          if (list.length === 0) map.delete(name);
          if (map.has("removeListener")) this.emit("removeListener", name, listener);
          break;
        }
      }
      return this;
    }
    removeAllListeners(name) {
      const map = listenersOf(this);
      if (name === undefined) map.clear();
      else map.delete(name);
      return this;
    }
    emit(name, ...args) {
      const list = listenersOf(this).get(name);
      if (!list || list.length === 0) {
        if (name === "error") {
          const error = args[0];
          if (error instanceof Error) throw error;
          const wrapped = new Error(`Unhandled error. (${String(error)})`);
          wrapped.context = error;
          throw wrapped;
        }
        return false;
      }
      for (const listener of [...list]) listener.apply(this, args);
      return true;
    }
    listenerCount(name) { return (listenersOf(this).get(name) || []).length; }
    listeners(name) {
      return (listenersOf(this).get(name) || []).map((l) => l.listener ?? l);
    }
    rawListeners(name) { return [...(listenersOf(this).get(name) || [])]; }
    eventNames() { return [...listenersOf(this).keys()]; }
  }

  function onceWrapper(target, name, listener) {
    function wrapper(...args) {
      target.removeListener(name, wrapper);
      return listener.apply(this, args);
    }
    wrapper.listener = listener;
    return wrapper;
  }

  function once(emitter, name) {
    return new Promise((resolve, reject) => {
      const onError = (error) => {
        emitter.removeListener(name, onEvent);
        reject(error);
      };
      const onEvent = (...args) => {
        if (name !== "error") emitter.removeListener("error", onError);
        resolve(args);
      };
      emitter.once(name, onEvent);
      if (name !== "error") emitter.once("error", onError);
    });
  }

  EventEmitter.EventEmitter = EventEmitter;
  EventEmitter.once = once;
  EventEmitter.listenerCount = (emitter, name) => emitter.listenerCount(name);
  EventEmitter.errorMonitor = Symbol("events.errorMonitor");
  modules["node:events"] = Object.freeze(Object.assign(Object.create(null), {
    default: EventEmitter,
    EventEmitter,
    once,
    errorMonitor: EventEmitter.errorMonitor,
    listenerCount: EventEmitter.listenerCount,
    get defaultMaxListeners() { return defaultMaxListeners; },
  }));
})();
