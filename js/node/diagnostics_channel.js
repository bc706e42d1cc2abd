// node:diagnostics_channel: named channels that publish messages to subscribers, and
// tracing channels (start, end, asyncStart, asyncEnd, error) around sync, promise and
// callback work, as Node and workerd provide them. Channels are kept by name (weakly, as in
// Node: a channel nobody holds and nobody subscribed to is forgotten).
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const channels = new Map(); // name -> WeakRef<Channel>

  class Channel {
    #subscribers = [];
    #stores = new Map(); // AsyncLocalStorage -> transform
    constructor(name) {
      this.name = name;
    }
    get hasSubscribers() {
      return this.#subscribers.length > 0 || this.#stores.size > 0;
    }
    subscribe(onMessage) {
      if (typeof onMessage !== "function") {
        const error = new TypeError('The "subscription" argument must be of type function.');
        error.code = "ERR_INVALID_ARG_TYPE";
        throw error;
      }
      this.#subscribers = [...this.#subscribers, onMessage];
    }
    unsubscribe(onMessage) {
      const index = this.#subscribers.indexOf(onMessage);
      if (index === -1) return false;
      this.#subscribers = this.#subscribers.filter((_, i) => i !== index);
      return true;
    }
    publish(message) {
      for (const subscriber of this.#subscribers) {
        try {
          subscriber(message, this.name);
        } catch (error) {
          queueMicrotask(() => { throw error; }); // as Node: reported, the others still run
        }
      }
    }
    bindStore(store, transform) {
      this.#stores.set(store, transform);
    }
    unbindStore(store) {
      return this.#stores.delete(store);
    }
    runStores(message, fn, thisArg, ...args) {
      let run = () => {
        this.publish(message);
        return Reflect.apply(fn, thisArg, args);
      };
      for (const [store, transform] of this.#stores) {
        const next = run;
        run = () => store.run(transform ? transform(message) : message, next);
      }
      return run();
    }
  }

  function channel(name) {
    if (typeof name !== "string" && typeof name !== "symbol") {
      const error = new TypeError('The "channel" argument must be of type string or symbol.');
      error.code = "ERR_INVALID_ARG_TYPE";
      throw error;
    }
    const found = channels.get(name)?.deref();
    if (found) return found;
    const made = new Channel(name);
    channels.set(name, new WeakRef(made));
    return made;
  }

  const EVENTS = ["start", "end", "asyncStart", "asyncEnd", "error"];

  class TracingChannel {
    constructor(nameOrChannels) {
      for (const event of EVENTS) {
        this[event] = typeof nameOrChannels === "string"
          ? channel(`tracing:${nameOrChannels}:${event}`) : nameOrChannels[event];
      }
    }
    get hasSubscribers() {
      return EVENTS.some((event) => this[event].hasSubscribers);
    }
    subscribe(handlers) {
      for (const event of EVENTS) if (handlers[event]) this[event].subscribe(handlers[event]);
    }
    unsubscribe(handlers) {
      let all = true;
      for (const event of EVENTS) {
        if (handlers[event] && !this[event].unsubscribe(handlers[event])) all = false;
      }
      return all;
    }
    traceSync(fn, context = {}, thisArg, ...args) {
      if (!this.hasSubscribers) return Reflect.apply(fn, thisArg, args);
      return this.start.runStores(context, () => {
        try {
          context.result = Reflect.apply(fn, thisArg, args);
          return context.result;
        } catch (error) {
          context.error = error;
          this.error.publish(context);
          throw error;
        } finally {
          this.end.publish(context);
        }
      });
    }
    tracePromise(fn, context = {}, thisArg, ...args) {
      if (!this.hasSubscribers) return Reflect.apply(fn, thisArg, args);
      const settle = (key, value) => {
        context[key] = value;
        if (key === "error") this.error.publish(context);
        this.asyncStart.publish(context);
        this.asyncEnd.publish(context);
      };
      return this.start.runStores(context, () => {
        try {
          const promise = Reflect.apply(fn, thisArg, args);
          return Promise.resolve(promise).then(
            (result) => { settle("result", result); return result; },
            (error) => { settle("error", error); throw error; });
        } catch (error) {
          context.error = error;
          this.error.publish(context);
          throw error;
        } finally {
          this.end.publish(context);
        }
      });
    }
    traceCallback(fn, position = -1, context = {}, thisArg, ...args) {
      if (!this.hasSubscribers) return Reflect.apply(fn, thisArg, args);
      const index = position < 0 ? args.length + position : position;
      const callback = args[index];
      if (typeof callback !== "function") {
        const error = new TypeError('The "callback" argument must be of type function.');
        error.code = "ERR_INVALID_ARG_TYPE";
        throw error;
      }
      args[index] = (error, result) => {
        if (error) { context.error = error; this.error.publish(context); }
        else context.result = result;
        this.asyncStart.publish(context);
        try {
          return Reflect.apply(callback, undefined, [error, result]);
        } finally {
          this.asyncEnd.publish(context);
        }
      };
      return this.start.runStores(context, () => {
        try {
          return Reflect.apply(fn, thisArg, args);
        } catch (error) {
          context.error = error;
          this.error.publish(context);
          throw error;
        } finally {
          this.end.publish(context);
        }
      });
    }
  }

  const diagnosticsChannel = {
    channel,
    hasSubscribers: (name) => channels.get(name)?.deref()?.hasSubscribers ?? false,
    subscribe: (name, onMessage) => channel(name).subscribe(onMessage),
    unsubscribe: (name, onMessage) => channel(name).unsubscribe(onMessage),
    tracingChannel: (nameOrChannels) => new TracingChannel(nameOrChannels),
    Channel,
  };
  modules["node:diagnostics_channel"] = Object.freeze(Object.assign(Object.create(null), diagnosticsChannel, {
    default: diagnosticsChannel,
  }));
})();
