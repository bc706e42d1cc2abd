// The bridge between an isolate and the celld host.
//
// QuickJS refuses calls into Python while a CPU time limit is armed, so JS never
// calls the host synchronously. Instead it queues messages in an outbox that the
// host takes after every turn, and the host answers by delivering an inbox at the
// start of the next turn. A request carries a ticket; its answer settles the
// promise that request() returned.
"use strict";
(() => {
  // Built-ins come from the primordials (js/primordials.js, loaded first): user code
  // may patch the globals, and the bridge must keep working and stay exact.
  const {
    ArrayPrototypePush, ArrayPrototypeJoin, JSONParse, ObjectAssign, ObjectCreate,
    ObjectDefineProperty, ObjectFreeze, ObjectPrototypeHasOwnProperty, PromiseReject, ReflectApply, SafeMap, SafeSet,
    stringify, Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError,
    URIError, String, Promise, canaryChanged, StringPrototypeIndexOf, StringPrototypeSlice,
    StringPrototypeSplit, Uint8Array, Uint8ArrayPrototypeToBase64,
  } = globalThis.__celld_primordials;
  const ArrayBufferSlice = __celld_primordials.uncurryThis(ArrayBuffer.prototype.slice);
  let tainted = false; // user code replaced a built-in (reported to the host once)

  const outbox = []; // JSON text of each queued message
  // Byte areas of serialized values (js/web/serialize.js, {"$":"Blobs"}) that cross as
  // ArrayBuffers beside the message text, only where the host calls QuickJS directly
  // (celld/isolate/native.py; `binaryBridge`, set by the host): outgoing ones are taken
  // one by one after the outbox, incoming ones arrive as arguments of `deliver`.
  let binaryBridge = false;
  let outAttachments = []; // [id, ArrayBuffer] for the next take
  let takenAttachments = []; // ArrayBuffers of the last take, in order, for the host
  let takenIndex = 0;
  const inAttachments = new SafeMap(); // id -> ArrayBuffer, until a value is decoded
  let deliveryFloor = 0; // the first attachment id of the current delivery (ids only grow)
  let nextAttachment = 1;
  const waiting = new SafeMap(); // ticket -> {resolve, reject, owner}
  const handlers = ObjectCreate(null);
  let nextTicket = 1;
  // Which delivery is running: counted up as one begins (`deliver`) and as a turn ends
  // (`take`), and whether it brought one message alone (see `delivery`).
  let deliveries = 0;
  let deliveredAlone = false;

  const ERROR_TYPES = ObjectAssign(ObjectCreate(null), {
    Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError,
  });

  /** Rebuild a JS error from the {name, message, stack?} shape the host sends. */
  function reviveError(shape) {
    const Type = ERROR_TYPES[shape.name] || Error;
    const error = new Type(shape.message);
    if (error.name !== shape.name) {
      ObjectDefineProperty(error, "name", {
        value: shape.name, writable: true, configurable: true, enumerable: false,
      });
    }
    if (shape.stack) {
      ObjectDefineProperty(error, "stack", {
        value: shape.stack, writable: true, configurable: true, enumerable: false,
      });
    }
    return error;
  }

  /** Describe any thrown value as {name, message, stack} for the host. Never throws:
   * user errors can have throwing getters or a toString that throws. */
  function describeError(value) {
    try {
      if (value instanceof Error || (value && typeof value === "object" && "message" in value)) {
        return {
          name: String(value.name || "Error"),
          message: String(value.message),
          stack: typeof value.stack === "string" ? value.stack : "",
        };
      }
      return { name: "Error", message: String(value), stack: "" };
    } catch (error) {
      return { name: "Error", message: "(an error that could not be described)", stack: "" };
    }
  }

  // -- ownership: which request (or run) a host request and a timer belong to ------------

  /** The request whose code is running synchronously right now (null: unknown). */
  let currentOwner = null;

  // node:async_hooks (js/node/async_hooks.js) carries a context across jobs: it binds the
  // callbacks the runtime calls later, and every delivered event starts in no context.
  let bindContext = null;
  let resetContext = null;

  /** Run `fn` as `owner`: what it starts (timers, fetches) belongs to that owner. */
  function runAs(owner, fn) {
    const previous = currentOwner;
    currentOwner = owner;
    try {
      return fn();
    } finally {
      currentOwner = previous;
    }
  }

  /** What to release when an owner's request ends (host streams it still holds open):
   * owner -> set of functions. */
  const releases = new SafeMap();

  /** Call `release` when `owner`'s request ends (see cancelOwned); returns a function that
   * forgets it (the resource was released otherwise). */
  function onRelease(owner, release) {
    let set = releases.get(owner);
    if (set === undefined) {
      set = new SafeSet();
      releases.set(owner, set);
    }
    set.add(release);
    return () => {
      set.delete(release);
      if (set.size === 0 && releases.get(owner) === set) releases.delete(owner);
    };
  }

  function runReleases(owner) {
    const owners = [];
    releases.forEach((set, key) => {
      if (owner === null || key === owner) ArrayPrototypePush(owners, key);
    });
    for (let i = 0; i < owners.length; i++) {
      const set = releases.get(owners[i]);
      releases.delete(owners[i]);
      set.forEach((release) => {
        try {
          release();
        } catch (error) {
          ArrayPrototypePush(outbox, stringify({
            op: "log", level: "error",
            text: `celld: releasing a stream failed: ${describeError(error).message}`,
          }));
        }
      });
    }
  }

  /** Forget every answer the host still owes `owner` (null: every answer at all) and
   * tell the host to stop that work: its request is over. What it still holds open
   * (`onRelease`) is released. */
  function cancelOwned(owner) {
    const tickets = [];
    waiting.forEach((waiter, ticket) => {
      if (owner === null || waiter.owner === owner) ArrayPrototypePush(tickets, ticket);
    });
    for (let i = 0; i < tickets.length; i++) {
      waiting.delete(tickets[i]);
      ArrayPrototypePush(outbox, stringify({ op: "cancel", of: tickets[i] }));
    }
    runReleases(owner);
    return tickets.length;
  }

  function encode(message) {
    try {
      return stringify(message);
    } catch (error) {
      const what = error instanceof RangeError ? error.message
        : `celld: the value cannot be sent (${describeError(error).message})`;
      throw new TypeError(what);
    }
  }

  function queueRequest(op, fields) {
    const ticket = nextTicket++;
    const text = encode(ObjectAssign({ op, t: ticket }, fields));
    ArrayPrototypePush(outbox, text);
    let waiter;
    const promise = new Promise((resolve, reject) => {
      waiter = { resolve, reject, owner: currentOwner };
    });
    waiting.set(ticket, waiter);
    return { ticket, promise };
  }

  /** Queue a request whose answer goes straight to `onValue` / `onError`, called from the
   * delivery itself: no promise, and no job between the answer and the caller's reaction.
   * `body` is the JSON text of the message's other fields (`"name":...,"count":...`),
   * written by a caller that built it from values it knows to be sendable. */
  function queueCall(op, body, onValue, onError, owner) {
    const ticket = nextTicket++;
    ArrayPrototypePush(outbox, `{"op":"${op}","t":${ticket},${body}}`);
    waiting.set(ticket, { resolve: onValue, reject: onError, owner: owner === undefined ? currentOwner : owner });
    return ticket;
  }

  // The turn's clock: read once per turn, on first use, and forgotten as a turn begins
  // (`deliver`) and ends (`take`). Timers set in one turn share it, as they share a frozen clock in workerd and
  // one loop tick's time in Node: a loop setting timers with increasing delays sees them
  // fire in that order however long the loop itself took.
  const monotonicNow = globalThis.performance && globalThis.performance.now
    ? globalThis.performance.now.bind(globalThis.performance)
    : Date.now;
  let turnClock = null;

  /** Called on `reset`, after the answers owed were forgotten (see `afterReset`). */
  const resetListeners = [];
  /** Queue a request carrying `bytes` (a Uint8Array) as base64 in field `key`, written
   * into the message's text as it is: base64 needs no JSON escaping, and encoding a body
   * piece with JSON.stringify costs ten times what the base64 itself does. */
  function queueBytes(op, fields, key, bytes) {
    if (!(bytes instanceof Uint8Array) || Uint8ArrayPrototypeToBase64 === undefined) {
      throw new TypeError("celld: a body piece must be a Uint8Array");
    }
    const ticket = nextTicket++;
    const head = encode(ObjectAssign({ op, t: ticket }, fields));
    const b64 = Uint8ArrayPrototypeToBase64(bytes);
    ArrayPrototypePush(outbox, `${StringPrototypeSlice(head, 0, -1)},"${key}":"${b64}"}`);
    let waiter;
    const promise = new Promise((resolve, reject) => {
      waiter = { resolve, reject, owner: currentOwner };
    });
    waiting.set(ticket, waiter);
    return promise;
  }

  const host = ObjectFreeze({
    /** Queue a message that needs no answer (a log line, a response). Throws a
     * TypeError when the message cannot be sent (a cycle, too deep). */
    notify(op, fields) {
      ArrayPrototypePush(outbox, encode(ObjectAssign({ op }, fields)));
    },
    /** Queue a request; the promise settles when the host answers it (and rejects at
     * once if the request cannot be sent). */
    request(op, fields) {
      try {
        return queueRequest(op, fields).promise;
      } catch (error) {
        return PromiseReject(error);
      }
    },
    /** `request` with `bytes` sent as base64 in field `key` (a body piece). */
    requestBytes(op, fields, key, bytes) {
      if (key !== "d") return PromiseReject(new TypeError("celld: body pieces go in field d"));
      try {
        return queueBytes(op, fields, key, bytes);
      } catch (error) {
        return PromiseReject(error);
      }
    },
    /**
     * A request whose answer can be withdrawn: `cancel()` forgets the answer and tells
     * the host to stop the work (a cleared timer must not keep the host busy).
     */
    requestCancellable(op, fields) {
      const { ticket, promise } = queueRequest(op, fields);
      const cancel = () => {
        if (waiting.delete(ticket)) ArrayPrototypePush(outbox, stringify({ op: "cancel", of: ticket }));
      };
      // False once answered, cancelled, or forgotten (a reset, the end of its owner).
      const pending = () => waiting.has(ticket);
      return { promise, cancel, waiting: pending };
    },
    /** Register the handler for one kind of inbound message. */
    on(kind, handler) {
      handlers[kind] = handler;
    },
    /** Do serialized values send their binary data as bytes (see `outAttachments`)? */
    get binaryBridge() {
      return binaryBridge;
    },
    /** Queue a byte area to go out with this turn's outbox; returns its id. */
    sendAttachment(buffer) {
      const id = nextAttachment++;
      ArrayPrototypePush(outAttachments, [id, buffer]);
      return id;
    },
    /** The byte area the host attached under `id` (once: it is forgotten here). */
    takeAttachment(id) {
      const buffer = inAttachments.get(id);
      if (buffer === undefined) {
        // A value serialized here and read back before the host took it: a copy of its area.
        for (let i = 0; i < outAttachments.length; i++) {
          if (outAttachments[i][0] === id) return ArrayBufferSlice(outAttachments[i][1], 0);
        }
      }
      if (buffer === undefined) throw new TypeError(`celld: binary data ${id} was not delivered or was already taken`);
      inAttachments.delete(id);
      return buffer;
    },
    reviveError,
    describeError,
    runAs,
    cancelOwned,
    /** Call `listener()` whenever the isolate is reset for another run: state that
     * counts on an answer from the host (the timer heap's host timer) starts over. */
    afterReset(listener) {
      ArrayPrototypePush(resetListeners, listener);
    },
    /** Monotonic milliseconds (performance.now's clock), fixed for the current turn. */
    turnTime() {
      if (turnClock === null) turnClock = monotonicNow();
      return turnClock;
    },
    onRelease,
    /** The owner code running now belongs to (null when unknown). */
    owner() {
      return currentOwner;
    },
    /** Set once, by node:async_hooks: how to bind a callback to the current context, and
     * how to start an event in no context. */
    setContextHooks(bind, reset) {
      if (bindContext !== null) throw new TypeError("celld: the context hooks are already set");
      bindContext = bind;
      resetContext = reset;
    },
    /** `fn` bound to the current async context (itself when nothing tracks contexts). */
    bindContext(fn) {
      return bindContext === null ? fn : bindContext(fn);
    },
    /** `fn`, made to start in no async context, as an event the host delivers does. */
    freshContext(fn) {
      if (resetContext === null || typeof fn !== "function") return fn;
      const reset = resetContext;
      return function fresh(...args) {
        reset();
        return ReflectApply(fn, this, args);
      };
    },
  });

  // An isolate is reused for another workflow run (as workerd reuses isolates):
  // whatever the previous run still awaited will never be answered, so forget it and
  // let its promises be collected.
  host.on("reset", () => {
    waiting.clear();
    releases.clear();
    outbox.length = 0;
    outAttachments = [];
    // (what this delivery attached is for the run it starts)
    for (const id of inAttachments.keys()) if (id < deliveryFloor) inAttachments.delete(id);
    for (let i = 0; i < resetListeners.length; i++) resetListeners[i]();
  });

  // An answer is `v`, or an error `e`, or the text of `piece` (an index into the pieces
  // that follow the delivery's JSON: see `deliver`).
  host.on("settle", (message, pieces) => {
    const waiter = waiting.get(message.t);
    if (!waiter) return;
    waiting.delete(message.t);
    if (ObjectPrototypeHasOwnProperty(message, "e")) waiter.reject(reviveError(message.e));
    else if (ObjectPrototypeHasOwnProperty(message, "piece")) waiter.resolve(pieces[message.piece]);
    else waiter.resolve(message.v);
  });

  /** Deliver one turn's inbound messages: a JSON array, then, after a NUL each (which JSON
   * text never holds), the texts of body pieces (celld/isolate/isolate.py, `Piece`): parsing
   * them as JSON strings would cost more than all the rest of their trip. */
  function deliver(json) {
    turnClock = null; // a turn begins (a clock read while the isolate loaded is stale)
    let pieces = null;
    let head = json;
    const cut = StringPrototypeIndexOf(json, "\0");
    if (cut >= 0) {
      head = StringPrototypeSlice(json, 0, cut);
      pieces = StringPrototypeSplit(StringPrototypeSlice(json, cut + 1), "\0");
    }
    const messages = JSONParse(head);
    let first = 0;
    if (messages.length > 0 && messages[0].k === "$attach") {
      // The byte areas of this delivery's values, the arguments after the text.
      const ids = messages[0].ids;
      deliveryFloor = ids[0];
      for (let i = 0; i < ids.length; i++) inAttachments.set(ids[i], arguments[i + 1]);
      first = 1;
    }
    deliveries++;
    deliveredAlone = messages.length - first === 1;
    for (let i = first; i < messages.length; i++) {
      const message = messages[i];
      const handler = handlers[message.k];
      if (!handler) {
        host.notify("log", { level: "error", text: `celld: no handler for inbound message ${message.k}` });
        continue;
      }
      try {
        if (resetContext !== null) resetContext();
        handler(message, pieces);
      } catch (error) {
        host.notify("fault", { error: describeError(error), kind: message.k });
      }
    }
  }

  // Before the isolate may go to another run (celld/isolate/host.py, `detach`): note a
  // built-in user code replaced. Checked then rather than after every turn: the check
  // reads some 75 property descriptors (about 0.1 ms, as much as the rest of a step's turn).
  host.on("audit", () => {
    if (tainted) return;
    const changed = canaryChanged();
    if (changed !== null) {
      tainted = true;
      ArrayPrototypePush(outbox, stringify({ op: "intrinsics.changed", name: changed }));
    }
  });

  function take() {
    turnClock = null;
    deliveries++;
    if (outAttachments.length > 0) {
      const ids = new Array(outAttachments.length);
      takenAttachments = new Array(outAttachments.length);
      for (let i = 0; i < outAttachments.length; i++) {
        ids[i] = outAttachments[i][0];
        takenAttachments[i] = outAttachments[i][1];
      }
      takenIndex = 0;
      outAttachments = [];
      ArrayPrototypePush(outbox, `{"op":"$attachments","ids":[${ArrayPrototypeJoin(ids, ",")}]}`);
    }
    if (outbox.length === 0) return "[]";
    const json = `[${ArrayPrototypeJoin(outbox, ",")}]`;
    outbox.length = 0;
    return json;
  }

  // Messages given as text, for the runtime's hot paths (js/workflows/step.js), which take
  // this once and delete it before user code runs: text that is not JSON would break the
  // bridge, so only callers that build it from values known to be plain may send it.
  const hostText = ObjectFreeze({
    /** Queue a message that needs no answer, given as its JSON text. */
    notify(text) {
      ArrayPrototypePush(outbox, text);
    },
    /** Queue a request given as the JSON text of its fields but `op` and the ticket; the
     * answer calls `onValue(value)` or `onError(error)` during its delivery, which must
     * not throw. `owner`: whose request it is (by default the current owner). Returns
     * the ticket. */
    call: queueCall,
    /** The delivery running now: a number that changes as the next one begins and as this
     * turn ends, or 0 when this delivery brought more than one message. An answer read
     * from `call`'s `onValue` with a nonzero number is, while `delivery()` still returns
     * that number, the newest thing the isolate has heard from outside. */
    delivery() {
      return deliveredAlone ? deliveries : 0;
    },
  });

  const hidden = { configurable: false, enumerable: false, writable: false };
  ObjectDefineProperty(globalThis, "__celld_host", ObjectAssign({ value: host }, hidden));
  ObjectDefineProperty(globalThis, "__celld_host_text", {
    value: hostText, configurable: true, enumerable: false, writable: false,
  });
  ObjectDefineProperty(globalThis, "__celld_deliver", ObjectAssign({ value: deliver }, hidden));
  ObjectDefineProperty(globalThis, "__celld_take", ObjectAssign({ value: take }, hidden));
  // The host's side of the attachments (celld/isolate/native.py): the next byte area of
  // the last take, and the switch it turns on where it reads and writes ArrayBuffers.
  ObjectDefineProperty(globalThis, "__celld_take_attachment", ObjectAssign({
    value() {
      if (takenIndex >= takenAttachments.length) return undefined;
      const buffer = takenAttachments[takenIndex];
      takenAttachments[takenIndex++] = undefined;
      return buffer;
    },
  }, hidden));
  // Called once by the host as the isolate loads, before user code runs; it goes then.
  ObjectDefineProperty(globalThis, "__celld_binary_bridge", {
    value(on) {
      binaryBridge = on === true;
      delete globalThis.__celld_binary_bridge;
    },
    configurable: true, enumerable: false, writable: false,
  });
  ObjectDefineProperty(globalThis, "__celld_builtin_modules", ObjectAssign(
    { value: ObjectCreate(null) }, hidden));
})();
