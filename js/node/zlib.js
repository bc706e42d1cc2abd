// node:zlib on pako (js/vendor/pako.js), a port of zlib's C code whose output is zlib's byte
// for byte: deflate, inflate, their raw and gzip forms and unzip, synchronous, with a
// callback, and as streams; crc32. Brotli runs on the host (Google's library), so only its
// asynchronous forms are provided.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const { Buffer } = globalThis.__celld_node.buffer;
  const { Transform } = modules["node:stream"];
  const make = globalThis.__celld_pako;
  delete globalThis.__celld_pako;
  const pako = make();
  const { Z_FINISH, Z_NO_FLUSH } = pako.constants;

  /** Node's zlib.constants (Node 20 on Linux). */
  const constants = Object.freeze({"Z_NO_FLUSH":0,"Z_PARTIAL_FLUSH":1,"Z_SYNC_FLUSH":2,"Z_FULL_FLUSH":3,"Z_FINISH":4,"Z_BLOCK":5,"Z_OK":0,"Z_STREAM_END":1,"Z_NEED_DICT":2,"Z_ERRNO":-1,"Z_STREAM_ERROR":-2,"Z_DATA_ERROR":-3,"Z_MEM_ERROR":-4,"Z_BUF_ERROR":-5,"Z_VERSION_ERROR":-6,"Z_NO_COMPRESSION":0,"Z_BEST_SPEED":1,"Z_BEST_COMPRESSION":9,"Z_DEFAULT_COMPRESSION":-1,"Z_FILTERED":1,"Z_HUFFMAN_ONLY":2,"Z_RLE":3,"Z_FIXED":4,"Z_DEFAULT_STRATEGY":0,"ZLIB_VERNUM":4880,"DEFLATE":1,"INFLATE":2,"GZIP":3,"GUNZIP":4,"DEFLATERAW":5,"INFLATERAW":6,"UNZIP":7,"BROTLI_DECODE":8,"BROTLI_ENCODE":9,"Z_MIN_WINDOWBITS":8,"Z_MAX_WINDOWBITS":15,"Z_DEFAULT_WINDOWBITS":15,"Z_MIN_CHUNK":64,"Z_MAX_CHUNK":null,"Z_DEFAULT_CHUNK":16384,"Z_MIN_MEMLEVEL":1,"Z_MAX_MEMLEVEL":9,"Z_DEFAULT_MEMLEVEL":8,"Z_MIN_LEVEL":-1,"Z_MAX_LEVEL":9,"Z_DEFAULT_LEVEL":-1,"BROTLI_OPERATION_PROCESS":0,"BROTLI_OPERATION_FLUSH":1,"BROTLI_OPERATION_FINISH":2,"BROTLI_OPERATION_EMIT_METADATA":3,"BROTLI_PARAM_MODE":0,"BROTLI_MODE_GENERIC":0,"BROTLI_MODE_TEXT":1,"BROTLI_MODE_FONT":2,"BROTLI_DEFAULT_MODE":0,"BROTLI_PARAM_QUALITY":1,"BROTLI_MIN_QUALITY":0,"BROTLI_MAX_QUALITY":11,"BROTLI_DEFAULT_QUALITY":11,"BROTLI_PARAM_LGWIN":2,"BROTLI_MIN_WINDOW_BITS":10,"BROTLI_MAX_WINDOW_BITS":24,"BROTLI_LARGE_MAX_WINDOW_BITS":30,"BROTLI_DEFAULT_WINDOW":22,"BROTLI_PARAM_LGBLOCK":3,"BROTLI_MIN_INPUT_BLOCK_BITS":16,"BROTLI_MAX_INPUT_BLOCK_BITS":24,"BROTLI_PARAM_DISABLE_LITERAL_CONTEXT_MODELING":4,"BROTLI_PARAM_SIZE_HINT":5,"BROTLI_PARAM_LARGE_WINDOW":6,"BROTLI_PARAM_NPOSTFIX":7,"BROTLI_PARAM_NDIRECT":8,"BROTLI_DECODER_RESULT_ERROR":0,"BROTLI_DECODER_RESULT_SUCCESS":1,"BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT":2,"BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT":3,"BROTLI_DECODER_PARAM_DISABLE_RING_BUFFER_REALLOCATION":0,"BROTLI_DECODER_PARAM_LARGE_WINDOW":1,"BROTLI_DECODER_NO_ERROR":0,"BROTLI_DECODER_SUCCESS":1,"BROTLI_DECODER_NEEDS_MORE_INPUT":2,"BROTLI_DECODER_NEEDS_MORE_OUTPUT":3,"BROTLI_DECODER_ERROR_FORMAT_EXUBERANT_NIBBLE":-1,"BROTLI_DECODER_ERROR_FORMAT_RESERVED":-2,"BROTLI_DECODER_ERROR_FORMAT_EXUBERANT_META_NIBBLE":-3,"BROTLI_DECODER_ERROR_FORMAT_SIMPLE_HUFFMAN_ALPHABET":-4,"BROTLI_DECODER_ERROR_FORMAT_SIMPLE_HUFFMAN_SAME":-5,"BROTLI_DECODER_ERROR_FORMAT_CL_SPACE":-6,"BROTLI_DECODER_ERROR_FORMAT_HUFFMAN_SPACE":-7,"BROTLI_DECODER_ERROR_FORMAT_CONTEXT_MAP_REPEAT":-8,"BROTLI_DECODER_ERROR_FORMAT_BLOCK_LENGTH_1":-9,"BROTLI_DECODER_ERROR_FORMAT_BLOCK_LENGTH_2":-10,"BROTLI_DECODER_ERROR_FORMAT_TRANSFORM":-11,"BROTLI_DECODER_ERROR_FORMAT_DICTIONARY":-12,"BROTLI_DECODER_ERROR_FORMAT_WINDOW_BITS":-13,"BROTLI_DECODER_ERROR_FORMAT_PADDING_1":-14,"BROTLI_DECODER_ERROR_FORMAT_PADDING_2":-15,"BROTLI_DECODER_ERROR_FORMAT_DISTANCE":-16,"BROTLI_DECODER_ERROR_DICTIONARY_NOT_SET":-19,"BROTLI_DECODER_ERROR_INVALID_ARGUMENTS":-20,"BROTLI_DECODER_ERROR_ALLOC_CONTEXT_MODES":-21,"BROTLI_DECODER_ERROR_ALLOC_TREE_GROUPS":-22,"BROTLI_DECODER_ERROR_ALLOC_CONTEXT_MAP":-25,"BROTLI_DECODER_ERROR_ALLOC_RING_BUFFER_1":-26,"BROTLI_DECODER_ERROR_ALLOC_RING_BUFFER_2":-27,"BROTLI_DECODER_ERROR_ALLOC_BLOCK_TYPE_TREES":-30,"BROTLI_DECODER_ERROR_UNREACHABLE":-31});
  const codes = Object.freeze({"0":"Z_OK","1":"Z_STREAM_END","2":"Z_NEED_DICT","Z_OK":0,"Z_STREAM_END":1,"Z_NEED_DICT":2,"Z_ERRNO":-1,"Z_STREAM_ERROR":-2,"Z_DATA_ERROR":-3,"Z_MEM_ERROR":-4,"Z_BUF_ERROR":-5,"Z_VERSION_ERROR":-6,"-1":"Z_ERRNO","-2":"Z_STREAM_ERROR","-3":"Z_DATA_ERROR","-4":"Z_MEM_ERROR","-5":"Z_BUF_ERROR","-6":"Z_VERSION_ERROR"});

  const KINDS = {
    Deflate: { engine: pako.Deflate },
    Inflate: { engine: pako.Inflate },
    DeflateRaw: { engine: pako.Deflate, raw: true },
    InflateRaw: { engine: pako.Inflate, raw: true },
    Gzip: { engine: pako.Deflate, gzip: true },
    Gunzip: { engine: pako.Inflate, windowOffset: 16 },
    Unzip: { engine: pako.Inflate, windowOffset: 32 },
  };

  function bytesOf(data, what = "buffer") {
    if (typeof data === "string") return Buffer.from(data);
    if (data instanceof ArrayBuffer) return new Uint8Array(data);
    if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const error = new TypeError(`The "${what}" argument must be of type string or an instance of Buffer, TypedArray, DataView, or ArrayBuffer.`);
    error.code = "ERR_INVALID_ARG_TYPE";
    throw error;
  }

  function engineOptions(kind, options = {}) {
    const spec = KINDS[kind];
    const out = { chunkSize: options.chunkSize ?? 16 * 1024 };
    for (const name of ["level", "memLevel", "strategy"]) {
      if (options[name] !== undefined) out[name] = options[name];
    }
    const bits = options.windowBits ?? 15;
    if (spec.raw) out.raw = true;
    if (spec.gzip) out.gzip = true;
    out.windowBits = spec.windowOffset ? bits + spec.windowOffset : bits;
    if (options.dictionary !== undefined) out.dictionary = bytesOf(options.dictionary, "dictionary");
    return out;
  }

  function zlibError(engine, fallback) {
    const error = new Error(engine.msg || fallback);
    return error;
  }

  /** Run one whole input through a fresh engine of . */
  function whole(kind, data, options) {
    const engine = new KINDS[kind].engine(engineOptions(kind, options));
    engine.push(bytesOf(data), Z_FINISH);
    if (engine.err) throw zlibError(engine, "zlib error");
    if (engine.ended === false) throw new Error("unexpected end of file");
    return Buffer.from(engine.result ?? new Uint8Array(0));
  }

  class Zlib extends Transform {
    #engine;
    constructor(kind, options = {}) {
      super(options);
      this.#engine = new KINDS[kind].engine(engineOptions(kind, options));
      this.#engine.onData = (chunk) => this.push(Buffer.from(chunk));
      this.#engine.onEnd = () => {};
      this.bytesWritten = 0;
    }
    _transform(chunk, encoding, callback) {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk, encoding) : bytesOf(chunk, "chunk");
      this.bytesWritten += bytes.length;
      this.#engine.push(bytes, Z_NO_FLUSH);
      callback(this.#engine.err ? zlibError(this.#engine, "zlib error") : null);
    }
    _flush(callback) {
      this.#engine.push(new Uint8Array(0), Z_FINISH);
      callback(this.#engine.err ? zlibError(this.#engine, "zlib error") : null);
    }
    close(callback) {
      if (typeof callback === "function") queueMicrotask(callback);
      this.destroy();
    }
  }

  const zlib = { constants, codes };
  for (const name of Object.keys(constants)) {
    if (name.startsWith("Z_")) zlib[name] = constants[name];
  }
  for (const kind of Object.keys(KINDS)) {
    const lower = kind[0].toLowerCase() + kind.slice(1);
    const Class = { [kind]: class extends Zlib { constructor(options) { super(kind, options); } } }[kind];
    zlib[kind] = Class;
    zlib["create" + kind] = (options) => new Class(options);
    zlib[lower + "Sync"] = (data, options) => whole(kind, data, options);
    zlib[lower] = (data, options, callback) => {
      if (typeof options === "function") { callback = options; options = {}; }
      if (typeof callback !== "function") {
        const error = new TypeError('The "callback" argument must be of type function.');
        error.code = "ERR_INVALID_ARG_TYPE";
        throw error;
      }
      let result, failure = null;
      try { result = whole(kind, data, options); } catch (error) { failure = error; }
      queueMicrotask(() => (failure ? callback(failure) : callback(null, result)));
    };
  }

  /** CRC-32 of `data` (as Node 22's zlib.crc32), read from the trailer of a stored gzip
   * member pako writes: the checksum is zlib's own code, not ours. */
  zlib.crc32 = (data, value = 0) => {
    if (value !== 0) {
      const error = new Error("celld: zlib.crc32 with a starting value is not provided; pass the whole data at once");
      error.code = "ERR_METHOD_NOT_IMPLEMENTED";
      throw error;
    }
    const member = whole("Gzip", data, { level: 0 });
    return new DataView(member.buffer, member.byteOffset, member.byteLength).getUint32(member.length - 8, true);
  };

  // -- Brotli, on the host (celld/isolate/nodeops.py: Google's library) ----------------------
  // The bridge to the host is asynchronous, so the callback forms, the promisified ones and
  // the streams work; the *Sync forms, which must answer before returning, are refused
  // with the asynchronous alternative named (as node:crypto's synchronous OpenSSL calls are).
  const host = globalThis.__celld_host;
  function brotliParams(options = {}) {
    const params = {};
    for (const [key, value] of Object.entries(options.params ?? {})) params[key] = Number(value);
    return params;
  }
  async function brotli(method, data, options) {
    const bytes = bytesOf(data);
    const answer = await host.request("nodezlib", {
      method, data: bytes.toBase64 ? bytes.toBase64() : Buffer.from(bytes).toString("base64"),
      params: brotliParams(options),
    });
    if (answer.error) {
      const error = new Error(answer.error.message);
      if (answer.error.code) error.code = answer.error.code;
      throw error;
    }
    return Buffer.from(answer.value, "base64");
  }
  function brotliCallback(method, name) {
    return (data, options, callback) => {
      if (typeof options === "function") { callback = options; options = {}; }
      if (typeof callback !== "function") {
        const error = new TypeError('The "callback" argument must be of type function.');
        error.code = "ERR_INVALID_ARG_TYPE";
        throw error;
      }
      const done = host.bindContext(callback);
      brotli(method, data, options).then((result) => done(null, result), (error) => done(error));
    };
  }
  function brotliSync(name, alternative) {
    return () => {
      const error = new Error(
        `celld: zlib.${name} cannot answer synchronously: Brotli runs on the host, which a Worker reaches only asynchronously; use zlib.${alternative} (a callback, or util.promisify) or zlib.create${alternative[0].toUpperCase()}${alternative.slice(1)}() instead`);
      error.code = "ERR_METHOD_NOT_IMPLEMENTED";
      throw error;
    };
  }
  /** A Brotli stream: collects what is written and sends it to the host in one piece when it
   * ends (a Brotli stream cannot be cut at arbitrary points on the way back). */
  class BrotliStream extends Transform {
    #method; #options; #chunks = [];
    constructor(method, options = {}) {
      super(options);
      this.#method = method;
      this.#options = options;
      this.bytesWritten = 0;
    }
    _transform(chunk, encoding, callback) {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk, encoding) : bytesOf(chunk, "chunk");
      this.bytesWritten += bytes.length;
      this.#chunks.push(bytes);
      callback(null);
    }
    _flush(callback) {
      const done = host.bindContext(callback);
      brotli(this.#method, Buffer.concat(this.#chunks), this.#options).then(
        (result) => { if (result.length) this.push(result); done(null); },
        (error) => done(error));
      this.#chunks = [];
    }
    close(callback) {
      if (typeof callback === "function") queueMicrotask(callback);
      this.destroy();
    }
  }
  zlib.BrotliCompress = class BrotliCompress extends BrotliStream { constructor(options) { super("compress", options); } };
  zlib.BrotliDecompress = class BrotliDecompress extends BrotliStream { constructor(options) { super("decompress", options); } };
  zlib.createBrotliCompress = (options) => new zlib.BrotliCompress(options);
  zlib.createBrotliDecompress = (options) => new zlib.BrotliDecompress(options);
  zlib.brotliCompress = brotliCallback("compress", "brotliCompress");
  zlib.brotliDecompress = brotliCallback("decompress", "brotliDecompress");
  zlib.brotliCompressSync = brotliSync("brotliCompressSync", "brotliCompress");
  zlib.brotliDecompressSync = brotliSync("brotliDecompressSync", "brotliDecompress");
  // (util.promisify finds the callback forms; workerd's Zstandard is not provided yet)
  for (const name of ["zstdCompress", "zstdCompressSync", "zstdDecompress", "zstdDecompressSync",
    "createZstdCompress", "createZstdDecompress", "ZstdCompress", "ZstdDecompress"]) {
    zlib[name] = () => {
      const error = new Error(`celld: zlib.${name} is not provided yet (Zstandard)`);
      error.code = "ERR_METHOD_NOT_IMPLEMENTED";
      throw error;
    };
  }

  modules["node:zlib"] = Object.freeze(Object.assign(Object.create(null), zlib, { default: zlib }));
})();
