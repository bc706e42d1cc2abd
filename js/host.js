// The bridge between an isolate and the celld host.
//
// QuickJS refuses calls into Python while a CPU time limit is armed, so JS never
// calls the host synchronously. Instead it queues messages in an outbox that the
// host takes after every turn, and the host answers by delivering an inbox at the
// start of the next turn. A request carries a ticket; its answer settles the
// promise that request() returned.
"use strict";
(() => {
  const outbox = [];
  const waiting = new Map();
  const handlers = Object.create(null);
  let nextTicket = 1;

  const ERROR_TYPES = {
    Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError,
  };

  /** Rebuild a JS error from the {name, message, stack?} shape the host sends. */
  function reviveError(shape) {
    const Type = ERROR_TYPES[shape.name] || Error;
    const error = new Type(shape.message);
    if (error.name !== shape.name) {
      Object.defineProperty(error, "name", {
        value: shape.name, writable: true, configurable: true, enumerable: false,
      });
    }
    if (shape.stack) error.stack = shape.stack;
    return error;
  }

  /** Describe any thrown value as {name, message, stack} for the host. */
  function describeError(value) {
    if (value instanceof Error || (value && typeof value === "object" && "message" in value)) {
      return {
        name: String(value.name || "Error"),
        message: String(value.message),
        stack: typeof value.stack === "string" ? value.stack : "",
      };
    }
    return { name: "Error", message: String(value), stack: "" };
  }

  const host = Object.freeze({
    /** Queue a message that needs no answer (a log line, a response). */
    notify(op, fields) {
      outbox.push(Object.assign({ op }, fields));
    },
    /** Queue a request; the promise settles when the host answers it. */
    request(op, fields) {
      const ticket = nextTicket++;
      outbox.push(Object.assign({ op, t: ticket }, fields));
      return new Promise((resolve, reject) => waiting.set(ticket, { resolve, reject }));
    },
    /**
     * A request whose answer can be withdrawn: `cancel()` forgets the answer and tells
     * the host to stop the work (a cleared timer must not keep the host busy).
     */
    requestCancellable(op, fields) {
      const ticket = nextTicket++;
      outbox.push(Object.assign({ op, t: ticket }, fields));
      const promise = new Promise((resolve, reject) => waiting.set(ticket, { resolve, reject }));
      const cancel = () => {
        if (waiting.delete(ticket)) outbox.push({ op: "cancel", of: ticket });
      };
      return { promise, cancel };
    },
    /** Register the handler for one kind of inbound message. */
    on(kind, handler) {
      handlers[kind] = handler;
    },
    reviveError,
    describeError,
  });

  // An isolate is reused for another workflow run (as workerd reuses isolates):
  // whatever the previous run still awaited will never be answered, so forget it and
  // let its promises be collected.
  host.on("reset", () => {
    waiting.clear();
    outbox.length = 0;
  });

  host.on("settle", (message) => {
    const waiter = waiting.get(message.t);
    if (!waiter) return;
    waiting.delete(message.t);
    if (message.e) waiter.reject(reviveError(message.e));
    else waiter.resolve(message.v);
  });

  function deliver(json) {
    const messages = JSON.parse(json);
    for (const message of messages) {
      const handler = handlers[message.k];
      if (!handler) {
        host.notify("log", { level: "error", text: `celld: no handler for inbound message ${message.k}` });
        continue;
      }
      try {
        handler(message);
      } catch (error) {
        host.notify("fault", { error: describeError(error), kind: message.k });
      }
    }
  }

  function take() {
    if (outbox.length === 0) return "[]";
    const json = JSON.stringify(outbox);
    outbox.length = 0;
    return json;
  }

  const hidden = { configurable: false, enumerable: false, writable: false };
  Object.defineProperty(globalThis, "__celld_host", Object.assign({ value: host }, hidden));
  Object.defineProperty(globalThis, "__celld_deliver", Object.assign({ value: deliver }, hidden));
  Object.defineProperty(globalThis, "__celld_take", Object.assign({ value: take }, hidden));
  Object.defineProperty(globalThis, "__celld_builtin_modules", Object.assign(
    { value: Object.create(null) }, hidden));
})();
