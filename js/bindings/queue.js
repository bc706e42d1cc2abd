// Cloudflare Queues: the producer binding (`env.MY_QUEUE.send()` / `sendBatch()` /
// `metrics()`) and the consumer side (the batch the Worker's `queue()` handler receives).
//
// A send serializes its body here by content type (text, json, bytes, or v8: celld's
// structured clone; without one, json or v8 by compatibility date, see
// celld/project/queues.py) and is one `queue` request to the host (celld/queues/broker.py), which
// checks Cloudflare's limits and resolves once the message is stored. A batch arrives as
// `{k: "fetch", id, queue: {name, messages, metadata}}` (the path requests take, see
// js/cloudflare/worker_entry.js) and is answered with what the handler said: per-message
// ack()/retry(), ackAll()/retryAll(), and whether it threw (celld/queues/rules.py decides).
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const cloudflare = globalThis.__celld_cloudflare;
  const b = globalThis.__celld_bindings;
  const serialize = globalThis.__celld_serialize;
  const deserialize = globalThis.__celld_deserialize;
  const {
    ArrayPrototypePush, JSONParse, JSONStringify, NumberIsFinite, ObjectDefineProperty,
    PromisePrototypeThen, PromiseReject, PromiseResolve, SafeMap, SafeSet, TypeError,
  } = globalThis.__celld_primordials;
  const MathTrunc = Math.trunc;
  const Date = globalThis.Date;

  const CONTENT_TYPES = ["text", "bytes", "json", "v8"];

  function contentTypeOf(options, fallback) {
    const given = options == null ? undefined : options.contentType;
    if (given === undefined) return fallback;
    const lower = String(given).toLowerCase();
    if (!CONTENT_TYPES.includes(lower)) {
      throw new TypeError(`Unsupported queue message content type: ${given}`);
    }
    return lower;
  }

  /** A delay as the host reads it: whole seconds, or the text of what was given (the host
   * refuses it with Cloudflare's message). */
  function delayOf(value) {
    if (value === undefined || value === null) return undefined;
    const n = Number(value);
    return NumberIsFinite(n) ? MathTrunc(n) : String(value);
  }

  /** body -> {contentType, body: {text} | {b64}} */
  function encode(body, contentType) {
    if (body === undefined) throw new TypeError("Message body cannot be undefined");
    switch (contentType) {
      case "text":
        if (typeof body !== "string") {
          throw new TypeError(`Content Type "text" requires a value of type string, but received: ${typeof body}`);
        }
        return { contentType, body: { text: body.toWellFormed() } };
      case "bytes":
        if (!ArrayBuffer.isView(body)) {
          throw new TypeError(`Content Type "bytes" requires a value of type ArrayBufferView, but received: ${typeof body}`);
        }
        return {
          contentType,
          body: { b64: b.toBase64(new Uint8Array(body.buffer, body.byteOffset, body.byteLength)) },
        };
      case "json": {
        const text = JSONStringify(body);
        if (text === undefined) throw new TypeError(`Cannot serialize a ${typeof body} as JSON`);
        return { contentType, body: { text } };
      }
      default:
        return { contentType, body: { text: serialize(body) } };
    }
  }

  function decode(message) {
    const holder = b.fromWire(message.body);
    switch (message.contentType) {
      case "text":
        return holder.text();
      case "json":
        return JSONParse(holder.text());
      case "bytes":
        return b.toArrayBuffer(holder.bytes());
      default:
        return deserialize(holder.text());
    }
  }

  function metricsOf(metrics) {
    const out = { backlogCount: metrics.backlogCount, backlogBytes: metrics.backlogBytes };
    if (metrics.backlogCount > 0) out.oldestMessageTimestamp = new Date(metrics.oldestMessageTimestamp);
    return out;
  }

  function sendResponse(answer) {
    return { metadata: { metrics: metricsOf(answer.metadata.metrics) } };
  }

  class WorkerQueue {
    #queue;
    #delay;
    #type;
    constructor(queue, deliveryDelay, defaultType) {
      this.#queue = queue;
      this.#delay = deliveryDelay || undefined;
      this.#type = defaultType;
    }

    async metrics() {
      return metricsOf(await host.request("queue", { queue: this.#queue, method: "metrics" }));
    }

    async send(body, options) {
      const message = encode(body, contentTypeOf(options, this.#type));
      const delay = delayOf(options == null ? undefined : options.delaySeconds);
      message.delaySeconds = delay === undefined ? this.#delay : delay;
      return sendResponse(await host.request("queue", { queue: this.#queue, method: "send", message }));
    }

    async sendBatch(messages, options) {
      if (messages === null || typeof messages !== "object" || typeof messages[Symbol.iterator] !== "function") {
        throw new TypeError("Failed to execute 'sendBatch' on 'WorkerQueue': parameter 1 is not of type 'Sequence'.");
      }
      const list = [];
      for (const item of messages) {
        const request = item == null ? {} : item;
        const message = encode(request.body, contentTypeOf(request, this.#type));
        const delay = delayOf(request.delaySeconds);
        if (delay !== undefined) message.delaySeconds = delay;
        ArrayPrototypePush(list, message);
      }
      if (list.length === 0) throw new TypeError("sendBatch() requires at least one message");
      const delay = delayOf(options == null ? undefined : options.delaySeconds);
      const fields = {
        queue: this.#queue,
        method: "sendBatch",
        messages: list,
        delaySeconds: delay === undefined ? this.#delay : delay,
      };
      return sendResponse(await host.request("queue", fields));
    }
  }
  ObjectDefineProperty(WorkerQueue, "name", { value: "WorkerQueue" });

  cloudflare.onEnv((message, env) => {
    for (const q of message.queues || []) env[q.binding] = new WorkerQueue(q.queue, q.deliveryDelay, q.defaultType);
  });

  // -- the consumer side ----------------------------------------------------------------

  function warn(text) {
    host.notify("log", { level: "warn", text });
  }

  /** workerd's warning for a call that a conflicting earlier call makes moot. */
  function ignored(id, call, earlier) {
    warn(`Received a call to ${call}() on message ${id} after ${earlier}() was already called. Calling ${call}() on a message after calling ${earlier}() has no effect.`);
  }

  function delayOption(options) {
    const delay = delayOf(options == null ? undefined : options.delaySeconds);
    return typeof delay === "number" ? delay : null;
  }

  /** What the handler said about one batch; first of conflicting calls wins, as in workerd. */
  class Verdict {
    constructor() {
      this.ackAll = false;
      this.retryAll = false;
      this.retryAllDelay = null;
      this.acks = new SafeSet();
      this.retries = new SafeMap();
    }
  }

  class Message {
    #verdict;
    constructor(verdict, raw) {
      this.#verdict = verdict;
      const fixed = (name, value) => ObjectDefineProperty(this, name, { value, enumerable: true });
      fixed("attempts", raw.attempts);
      fixed("body", decode(raw));
      fixed("timestamp", new Date(raw.timestamp));
      fixed("id", raw.id);
    }

    ack() {
      const v = this.#verdict;
      if (v.ackAll || v.acks.has(this.id)) return;
      const earlier = v.retryAll ? "retryAll" : v.retries.has(this.id) ? "retry" : null;
      if (earlier !== null) return ignored(this.id, "ack", earlier);
      v.acks.add(this.id);
    }

    retry(options) {
      const v = this.#verdict;
      if (v.retryAll || v.retries.has(this.id)) return;
      const earlier = v.ackAll ? "ackAll" : v.acks.has(this.id) ? "ack" : null;
      if (earlier !== null) return ignored(this.id, "retry", earlier);
      v.retries.set(this.id, delayOption(options));
    }
  }

  class MessageBatch {
    #verdict;
    constructor(verdict, event) {
      this.#verdict = verdict;
      const fixed = (name, value) => ObjectDefineProperty(this, name, { value, enumerable: true });
      fixed("metadata", { metrics: metricsOf(event.metadata.metrics) });
      fixed("queue", event.name);
      fixed("messages", event.messages.map((raw) => new Message(verdict, raw)));
    }

    retryAll(options) {
      const v = this.#verdict;
      if (v.ackAll) {
        warn("Received a call to retryAll() after ackAll() was already called. Calling retryAll() after calling ackAll() has no effect.");
        return;
      }
      v.retryAll = true;
      v.retryAllDelay = delayOption(options);
    }

    ackAll() {
      const v = this.#verdict;
      if (v.retryAll) {
        warn("Received a call to ackAll() after retryAll() was already called. Calling ackAll() after calling retryAll() has no effect.");
        return;
      }
      v.ackAll = true;
    }
  }

  function resolveQueue(main, ctx) {
    const exported = main.default;
    if (typeof exported === "function" && exported.prototype instanceof cloudflare.WorkerEntrypoint) {
      const instance = new exported(ctx, cloudflare.env);
      if (typeof instance.queue === "function") return (batch) => instance.queue(batch);
    } else if (exported && typeof exported.queue === "function") {
      return (batch) => exported.queue(batch, cloudflare.env, ctx);
    }
    return null;
  }

  function report(verdict, outcome, error) {
    const retries = [];
    for (const [id, delay] of verdict.retries) ArrayPrototypePush(retries, [id, delay]);
    const answer = {
      outcome,
      ackAll: verdict.ackAll,
      retryAll: verdict.retryAll,
      retryAllDelay: verdict.retryAllDelay,
      acks: [...verdict.acks],
      retries,
    };
    if (error !== undefined) answer.error = host.describeError(error);
    return answer;
  }

  /** Run the queue() handler on one batch; `respond(fields)` sends its outcome. */
  function run(owner, message, ctx, respond) {
    const verdict = new Verdict();
    const outcome = host.runAs(owner, () => {
      try {
        const handler = resolveQueue(globalThis.__celld_main, ctx);
        if (handler === null) throw new Error("Handler does not export a queue() function");
        return PromiseResolve(handler(new MessageBatch(verdict, message.queue)));
      } catch (error) {
        return PromiseReject(error);
      }
    });
    PromisePrototypeThen(
      outcome,
      () => respond({ id: message.id, queue: report(verdict, "ok") }),
      (error) => respond({ id: message.id, queue: report(verdict, "exception", error) }),
    );
  }

  ObjectDefineProperty(globalThis, "__celld_queues", {
    value: Object.freeze({ run }), configurable: false, enumerable: false, writable: false,
  });
})();
