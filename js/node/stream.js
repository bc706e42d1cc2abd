// node:stream basics: Readable, Writable, Duplex, Transform, PassThrough, pipeline and
// finished (also as node:stream/promises). Flowing and paused reading, object mode,
// encodings, pipe() and async iteration; backpressure is simplified: write() always
// accepts the chunk (nothing in a Worker outruns memory the way a socket can).
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const EventEmitter = modules["node:events"].default;
  const { Buffer } = globalThis.__celld_node.buffer;
  const later = (fn) => queueMicrotask(fn);

  function toChunk(stream, chunk, encoding) {
    if (stream._objectMode) return chunk;
    if (typeof chunk === "string") return Buffer.from(chunk, encoding || "utf8");
    if (chunk instanceof Uint8Array) return chunk instanceof Buffer ? chunk : Buffer.from(chunk);
    throw new TypeError('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array');
  }

  class Stream extends EventEmitter {
    pipe(destination, options = {}) {
      const end = options.end !== false;
      this.on("data", (chunk) => destination.write(chunk));
      if (end) this.on("end", () => destination.end());
      this.on("error", (error) => destination.destroy(error));
      destination.emit("pipe", this);
      if (typeof this.resume === "function") this.resume();
      return destination;
    }
  }

  class Readable extends Stream {
    constructor(options = {}) {
      super();
      this._objectMode = Boolean(options.objectMode || options.readableObjectMode);
      this._buffer = [];
      this._flowing = null;
      this._ended = false; // push(null) was called
      this._endEmitted = false;
      this._reading = false;
      this._encoding = options.encoding || null;
      this.destroyed = false;
      if (typeof options.read === "function") this._read = options.read;
      if (typeof options.destroy === "function") this._destroy = options.destroy;
      this.on("newListener", (name) => {
        if (name === "data" && this._flowing !== false) this.resume();
        if (name === "readable") later(() => this._pump());
      });
    }
    get readable() { return !this.destroyed && !this._endEmitted; }
    get readableEnded() { return this._endEmitted; }
    get readableObjectMode() { return this._objectMode; }
    get readableFlowing() { return this._flowing; }
    get readableLength() { return this._buffer.length; }
    _read() {}
    push(chunk, encoding) {
      if (this._ended) {
        this.emit("error", new Error("stream.push() after EOF"));
        return false;
      }
      if (chunk === null) {
        this._ended = true;
      } else {
        this._buffer.push(toChunk(this, chunk, encoding));
      }
      this._reading = false;
      later(() => this._pump());
      return !this._ended;
    }
    unshift(chunk) { this._buffer.unshift(toChunk(this, chunk)); }
    setEncoding(encoding) { this._encoding = encoding; return this; }
    _out(chunk) {
      return this._encoding && !this._objectMode ? chunk.toString(this._encoding) : chunk;
    }
    read() {
      if (this._buffer.length === 0) {
        this._requestMore();
        return null;
      }
      if (this._objectMode) return this._out(this._buffer.shift());
      const all = Buffer.concat(this._buffer);
      this._buffer = [];
      return this._out(all);
    }
    _requestMore() {
      if (this._ended || this._reading || this.destroyed) return;
      this._reading = true;
      try {
        this._read(16384);
      } catch (error) {
        this.destroy(error);
      }
    }
    _pump() {
      if (this.destroyed) return;
      if (this._flowing) {
        while (this._buffer.length > 0 && this._flowing) this.emit("data", this._out(this._buffer.shift()));
      } else if (this._buffer.length > 0 && this.listenerCount("readable") > 0) {
        this.emit("readable");
      }
      if (this._ended && this._buffer.length === 0 && !this._endEmitted) {
        this._endEmitted = true;
        this.emit("end");
        later(() => this.emit("close"));
        return;
      }
      if (this._flowing && this._buffer.length === 0) this._requestMore();
    }
    resume() {
      this._flowing = true;
      later(() => this._pump());
      return this;
    }
    pause() { this._flowing = false; return this; }
    isPaused() { return this._flowing === false; }
    destroy(error) {
      if (this.destroyed) return this;
      this.destroyed = true;
      const done = (err) => {
        later(() => {
          if (err) this.emit("error", err);
          this.emit("close");
        });
      };
      if (this._destroy) this._destroy(error || null, done);
      else done(error);
      return this;
    }
    async *[Symbol.asyncIterator]() {
      const queue = [];
      let ended = false, failure = null, wake = null;
      this.on("data", (chunk) => { queue.push(chunk); if (wake) wake(); });
      this.on("end", () => { ended = true; if (wake) wake(); });
      this.on("error", (error) => { failure = error; if (wake) wake(); });
      for (;;) {
        if (failure) throw failure;
        if (queue.length > 0) { yield queue.shift(); continue; }
        if (ended) return;
        await new Promise((resolve) => { wake = resolve; });
        wake = null;
      }
    }
    static from(iterable, options = {}) {
      if (typeof iterable === "string" || iterable instanceof Uint8Array) {
        const once = new Readable({ objectMode: true, ...options });
        once.push(iterable);
        once.push(null);
        return once;
      }
      const iterator = iterable[Symbol.asyncIterator]
        ? iterable[Symbol.asyncIterator]() : iterable[Symbol.iterator]();
      const stream = new Readable({
        objectMode: true,
        ...options,
        read() {
          Promise.resolve(iterator.next()).then(
            ({ value, done }) => (done ? this.push(null) : this.push(value)),
            (error) => this.destroy(error),
          );
        },
      });
      return stream;
    }
  }

  const writableMethods = {
    _initWritable(options) {
      this._writableObjectMode = Boolean(options.objectMode || options.writableObjectMode);
      this._queue = [];
      this._writing = false;
      this._ending = false;
      this._finished = false;
      if (typeof options.write === "function") this._write = options.write;
      if (typeof options.writev === "function") this._writev = options.writev;
      if (typeof options.final === "function") this._final = options.final;
    },
    write(chunk, encoding, callback) {
      if (typeof encoding === "function") { callback = encoding; encoding = undefined; }
      if (this._ending) {
        const error = new Error("write after end");
        later(() => { if (callback) callback(error); this.emit("error", error); });
        return false;
      }
      const value = this._writableObjectMode ? chunk
        : typeof chunk === "string" ? Buffer.from(chunk, encoding || "utf8") : Buffer.from(chunk);
      this._queue.push([value, callback]);
      this._drain();
      return true;
    },
    _drain() {
      if (this._writing) return;
      const next = this._queue.shift();
      if (!next) {
        if (this._ending && !this._finished) this._finish();
        return;
      }
      this._writing = true;
      const [chunk, callback] = next;
      let called = false;
      const done = (error) => {
        if (called) return;
        called = true;
        this._writing = false;
        if (callback) callback(error || null);
        if (error) {
          this.destroy(error);
          return;
        }
        later(() => this._drain());
      };
      try {
        this._write(chunk, this._writableObjectMode ? undefined : "buffer", done);
      } catch (error) {
        done(error);
      }
    },
    _finish() {
      this._finished = true;
      const finish = (error) => {
        if (error) {
          this.destroy(error);
          return;
        }
        this.emit("finish");
        if (!(this instanceof Readable)) later(() => this.emit("close"));
      };
      if (this._final) this._final(finish);
      else later(() => finish());
    },
    end(chunk, encoding, callback) {
      if (typeof chunk === "function") { callback = chunk; chunk = undefined; }
      if (typeof encoding === "function") { callback = encoding; encoding = undefined; }
      if (chunk !== undefined && chunk !== null) this.write(chunk, encoding);
      if (callback) this.once("finish", callback);
      this._ending = true;
      this._drain();
      return this;
    },
    cork() {},
    uncork() {},
    setDefaultEncoding() { return this; },
  };

  class Writable extends Stream {
    constructor(options = {}) {
      super();
      this.destroyed = false;
      this._initWritable(options);
      if (typeof options.destroy === "function") this._destroy = options.destroy;
    }
    get writable() { return !this.destroyed && !this._ending; }
    get writableEnded() { return this._ending; }
    get writableFinished() { return this._finished; }
    get writableObjectMode() { return this._writableObjectMode; }
    _write(chunk, encoding, callback) {
      callback(new Error("The _write() method is not implemented"));
    }
    destroy(error) {
      if (this.destroyed) return this;
      this.destroyed = true;
      later(() => {
        if (error) this.emit("error", error);
        this.emit("close");
      });
      return this;
    }
  }
  Object.assign(Writable.prototype, writableMethods);

  class Duplex extends Readable {
    constructor(options = {}) {
      super(options);
      this._initWritable(options);
      if (options.allowHalfOpen === false) this.once("end", () => this.end());
    }
    get writable() { return !this.destroyed && !this._ending; }
    get writableEnded() { return this._ending; }
    get writableFinished() { return this._finished; }
  }
  Object.assign(Duplex.prototype, writableMethods);

  class Transform extends Duplex {
    constructor(options = {}) {
      super(options);
      if (typeof options.transform === "function") this._transform = options.transform;
      if (typeof options.flush === "function") this._flush = options.flush;
    }
    _transform() {
      throw new Error("The _transform() method is not implemented");
    }
    _write(chunk, encoding, callback) {
      this._transform(chunk, encoding, (error, data) => {
        if (!error && data !== undefined && data !== null) this.push(data);
        callback(error);
      });
    }
    _final(callback) {
      const end = (error, data) => {
        if (error) {
          callback(error);
          return;
        }
        if (data !== undefined && data !== null) this.push(data);
        this.push(null);
        callback();
      };
      if (this._flush) this._flush(end);
      else end();
    }
  }

  class PassThrough extends Transform {
    _transform(chunk, encoding, callback) {
      callback(null, chunk);
    }
  }

  function finished(stream, options, callback) {
    if (typeof options === "function") { callback = options; options = {}; }
    const isReadable = stream instanceof Readable;
    const isWritable = typeof stream.end === "function" && typeof stream.write === "function";
    const readable = options.readable ?? isReadable;
    const writable = options.writable ?? isWritable;
    let waiting = (readable ? 1 : 0) + (writable ? 1 : 0);
    let done = false;
    const finish = (error) => {
      if (done) return;
      done = true;
      callback(error || undefined);
    };
    const one = () => { if (--waiting <= 0) finish(); };
    stream.on("error", finish);
    stream.on("close", () => finish());
    if (readable) stream.on("end", one);
    if (writable) stream.on("finish", one);
    if (waiting === 0) later(() => finish());
    return () => { done = true; };
  }

  function pipeline(...streams) {
    const callback = typeof streams[streams.length - 1] === "function" ? streams.pop() : null;
    if (streams.length === 1 && Array.isArray(streams[0])) streams = streams[0];
    if (streams.length < 2) throw new TypeError("pipeline needs at least two streams");
    let reported = false;
    const report = (error) => {
      if (reported) return;
      reported = true;
      if (error) for (const stream of streams) if (typeof stream.destroy === "function") stream.destroy();
      if (callback) callback(error);
    };
    for (let i = 0; i < streams.length - 1; i++) {
      streams[i].on("error", report);
      streams[i].pipe(streams[i + 1]);
    }
    // as in Node, the last stream is done once it has been written to the end
    const last = streams[streams.length - 1];
    const writable = typeof last.write === "function";
    finished(last, { readable: !writable, writable }, (error) => report(error));
    return last;
  }

  const promises = {
    pipeline: (...streams) => new Promise((resolve, reject) => {
      pipeline(...streams, (error) => (error ? reject(error) : resolve()));
    }),
    finished: (stream) => new Promise((resolve, reject) => {
      finished(stream, (error) => (error ? reject(error) : resolve()));
    }),
  };

  Stream.Stream = Stream;
  Object.assign(Stream, {
    Readable, Writable, Duplex, Transform, PassThrough, pipeline, finished, promises,
  });
  modules["node:stream"] = Object.freeze(Object.assign(Object.create(null), {
    default: Stream, Stream, Readable, Writable, Duplex, Transform, PassThrough, pipeline,
    finished, promises,
  }));
  modules["node:stream/promises"] = Object.freeze(Object.assign(Object.create(null), promises, {
    default: promises,
  }));
})();
