// A small ReadableStream: enough for `response.body`, `new Response(stream)`,
// readers, async iteration and user streams driven by start/pull/cancel. No byte
// streams (BYOB), no queuing strategies, no pipes or tee.
"use strict";
(() => {
  const { ArrayPrototypePush } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;
  const streams = new WeakMap();

  function state(self) {
    const s = streams.get(self);
    if (!s) throw new TypeError("Illegal invocation");
    return s;
  }

  /** Wake whoever waits for a chunk, the end, or an error. */
  function wake(s) {
    const waiters = s.waiters;
    s.waiters = [];
    for (const fn of waiters) fn();
  }

  class ReadableStreamDefaultController {
    #s;
    constructor(s) {
      this.#s = s;
    }

    get desiredSize() {
      const s = this.#s;
      if (s.state === "errored") return null;
      if (s.state === "closed") return 0;
      return 1 - s.queue.length;
    }

    enqueue(chunk) {
      const s = this.#s;
      if (s.closeRequested || s.state !== "readable") throw new TypeError("Cannot enqueue to a closed stream");
      ArrayPrototypePush(s.queue, chunk);
      wake(s);
    }

    close() {
      const s = this.#s;
      if (s.closeRequested || s.state !== "readable") throw new TypeError("Cannot close a stream that is already closed");
      s.closeRequested = true;
      wake(s);
    }

    error(reason) {
      const s = this.#s;
      if (s.state !== "readable") return;
      s.state = "errored";
      s.error = reason;
      s.queue = [];
      wake(s);
    }
  }

  async function pullIfNeeded(s) {
    if (!s.source || typeof s.source.pull !== "function" || s.pulling || s.closeRequested) return;
    if (s.state !== "readable" || s.queue.length > 0) return;
    s.pulling = true;
    // The pull belongs to whoever read (its timers and fetches end with that request).
    const owner = host.owner();
    try {
      await s.started;
      await host.runAs(owner, () => s.source.pull.call(s.source, s.controller));
    } catch (error) {
      s.controller.error(error);
    } finally {
      s.pulling = false;
    }
  }

  /** The next {value, done} of a stream. */
  async function readChunk(s) {
    s.disturbed = true;
    for (;;) {
      if (s.state === "errored") throw s.error;
      if (s.queue.length > 0) {
        const value = s.queue.shift();
        if (s.queue.length === 0 && s.closeRequested) s.state = "closed";
        return { value, done: false };
      }
      if (s.closeRequested || s.state === "closed") {
        s.state = "closed";
        return { value: undefined, done: true };
      }
      const arrived = new Promise((resolve) => ArrayPrototypePush(s.waiters, resolve));
      pullIfNeeded(s);
      await arrived;
    }
  }

  async function cancelStream(s, reason) {
    s.disturbed = true;
    if (s.state !== "readable") return;
    s.state = "closed";
    s.queue = [];
    wake(s);
    if (s.source && typeof s.source.cancel === "function") await s.source.cancel.call(s.source, reason);
  }

  class ReadableStreamDefaultReader {
    #stream;
    constructor(stream) {
      const s = state(stream);
      if (s.locked) throw new TypeError("ReadableStream is locked");
      s.locked = true;
      this.#stream = stream;
    }

    read() {
      if (!this.#stream) return Promise.reject(new TypeError("The reader has been released"));
      return readChunk(state(this.#stream));
    }

    releaseLock() {
      if (this.#stream) state(this.#stream).locked = false;
      this.#stream = null;
    }

    cancel(reason) {
      if (!this.#stream) return Promise.reject(new TypeError("The reader has been released"));
      return cancelStream(state(this.#stream), reason);
    }

    get closed() {
      const stream = this.#stream;
      if (!stream) return Promise.reject(new TypeError("The reader has been released"));
      const s = state(stream);
      return new Promise((resolve, reject) => {
        const check = () => {
          if (s.state === "closed") resolve(undefined);
          else if (s.state === "errored") reject(s.error);
          else ArrayPrototypePush(s.waiters, check);
        };
        check();
      });
    }
  }

  class ReadableStream {
    constructor(source = undefined, strategy = undefined) {
      if (source && source.type === "bytes") {
        throw new TypeError("celld does not provide byte ReadableStreams (type: 'bytes') yet");
      }
      const s = {
        source: source || null,
        queue: [],
        state: "readable",
        closeRequested: false,
        error: undefined,
        locked: false,
        disturbed: false,
        pulling: false,
        waiters: [],
        started: Promise.resolve(),
        controller: null,
        hostSource: null, // {id, length}: bytes the host holds (js/web/hoststreams.js)
      };
      streams.set(this, s);
      s.controller = new ReadableStreamDefaultController(s);
      if (source && typeof source.start === "function") {
        try {
          s.started = Promise.resolve(source.start.call(source, s.controller));
          s.started.catch((error) => s.controller.error(error));
        } catch (error) {
          s.controller.error(error);
        }
      }
      void strategy;
    }

    get locked() {
      return state(this).locked;
    }

    getReader(options = undefined) {
      if (options && options.mode === "byob") throw new TypeError("celld does not provide BYOB readers yet");
      return new ReadableStreamDefaultReader(this);
    }

    cancel(reason) {
      const s = state(this);
      if (s.locked) return Promise.reject(new TypeError("ReadableStream is locked"));
      return cancelStream(s, reason);
    }

    async *values(options = undefined) {
      const reader = this.getReader();
      const preventCancel = Boolean(options && options.preventCancel);
      let finished = false;
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) {
            finished = true;
            return;
          }
          yield value;
        }
      } finally {
        if (!finished && !preventCancel) await reader.cancel();
        reader.releaseLock();
      }
    }

    tee() {
      throw new TypeError("celld does not provide ReadableStream.tee yet");
    }

    pipeTo() {
      return Promise.reject(new TypeError("celld does not provide ReadableStream.pipeTo yet"));
    }

    pipeThrough() {
      throw new TypeError("celld does not provide ReadableStream.pipeThrough yet");
    }
  }
  Object.defineProperty(ReadableStream.prototype, Symbol.asyncIterator, {
    value: ReadableStream.prototype.values, writable: true, configurable: true, enumerable: false,
  });

  /** A stream of one chunk (a body's bytes); `onRead` runs at the first read. */
  function streamFromBytes(bytes) {
    return new ReadableStream({
      start(controller) {
        if (bytes.length > 0) controller.enqueue(bytes);
        controller.close();
      },
    });
  }

  /** Read a whole stream of byte chunks into one Uint8Array. */
  async function collectStream(stream) {
    const s = state(stream);
    if (s.locked) throw new TypeError("ReadableStream is locked");
    s.locked = true;
    const chunks = [];
    let total = 0;
    try {
      for (;;) {
        const { value, done } = await readChunk(s);
        if (done) break;
        let chunk = value;
        if (!(chunk instanceof Uint8Array)) {
          chunk = web.bufferSourceView(chunk);
          if (!chunk) throw new TypeError("This ReadableStream did not return bytes.");
        }
        ArrayPrototypePush(chunks, chunk);
        total += chunk.length;
      }
    } finally {
      s.locked = false;
    }
    const out = new Uint8Array(total);
    let offset = 0;
    for (const chunk of chunks) {
      out.set(chunk, offset);
      offset += chunk.length;
    }
    return out;
  }

  for (const Class of [ReadableStream, ReadableStreamDefaultReader, ReadableStreamDefaultController]) {
    web.hideMethods(Class);
    web.setToStringTag(Class, Class.name);
    web.defineGlobal(Class.name, Class);
  }
  /** Lock `stream` for an internal reader: {read() -> {value, done}, cancel(reason)}. */
  function openStream(stream) {
    const s = state(stream);
    if (s.locked) throw new TypeError("ReadableStream is locked");
    s.locked = true;
    return {
      read: () => readChunk(s),
      cancel: (reason) => cancelStream(s, reason),
    };
  }

  /** Mark `stream` as the reader of host source `id` (see js/web/hoststreams.js). */
  function markHostSource(stream, id, length) {
    state(stream).hostSource = { id, length, taken: false };
  }

  /** The host source behind `stream` when nothing has read it yet ({id, length}, and the
   * stream is locked and disturbed for good: a host consumer takes the bytes), else null. */
  function takeHostSource(stream) {
    const s = state(stream);
    if (s.hostSource === null || s.locked || s.disturbed || s.state !== "readable") return null;
    s.locked = true;
    s.disturbed = true;
    s.state = "closed";
    s.hostSource.taken = true;
    return s.hostSource;
  }

  web.streamFromBytes = streamFromBytes;
  web.openStream = openStream;
  web.markHostSource = markHostSource;
  web.takeHostSource = takeHostSource;
  web.collectStream = collectStream;
  web.streamDisturbed = (stream) => state(stream).disturbed;
  web.streamLocked = (stream) => state(stream).locked;
})();
