// The object side of a Durable Object: the one instance of its class in this isolate,
// its `ctx` (DurableObjectState) and the events the host delivers to it.
//
// The host (celld/objects/live.py) sends `do.init` once, then `do.call` for each RPC
// call, fetch and alarm; each is answered by one `do.result` notification. The instance
// is built on the first event, after the host delivered the env. While a
// blockConcurrencyWhile() callback runs, new events wait for it.
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const web = globalThis.__celld_web;
  const cloudflare = globalThis.__celld_cloudflare;
  const objects = globalThis.__celld_objects;

  let init = null; // {cls, id, name, sqlite}
  let instance = null;
  let state = null;
  let gate = null; // the blockConcurrencyWhile() promise events wait for
  /** Sockets accepted with ctx.acceptWebSocket (or found on waking): id -> {ws, tags}. */
  const hibernating = new Map();
  let autoResponse = null;
  let eventTimeout = null;

  /** workerd's bound on a hibernatable WebSocket event's timeout: 7 days. */
  const MAX_EVENT_TIMEOUT_MS = 604800 * 1000;

  /** A timeout argument as workerd converts an unsigned 32-bit integer argument. */
  function eventTimeoutMs(value) {
    const n = Number(value);
    if (!Number.isFinite(n)) throw new TypeError("The value cannot be converted because it is not an integer.");
    if (n < 0) {
      throw new TypeError("The value cannot be converted because it is negative and this API expects a positive number.");
    }
    if (n > 4294967295) throw new TypeError("Value out of range. Must be less than or equal to 4294967295.");
    return Math.trunc(n);
  }

  function logError(prefix, error) {
    const shape = host.describeError(error);
    host.notify("log", { level: "error", text: `${prefix} ${shape.name}: ${shape.message}\n${shape.stack}` });
  }

  class DurableObjectState {
    #id;
    #storage;
    constructor(id, storage) {
      this.#id = id;
      this.#storage = storage;
    }
    get id() {
      return this.#id;
    }
    get storage() {
      return this.#storage;
    }
    waitUntil(promise) {
      Promise.resolve(promise).catch((error) => logError("Uncaught (in waitUntil)", error));
    }
    blockConcurrencyWhile(callback) {
      const running = (async () => callback())();
      const held = running.then(() => undefined, () => undefined);
      gate = held;
      held.then(() => {
        if (gate === held) gate = null;
      });
      return running;
    }
    acceptWebSocket(ws, tags = []) {
      if (!web.isSocket(ws)) throw new TypeError("acceptWebSocket() takes a WebSocket");
      const s = web.socketState(ws);
      if (s.accepted) throw new TypeError("The WebSocket was already accepted");
      const list = Array.from(tags, String);
      if (list.length > 10) throw new Error("A WebSocket can have a maximum of 10 tags.");
      for (const tag of list) {
        if (tag.length > 256) throw new Error("A WebSocket tag cannot be longer than 256 characters.");
      }
      s.accepted = true;
      s.hibernatable = true;
      hibernating.set(s.id, { ws, tags: list });
      host.notify("ws.accept", { ws: s.id, hib: true, tags: list });
      if (s.attachmentWire !== null) host.notify("ws.attach", { ws: s.id, value: s.attachmentWire });
    }
    getWebSockets(tag = undefined) {
      const out = [];
      hibernating.forEach((entry, id) => {
        const s = web.socketState(entry.ws);
        if ((s.closedIncoming && s.closedOutgoing) || s.errored) {
          hibernating.delete(id);
          return;
        }
        if (tag === undefined || entry.tags.includes(String(tag))) out.push(entry.ws);
      });
      return out;
    }
    getTags(ws) {
      const entry = web.isSocket(ws) ? hibernating.get(web.socketState(ws).id) : undefined;
      if (entry === undefined) throw new TypeError("getTags() takes a WebSocket accepted with acceptWebSocket()");
      return entry.tags.slice();
    }
    setWebSocketAutoResponse(pair = undefined) {
      if (pair === undefined || pair === null) {
        autoResponse = null;
        host.notify("ws.auto", { pair: null });
        return;
      }
      autoResponse = pair;
      host.notify("ws.auto", { pair: [pair.request, pair.response] });
    }
    getWebSocketAutoResponse() {
      return autoResponse;
    }
    getWebSocketAutoResponseTimestamp(ws) {
      const ts = web.socketState(ws).autoResponseTimestamp;
      return ts === null || ts === undefined ? null : new Date(ts);
    }
    /** How long a webSocketMessage/Close/Error handler may run before the object is reset
     * (the host enforces it: celld/objects/live.py); 0 or none unsets it. */
    setHibernatableWebSocketEventTimeout(ms = undefined) {
      const value = ms === undefined ? 0 : eventTimeoutMs(ms);
      if (value > MAX_EVENT_TIMEOUT_MS) throw new Error(`Event timeout should not exceed ${MAX_EVENT_TIMEOUT_MS} ms.`);
      eventTimeout = value === 0 ? null : value;
      host.notify("ws.timeout", { ms: eventTimeout });
    }
    getHibernatableWebSocketEventTimeout() {
      return eventTimeout;
    }
    abort(reason) {
      throw new Error(`celld does not support ctx.abort() yet${reason ? ` (${reason})` : ""}`);
    }
  }

  function build() {
    if (instance !== null) return instance;
    const Class = globalThis.__celld_main[init.cls];
    if (typeof Class !== "function") {
      throw new TypeError(`The Worker does not export a Durable Object class named ${init.cls}`);
    }
    if (state === null) {
      const id = new objects.DurableObjectId(init.id, init.name === null ? undefined : init.name);
      state = new DurableObjectState(id, new objects.DurableObjectStorage(init.sqlite));
    }
    instance = new Class(state, cloudflare.env);
    return instance;
  }

  async function waitForGate() {
    while (gate !== null) await gate;
  }

  async function rpc(object, message) {
    if (!(object instanceof cloudflare.DurableObject)) {
      throw new TypeError(
        "The receiving Durable Object does not support RPC, because its class was not declared with `extends DurableObject`.",
      );
    }
    const method = object[message.method];
    if (typeof method !== "function") {
      if (method === undefined) {
        throw new TypeError(`The RPC receiver does not implement the method "${message.method}".`);
      }
      throw new TypeError(`"${message.method}" is not a method of the Durable Object`);
    }
    const args = web.deserialize(message.args);
    return { v: web.serialize(await method.apply(object, args)) };
  }

  async function serve(message) {
    await waitForGate();
    const object = build();
    await waitForGate(); // the constructor may have called blockConcurrencyWhile()
    if (message.kind === "call") return rpc(object, message);
    if (message.kind === "fetch") {
      if (typeof object.fetch !== "function") throw new TypeError("Handler does not export a fetch() function.");
      const response = await object.fetch(web.requestFromWire(message.request));
      return { response: await web.responseToWire(response) };
    }
    if (message.kind === "ws") return socketEvent(object, message);
    if (message.kind === "alarm") {
      if (typeof object.alarm !== "function") throw new TypeError("Handler does not export an alarm() function.");
      await object.alarm({ retryCount: message.retryCount, isRetry: message.isRetry });
      return { v: web.serialize(undefined) };
    }
    throw new TypeError(`celld: unknown Durable Object event ${message.kind}`);
  }

  /** A hibernatable socket's event: the object's webSocketMessage/Close/Error handler. */
  async function socketEvent(object, message) {
    const entry = hibernating.get(message.ws);
    if (entry === undefined) return { v: web.serialize(undefined) };
    const seen = web.socketEvent(entry.ws, message);
    if (seen.kind === "message") {
      if (typeof object.webSocketMessage === "function") await object.webSocketMessage(entry.ws, seen.data);
    } else if (seen.kind === "close") {
      if (typeof object.webSocketClose === "function") {
        await object.webSocketClose(entry.ws, seen.code, seen.reason, seen.wasClean);
      }
    } else if (typeof object.webSocketError === "function") {
      await object.webSocketError(entry.ws, seen.error);
    }
    return { v: web.serialize(undefined) };
  }

  function failure(error) {
    try {
      return web.serialize(error);
    } catch (cloneError) {
      const shape = host.describeError(error);
      return web.serialize(new Error(`${shape.name}: ${shape.message}`));
    }
  }

  host.on("do.init", (message) => {
    init = message;
    // The timeout outlives hibernation, as the sockets do (the host kept it).
    eventTimeout = typeof message.eventTimeout === "number" ? message.eventTimeout : null;
    // Woken with hibernatable sockets open: they are back, with their tags and attachments.
    for (const found of message.sockets || []) {
      const ws = web.makeSocket(found.id);
      const s = web.socketState(ws);
      s.accepted = true;
      s.hibernatable = true;
      s.closedIncoming = Boolean(found.closedIn);
      s.closedOutgoing = Boolean(found.closedOut);
      s.attachmentWire = found.attachment === undefined ? null : found.attachment;
      s.autoResponseTimestamp = found.ts;
      hibernating.set(found.id, { ws, tags: found.tags || [] });
    }
  });

  host.on("do.call", (message) => {
    serve(message).then(
      (answer) => host.notify("do.result", Object.assign({ c: message.c }, answer)),
      (error) => {
        if (message.kind === "alarm") logError(`Uncaught (in alarm of ${init.cls})`, error);
        if (message.kind === "ws") logError(`Uncaught (in webSocket handler of ${init.cls})`, error);
        host.notify("do.result", { c: message.c, e: failure(error) });
      },
    );
  });
})();
