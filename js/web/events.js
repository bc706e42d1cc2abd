// Event, CustomEvent and EventTarget: enough of DOM events for AbortSignal and for
// libraries that use EventTarget as a plain emitter (no bubbling: there is no tree).
"use strict";
(() => {
  const { ArrayPrototypePush, SafeMap } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const eventState = new WeakMap();
  const listeners = new WeakMap();
  const origin = Date.now();

  class Event {
    constructor(type, init = {}) {
      if (arguments.length === 0) throw new TypeError("Event: the type argument is required");
      eventState.set(this, {
        type: String(type),
        bubbles: Boolean(init && init.bubbles),
        cancelable: Boolean(init && init.cancelable),
        composed: Boolean(init && init.composed),
        defaultPrevented: false,
        stop: false,
        stopImmediate: false,
        target: null,
        currentTarget: null,
        phase: 0,
        timeStamp: Date.now() - origin,
        passive: false,
      });
    }

    get type() { return eventState.get(this).type; }
    get bubbles() { return eventState.get(this).bubbles; }
    get cancelable() { return eventState.get(this).cancelable; }
    get composed() { return eventState.get(this).composed; }
    get defaultPrevented() { return eventState.get(this).defaultPrevented; }
    get target() { return eventState.get(this).target; }
    get srcElement() { return eventState.get(this).target; }
    get currentTarget() { return eventState.get(this).currentTarget; }
    get eventPhase() { return eventState.get(this).phase; }
    get timeStamp() { return eventState.get(this).timeStamp; }
    get isTrusted() { return false; }
    get returnValue() { return !eventState.get(this).defaultPrevented; }
    get cancelBubble() { return eventState.get(this).stop; }
    set cancelBubble(v) { if (v) eventState.get(this).stop = true; }

    composedPath() {
      const s = eventState.get(this);
      return s.currentTarget ? [s.currentTarget] : [];
    }

    preventDefault() {
      const s = eventState.get(this);
      if (s.cancelable && !s.passive) s.defaultPrevented = true;
    }

    stopPropagation() { eventState.get(this).stop = true; }

    stopImmediatePropagation() {
      const s = eventState.get(this);
      s.stop = true;
      s.stopImmediate = true;
    }
  }
  for (const [name, value] of [["NONE", 0], ["CAPTURING_PHASE", 1], ["AT_TARGET", 2], ["BUBBLING_PHASE", 3]]) {
    Object.defineProperty(Event, name, { value, enumerable: true });
    Object.defineProperty(Event.prototype, name, { value, enumerable: true });
  }

  class CustomEvent extends Event {
    #detail;
    constructor(type, init = {}) {
      super(type, init);
      this.#detail = init && init.detail !== undefined ? init.detail : null;
    }

    get detail() { return this.#detail; }
  }

  function flatCapture(options) {
    return typeof options === "boolean" ? options : Boolean(options && options.capture);
  }

  class EventTarget {
    constructor() {
      listeners.set(this, new SafeMap());
    }

    addEventListener(type, listener, options = {}) {
      if (listener === null || listener === undefined) return;
      const map = listeners.get(this);
      if (!map) throw new TypeError("Illegal invocation");
      const capture = flatCapture(options);
      const once = typeof options === "object" && options !== null && Boolean(options.once);
      const passive = typeof options === "object" && options !== null && Boolean(options.passive);
      const signal = typeof options === "object" && options !== null ? options.signal : undefined;
      if (signal && signal.aborted) return;
      const key = String(type);
      if (!map.has(key)) map.set(key, []);
      const list = map.get(key);
      if (list.some((l) => l.listener === listener && l.capture === capture)) return;
      const entry = { listener, capture, once, passive, removed: false };
      ArrayPrototypePush(list, entry);
      if (signal) {
        signal.addEventListener("abort", () => this.removeEventListener(key, listener, { capture }));
      }
    }

    removeEventListener(type, listener, options = {}) {
      const map = listeners.get(this);
      if (!map) throw new TypeError("Illegal invocation");
      const list = map.get(String(type));
      if (!list) return;
      const capture = flatCapture(options);
      const index = list.findIndex((l) => l.listener === listener && l.capture === capture);
      if (index >= 0) {
        list[index].removed = true;
        list.splice(index, 1);
      }
    }

    dispatchEvent(event) {
      if (!(event instanceof Event)) throw new TypeError("EventTarget.dispatchEvent: argument is not an Event");
      const map = listeners.get(this);
      if (!map) throw new TypeError("Illegal invocation");
      const s = eventState.get(event);
      s.target = this;
      s.currentTarget = this;
      s.phase = 2;
      const list = (map.get(s.type) || []).slice();
      for (const entry of list) {
        if (entry.removed) continue;
        if (entry.once) this.removeEventListener(s.type, entry.listener, { capture: entry.capture });
        s.passive = entry.passive;
        try {
          if (typeof entry.listener === "function") entry.listener.call(this, event);
          else if (entry.listener && typeof entry.listener.handleEvent === "function") entry.listener.handleEvent(event);
        } catch (error) {
          reportError(error);
        }
        s.passive = false;
        if (s.stopImmediate) break;
      }
      s.currentTarget = null;
      s.phase = 0;
      return !s.defaultPrevented;
    }
  }

  /** An exception in a listener or a timer callback: log it, as the runtime would. */
  function reportError(error) {
    globalThis.console.error("Uncaught", error);
  }

  for (const Class of [Event, CustomEvent, EventTarget]) {
    web.hideMethods(Class);
    web.setToStringTag(Class, Class.name);
    web.defineGlobal(Class.name, Class);
  }
  web.reportError = reportError;
  web.defineGlobal("reportError", reportError);
})();
