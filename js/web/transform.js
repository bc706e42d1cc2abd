// WritableStream, TransformStream, the queuing strategies, and ReadableStream's pipeTo and
// pipeThrough, on top of the ReadableStream of js/web/streams.js.
//
// Libraries define classes that extend TransformStream when they load (eventsource-parser,
// so the Agents SDK) and test `WritableStream.prototype` when they serialize (capnweb): both
// need the classes to exist and behave. What is kept small: writes run one at a time in
// order (a write's promise settles when the sink's write did), but the readable side of a
// TransformStream queues without limit (no backpressure from a slow reader), and a
// strategy's highWaterMark only shows in desiredSize.
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const streams = new WeakMap();

  function own(self) {
    const s = streams.get(self);
    if (!s) throw new TypeError("Illegal invocation");
    return s;
  }

  class CountQueuingStrategy {
    #hwm;
    constructor({ highWaterMark }) {
      this.#hwm = Number(highWaterMark);
    }
    get highWaterMark() { return this.#hwm; }
    get size() { return () => 1; }
  }

  class ByteLengthQueuingStrategy {
    #hwm;
    constructor({ highWaterMark }) {
      this.#hwm = Number(highWaterMark);
    }
    get highWaterMark() { return this.#hwm; }
    get size() { return (chunk) => chunk.byteLength; }
  }

  class WritableStreamDefaultController {
    #s;
    constructor(s) { this.#s = s; }
    error(reason) { fail(this.#s, reason); }
    get signal() { return this.#s.abort.signal; }
  }

  function fail(s, reason) {
    if (s.state !== "writable") return;
    s.state = "errored";
    s.error = reason;
    s.settle.closed.reject(reason);
    s.settle.closed.promise.catch(() => {});
  }

  /** Run `step` after every write queued before it; a failed step errors the stream. */
  function queue(s, step) {
    s.pending += 1;
    const run = s.tail.then(() => {
      if (s.state === "errored") throw s.error;
      return step();
    });
    s.tail = run.then(() => { s.pending -= 1; }, (error) => {
      s.pending -= 1;
      fail(s, error);
    });
    return run;
  }

  class WritableStream {
    constructor(sink = undefined, strategy = undefined) {
      const s = {
        sink: sink || {},
        state: "writable", // writable | closing | closed | errored
        error: undefined,
        locked: false,
        pending: 0,
        hwm: strategy && strategy.highWaterMark !== undefined ? Number(strategy.highWaterMark) : 1,
        abort: new AbortController(),
        settle: { closed: Promise.withResolvers() },
        tail: Promise.resolve(),
      };
      streams.set(this, s);
      const controller = new WritableStreamDefaultController(s);
      s.controller = controller;
      // writes wait for start(); it is not a write, so desiredSize does not count it
      s.tail = Promise.resolve()
        .then(() => (typeof s.sink.start === "function" ? s.sink.start.call(s.sink, controller) : undefined))
        .catch((error) => fail(s, error));
    }

    get locked() { return own(this).locked; }

    getWriter() {
      return new WritableStreamDefaultWriter(this);
    }

    abort(reason) {
      const s = own(this);
      if (s.locked) return Promise.reject(new TypeError("WritableStream is locked"));
      return abortStream(s, reason);
    }

    close() {
      const s = own(this);
      if (s.locked) return Promise.reject(new TypeError("WritableStream is locked"));
      return closeStream(s);
    }
  }

  async function abortStream(s, reason) {
    if (s.state === "closed" || s.state === "errored") return;
    s.abort.abort(reason);
    fail(s, reason);
    if (typeof s.sink.abort === "function") await s.sink.abort.call(s.sink, reason);
  }

  function closeStream(s) {
    if (s.state !== "writable") return Promise.reject(new TypeError("The WritableStream is closed or closing."));
    s.state = "closing";
    return queue(s, async () => {
      if (typeof s.sink.close === "function") await s.sink.close.call(s.sink);
      s.state = "closed";
      s.settle.closed.resolve(undefined);
    });
  }

  function writeChunk(s, chunk) {
    if (s.state === "errored") return Promise.reject(s.error);
    if (s.state !== "writable") return Promise.reject(new TypeError("Can't write to a closed WritableStream."));
    return queue(s, () => (typeof s.sink.write === "function" ? s.sink.write.call(s.sink, chunk, s.controller) : undefined));
  }

  class WritableStreamDefaultWriter {
    #stream;
    constructor(stream) {
      const s = own(stream);
      if (s.locked) throw new TypeError("WritableStream is locked");
      s.locked = true;
      this.#stream = stream;
    }
    #s() {
      if (this.#stream === null) throw new TypeError("The writer has been released");
      return own(this.#stream);
    }
    /** `fn(state)` as a promise: a released writer rejects instead of throwing. */
    #settle(fn) {
      try {
        return fn(this.#s());
      } catch (error) {
        return Promise.reject(error);
      }
    }
    write(chunk) { return this.#settle((s) => writeChunk(s, chunk)); }
    close() { return this.#settle(closeStream); }
    abort(reason) { return this.#settle((s) => abortStream(s, reason)); }
    releaseLock() {
      if (this.#stream !== null) own(this.#stream).locked = false;
      this.#stream = null;
    }
    get closed() { return this.#settle((s) => s.settle.closed.promise); }
    get ready() {
      return this.#settle((s) => (s.state === "errored" ? Promise.reject(s.error) : Promise.resolve(undefined)));
    }
    get desiredSize() {
      const s = this.#s();
      if (s.state === "errored") return null;
      if (s.state !== "writable") return 0;
      return s.hwm - s.pending;
    }
  }

  class TransformStreamDefaultController {
    #t;
    constructor(t) { this.#t = t; }
    enqueue(chunk) { this.#t.readableController.enqueue(chunk); }
    error(reason) {
      this.#t.readableController.error(reason);
      fail(own(this.#t.writable), reason);
    }
    terminate() {
      try {
        this.#t.readableController.close();
      } catch {
        // already closed: terminate() twice is allowed
      }
      fail(own(this.#t.writable), new TypeError("The TransformStream was terminated."));
    }
    get desiredSize() { return this.#t.readableController.desiredSize; }
  }

  class TransformStream {
    #t;
    constructor(transformer = undefined, writableStrategy = undefined, readableStrategy = undefined) {
      const tr = transformer || {};
      const t = { readableController: null, writable: null };
      this.#t = t;
      const readable = new ReadableStream({
        start(controller) { t.readableController = controller; },
        cancel(reason) { return abortStream(own(t.writable), reason); },
      }, readableStrategy);
      const controller = new TransformStreamDefaultController(t);
      const started = Promise.withResolvers();
      t.writable = new WritableStream({
        start: () => started.promise,
        write: (chunk) => (typeof tr.transform === "function" ? tr.transform.call(tr, chunk, controller) : controller.enqueue(chunk)),
        close: async () => {
          if (typeof tr.flush === "function") await tr.flush.call(tr, controller);
          try {
            t.readableController.close();
          } catch {
            // terminate() closed it already
          }
        },
        abort: (reason) => {
          t.readableController.error(reason);
          if (typeof tr.cancel === "function") return tr.cancel.call(tr, reason);
          return undefined;
        },
      }, writableStrategy);
      t.readable = readable;
      try {
        Promise.resolve(typeof tr.start === "function" ? tr.start.call(tr, controller) : undefined).then(
          () => started.resolve(),
          (error) => {
            controller.error(error);
            started.reject(error);
          },
        );
      } catch (error) {
        controller.error(error);
        started.reject(error);
      }
    }
    get readable() { return this.#t.readable; }
    get writable() { return this.#t.writable; }
  }

  /** `readable.pipeTo(writable)`: every chunk written in order, then close (or abort). */
  async function pipeTo(destination, options = {}) {
    if (!streams.has(destination)) throw new TypeError("pipeTo() takes a WritableStream");
    const reader = this.getReader();
    const writer = destination.getWriter();
    const signal = options.signal;
    try {
      for (;;) {
        if (signal && signal.aborted) throw signal.reason;
        const { value, done } = await reader.read();
        if (done) break;
        await writer.write(value);
      }
      if (!options.preventClose) await writer.close();
    } catch (error) {
      if (!options.preventAbort) await writer.abort(error).catch(() => {});
      if (!options.preventCancel) await reader.cancel(error).catch(() => {});
      throw error;
    } finally {
      reader.releaseLock();
      writer.releaseLock();
    }
  }

  function pipeThrough(pair, options = undefined) {
    if (!pair || !streams.has(pair.writable)) throw new TypeError("pipeThrough() takes {writable, readable}");
    this.pipeTo(pair.writable, options).catch(() => {});
    return pair.readable;
  }

  for (const [name, fn] of [["pipeTo", pipeTo], ["pipeThrough", pipeThrough]]) {
    Object.defineProperty(ReadableStream.prototype, name, { value: fn, writable: true, configurable: true, enumerable: false });
  }
  const classes = [
    WritableStream, WritableStreamDefaultWriter, WritableStreamDefaultController, TransformStream,
    TransformStreamDefaultController, CountQueuingStrategy, ByteLengthQueuingStrategy,
  ];
  for (const Class of classes) {
    web.hideMethods(Class);
    web.setToStringTag(Class, Class.name);
    web.defineGlobal(Class.name, Class);
  }
})();
