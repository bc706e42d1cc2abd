// WebSocket, WebSocketPair and their events, as workerd provides them.
//
// The host holds every socket (celld/isolate/websockets.py): a pair is two ends of one
// host record, and an end is delivered to whoever accepted it (this isolate, a Durable
// Object that hibernates, the client's HTTP connection, an outside server). JS only
// queues messages: `ws.pair` when a pair is made, `ws.accept`, `ws.send`, `ws.close` and
// `ws.attach`; they pass the isolate's output gate like every other effect. Events come
// back as `{k: "ws", ws, ev: "message"|"close"|"error", ...}` deliveries (an object that
// accepted with ctx.acceptWebSocket gets them as handler calls instead: js/objects/object.js).
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const web = globalThis.__celld_web;
  const { SafeMap } = globalThis.__celld_primordials;
  // The compatibility date's choice (celld/isolate/compat.py): "blob" from 2026-03-17 or
  // with websocket_standard_binary_type, "arraybuffer" before or with its no_ flag.
  const compat = globalThis.__celld_compat || {};
  const DEFAULT_BINARY_TYPE = compat.websocketBlob ? "blob" : "arraybuffer";

  const CONNECTING = 0;
  const OPEN = 1;
  const CLOSING = 2;
  const CLOSED = 3;
  /** workerd's limit on a serialized attachment. */
  const MAX_ATTACHMENT_BYTES = 2048;
  const INTERNAL = Symbol("websocket");

  class MessageEvent extends Event {
    #data;
    constructor(type, init = {}) {
      super(type, init);
      this.#data = init && init.data !== undefined ? init.data : null;
    }
    get data() { return this.#data; }
  }

  class CloseEvent extends Event {
    #code;
    #reason;
    #clean;
    constructor(type, init = {}) {
      super(type, init);
      this.#code = init && init.code !== undefined ? Number(init.code) : 0;
      this.#reason = init && init.reason !== undefined ? String(init.reason) : "";
      this.#clean = Boolean(init && init.wasClean);
    }
    get code() { return this.#code; }
    get reason() { return this.#reason; }
    get wasClean() { return this.#clean; }
  }

  class ErrorEvent extends Event {
    #message;
    #error;
    constructor(type, init = {}) {
      super(type, init);
      this.#message = init && init.message !== undefined ? String(init.message) : "";
      this.#error = init && init.error !== undefined ? init.error : undefined;
    }
    get message() { return this.#message; }
    get error() { return this.#error; }
  }

  /** Sockets of this isolate by host id: deliveries find theirs here. */
  const sockets = new SafeMap();
  const state = new WeakMap();

  function newId() {
    return crypto.randomUUID();
  }

  function record(id, fields = {}) {
    return {
      id,
      accepted: false, // accept() or ctx.acceptWebSocket()
      hibernatable: false,
      closedOutgoing: false,
      closedIncoming: false,
      errored: false,
      connecting: false,
      owner: null,
      url: fields.url === undefined ? null : fields.url,
      protocol: fields.protocol === undefined ? null : fields.protocol,
      attachment: undefined,
      attachmentWire: null,
      autoResponseTimestamp: null,
      handlers: { open: null, message: null, close: null, error: null },
      sockets: false, // counted in its owner's open sockets
      returned: false, // carried out of this isolate in a Response
      binaryType: DEFAULT_BINARY_TYPE, // what a binary message event's data is
    };
  }

  function make(id, fields = {}) {
    const ws = new WebSocket(INTERNAL);
    state.set(ws, record(id, fields));
    sockets.set(id, ws);
    return ws;
  }

  function own(ws) {
    const s = state.get(ws);
    if (s === undefined) throw new TypeError("Illegal invocation");
    return s;
  }

  function checkCode(code) {
    const c = Number(code);
    if (!Number.isInteger(c) || c < 1000 || c >= 5000 || c === 1004 || c === 1005 || c === 1006 || c === 1015) {
      throw new DOMException(`Invalid WebSocket close code: ${code}.`, "InvalidAccessError");
    }
    return c;
  }

  function messageFields(data) {
    if (typeof data === "string") return { text: data };
    if (data instanceof ArrayBuffer) return { b64: web.bytesToBase64(new Uint8Array(data)) };
    if (ArrayBuffer.isView(data)) {
      return { b64: web.bytesToBase64(new Uint8Array(data.buffer, data.byteOffset, data.byteLength)) };
    }
    // Anything else is sent as its string, a Blob too ("[object Blob]"), as workerd does.
    return { text: String(data) };
  }

  function release(s) {
    if (s.sockets && s.owner !== null && typeof s.owner.socketClosed === "function") {
      s.sockets = false;
      s.owner.socketClosed();
    }
  }

  class WebSocket extends EventTarget {
    constructor(url, protocols = undefined) {
      super();
      if (url === INTERNAL) return;
      // An outbound socket: connects through the host, then opens on its own.
      const target = new URL(String(url));
      if (target.protocol === "ws:") target.protocol = "http:";
      else if (target.protocol === "wss:") target.protocol = "https:";
      else if (target.protocol !== "http:" && target.protocol !== "https:") {
        throw new DOMException(`WebSocket URL must use ws: or wss: (got ${String(url)})`, "SyntaxError");
      }
      const list = protocols === undefined ? [] : typeof protocols === "string" ? [protocols] : Array.from(protocols, String);
      const s = record(null, { url: String(url) });
      state.set(this, s);
      s.connecting = true;
      s.owner = host.owner();
      const headers = list.length ? [["sec-websocket-protocol", list.join(", ")]] : [];
      const self = this;
      connect(target.href, headers).then((answer) => {
        if (!s.connecting) {
          host.notify("ws.close", { ws: answer.ws, code: 1000, reason: "" });
          return;
        }
        s.connecting = false;
        s.id = answer.ws;
        s.protocol = answer.protocol || "";
        sockets.set(s.id, self);
        acceptEnd(self, s);
        dispatch(self, new Event("open"));
      }, (error) => {
        s.connecting = false;
        s.errored = true;
        s.closedIncoming = s.closedOutgoing = true;
        dispatch(self, new ErrorEvent("error", { message: String(error && error.message), error }));
        dispatch(self, new CloseEvent("close", { code: 1006, reason: "", wasClean: false }));
      });
    }

    accept() {
      const s = own(this);
      if (s.accepted) {
        if (s.hibernatable) throw new TypeError("The WebSocket was already accepted with ctx.acceptWebSocket()");
        return;
      }
      if (s.connecting) throw new TypeError("Websocket in CONNECTING state cannot be accepted");
      if (s.returned) throw new TypeError("The WebSocket was returned in a Response; it cannot be accepted here.");
      acceptEnd(this, s);
    }

    send(data) {
      const s = own(this);
      if (s.closedOutgoing) throw new TypeError("Can't call WebSocket send() after close().");
      if (s.connecting) throw new DOMException("WebSocket is still in CONNECTING state.", "InvalidStateError");
      if (s.errored) return;
      if (!s.accepted) {
        throw new TypeError("You must call one of accept() or state.acceptWebSocket() on this WebSocket before sending messages.");
      }
      host.notify("ws.send", Object.assign({ ws: s.id }, messageFields(data)));
    }

    close(code = undefined, reason = undefined) {
      const s = own(this);
      if (s.connecting) {
        s.connecting = false;
        s.closedOutgoing = s.closedIncoming = true;
        return;
      }
      if (s.closedOutgoing || s.errored) return;
      if (!s.accepted) {
        throw new TypeError("You must call one of accept() or state.acceptWebSocket() on this WebSocket before sending messages.");
      }
      const fields = { ws: s.id };
      if (code !== undefined) fields.code = checkCode(code);
      if (reason !== undefined) {
        if (code === undefined) throw new TypeError("If you specify a WebSocket close reason, you must also specify a code.");
        fields.reason = String(reason);
        if (new TextEncoder().encode(fields.reason).length > 123) {
          throw new DOMException("WebSocket close reason must not be longer than 123 bytes when UTF-8 encoded.", "SyntaxError");
        }
      }
      s.closedOutgoing = true;
      host.notify("ws.close", fields);
      if (s.closedIncoming) {
        finished(s);
      }
    }

    serializeAttachment(value) {
      const s = own(this);
      const wire = web.serialize(value);
      const size = JSON.stringify(wire).length;
      if (size > MAX_ATTACHMENT_BYTES) {
        throw new Error(`A WebSocket 'attachment' cannot be larger than ${MAX_ATTACHMENT_BYTES} bytes.'attachment' was ${size} bytes.`);
      }
      s.attachmentWire = wire;
      if (s.hibernatable) host.notify("ws.attach", { ws: s.id, value: wire });
    }

    deserializeAttachment() {
      const s = own(this);
      return s.attachmentWire === null ? null : web.deserialize(s.attachmentWire);
    }

    get readyState() {
      const s = own(this);
      if ((s.closedIncoming && s.closedOutgoing) || s.errored) return CLOSED;
      if (s.closedIncoming || s.closedOutgoing) return CLOSING;
      if (s.connecting) return CONNECTING;
      return OPEN;
    }
    get url() { return own(this).url; }
    get protocol() { return own(this).protocol; }
    get extensions() { return own(this).url === null ? null : ""; }
    get binaryType() { return own(this).binaryType; }
    set binaryType(value) {
      // As the standard (and workerd): any other value is ignored, the type stays.
      const type = String(value);
      if (type === "blob" || type === "arraybuffer") own(this).binaryType = type;
    }
  }
  for (const [name, value] of [["CONNECTING", CONNECTING], ["OPEN", OPEN], ["CLOSING", CLOSING], ["CLOSED", CLOSED], ["READY_STATE_CONNECTING", CONNECTING], ["READY_STATE_OPEN", OPEN], ["READY_STATE_CLOSING", CLOSING], ["READY_STATE_CLOSED", CLOSED]]) {
    Object.defineProperty(WebSocket, name, { value, enumerable: true });
    Object.defineProperty(WebSocket.prototype, name, { value, enumerable: true });
  }
  for (const type of ["open", "message", "close", "error"]) {
    Object.defineProperty(WebSocket.prototype, `on${type}`, {
      get() { return own(this).handlers[type]; },
      set(fn) {
        const s = own(this);
        if (s.handlers[type] !== null) this.removeEventListener(type, s.handlers[type]);
        s.handlers[type] = typeof fn === "function" ? fn : null;
        if (s.handlers[type] !== null) this.addEventListener(type, s.handlers[type]);
      },
      configurable: true,
    });
  }

  function acceptEnd(ws, s) {
    s.accepted = true;
    s.owner = s.owner || host.owner();
    const owner = s.owner;
    if (owner !== null && typeof owner.socketOpened === "function") {
      s.sockets = true;
      owner.socketOpened();
    }
    host.notify("ws.accept", { ws: s.id, rid: owner !== null && owner.id !== undefined ? owner.id : null });
  }

  function finished(s) {
    sockets.delete(s.id);
    release(s);
  }

  function dispatch(ws, event) {
    const s = state.get(ws);
    const run = () => {
      try {
        ws.dispatchEvent(event);
      } catch (error) {
        web.reportError(error);
      }
    };
    if (s && s.owner !== null) host.runAs(s.owner, run);
    else run();
  }

  class WebSocketPair {
    constructor() {
      const id = newId();
      const client = make(`${id}:0`);
      const server = make(`${id}:1`);
      host.notify("ws.pair", { id });
      Object.defineProperty(this, 0, { value: client, enumerable: true });
      Object.defineProperty(this, 1, { value: server, enumerable: true });
    }
    *[Symbol.iterator]() {
      yield this[0];
      yield this[1];
    }
  }

  class WebSocketRequestResponsePair {
    #request;
    #response;
    constructor(request, response) {
      if (typeof request !== "string" || typeof response !== "string") {
        throw new TypeError("WebSocketRequestResponsePair takes a request string and a response string");
      }
      this.#request = request;
      this.#response = response;
    }
    get request() { return this.#request; }
    get response() { return this.#response; }
  }

  /** Deliver one event the host sent for socket `s` of `ws`; returns the event. `data` is
   * what a hibernation handler gets (binary always as an ArrayBuffer, as in workerd); the
   * event's data follows the socket's binaryType. */
  function eventFor(ws, message) {
    const s = own(ws);
    if (message.ev === "message") {
      if (message.text !== undefined) {
        return { kind: "message", data: message.text, event: new MessageEvent("message", { data: message.text }) };
      }
      const data = web.base64ToBytes(message.b64 || "").buffer;
      const eventData = s.binaryType === "blob" ? new Blob([data]) : data;
      return { kind: "message", data, event: new MessageEvent("message", { data: eventData }) };
    }
    if (message.ev === "close") {
      s.closedIncoming = true;
      const code = message.code === undefined || message.code === null ? 1005 : message.code;
      const reason = message.reason || "";
      const wasClean = message.clean !== false;
      if (s.closedOutgoing) finished(s);
      return { kind: "close", code, reason, wasClean, event: new CloseEvent("close", { code, reason, wasClean }) };
    }
    s.errored = true;
    const error = new Error(message.message || "WebSocket error");
    finished(s);
    return { kind: "error", error, event: new ErrorEvent("error", { message: error.message, error }) };
  }

  host.on("ws", (message) => {
    const ws = sockets.get(message.ws);
    if (ws === undefined) return;
    dispatch(ws, eventFor(ws, message).event);
  });

  /** The auto-response timestamp the host answered for a hibernatable socket. */
  host.on("ws.ts", (message) => {
    const ws = sockets.get(message.ws);
    if (ws !== undefined) own(ws).autoResponseTimestamp = message.ts;
  });

  function connect(url, headers) {
    return host.request("ws.connect", { url, headers });
  }

  /** A WebSocket for a host end that arrived from elsewhere (an object's response). */
  function adopt(id) {
    return sockets.get(id) || make(id);
  }

  /** A socket's host id for a response that carries it out of this isolate. */
  function socketId(ws) {
    const s = own(ws);
    if (s.accepted) throw new TypeError("Can't return a WebSocket that was accepted in a Response.");
    if (s.returned) throw new TypeError("The WebSocket was already returned in another Response.");
    s.returned = true;
    sockets.delete(s.id);
    return s.id;
  }

  ObjectAssignSafe(web, {
    WebSocket, WebSocketPair, WebSocketRequestResponsePair, MessageEvent, CloseEvent, ErrorEvent,
    socketState: own, makeSocket: make, adoptSocket: adopt, socketId, socketEvent: eventFor,
    connectSocket: connect, isSocket: (value) => state.has(value),
  });

  function ObjectAssignSafe(target, source) {
    for (const key of Object.keys(source)) target[key] = source[key];
  }

  for (const Class of [WebSocket, WebSocketPair, WebSocketRequestResponsePair, MessageEvent, CloseEvent, ErrorEvent]) {
    web.defineGlobal(Class.name, Class);
  }
})();
