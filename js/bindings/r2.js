// `env.BUCKET`: an R2 bucket. Small bodies cross to the host in one message; larger ones
// and streams stream both ways (js/web/hoststreams.js). The host (celld/bindings/r2.py)
// keeps objects as files plus metadata rows.
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const { PromisePrototypeThen } = globalThis.__celld_primordials;
  const b = globalThis.__celld_bindings;
  const web = globalThis.__celld_web;

  const HTTP_FIELDS = [
    ["contentType", "content-type"],
    ["contentLanguage", "content-language"],
    ["contentDisposition", "content-disposition"],
    ["contentEncoding", "content-encoding"],
    ["cacheControl", "cache-control"],
    ["cacheExpiry", "expires"],
  ];

  function hex(bytes) {
    let out = "";
    for (const byte of bytes) out += byte.toString(16).padStart(2, "0");
    return out;
  }

  function hexBytes(text) {
    const out = new Uint8Array(text.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
    return out;
  }

  function wireHttpMetadata(value) {
    if (value === undefined || value === null) return {};
    const out = {};
    if (value instanceof Headers) {
      for (const [field, header] of HTTP_FIELDS) {
        const v = value.get(header);
        if (v !== null) out[field] = field === "cacheExpiry" ? Date.parse(v) : v;
      }
      return out;
    }
    for (const [field] of HTTP_FIELDS) {
      const v = value[field];
      if (v === undefined || v === null) continue;
      out[field] = field === "cacheExpiry" ? new Date(v).getTime() : String(v);
    }
    return out;
  }

  function readHttpMetadata(wire) {
    const out = {};
    for (const [field] of HTTP_FIELDS) {
      const v = wire[field];
      out[field] = v === undefined ? undefined : field === "cacheExpiry" ? new Date(v) : v;
    }
    return out;
  }

  function wireDate(value) {
    return value instanceof Date ? value.getTime() : new Date(value).getTime();
  }

  function wireConditional(onlyIf) {
    if (onlyIf === undefined || onlyIf === null) return undefined;
    if (onlyIf instanceof Headers) {
      const out = {};
      const etags = (v) => v.split(",").map((s) => s.trim()).filter(Boolean);
      if (onlyIf.get("if-match")) out.etagMatches = etags(onlyIf.get("if-match"));
      if (onlyIf.get("if-none-match")) out.etagDoesNotMatch = etags(onlyIf.get("if-none-match"));
      if (onlyIf.get("if-modified-since")) out.uploadedAfter = Date.parse(onlyIf.get("if-modified-since"));
      if (onlyIf.get("if-unmodified-since")) out.uploadedBefore = Date.parse(onlyIf.get("if-unmodified-since"));
      return out;
    }
    const out = {};
    for (const name of ["etagMatches", "etagDoesNotMatch"]) {
      if (onlyIf[name] !== undefined) out[name] = onlyIf[name];
    }
    if (onlyIf.uploadedBefore !== undefined) out.uploadedBefore = wireDate(onlyIf.uploadedBefore);
    if (onlyIf.uploadedAfter !== undefined) out.uploadedAfter = wireDate(onlyIf.uploadedAfter);
    return out;
  }

  const HASH_LENGTHS = { md5: ["MD5", 16], sha1: ["SHA-1", 20], sha256: ["SHA-256", 32],
    sha384: ["SHA-384", 48], sha512: ["SHA-512", 64] };

  function wireChecksum(name, value) {
    const [label, size] = HASH_LENGTHS[name];
    if (typeof value === "string") {
      if (value.length !== size * 2) {
        throw new TypeError(`${label} is ${size * 2} hex characters, not ${value.length}`);
      }
      return value.toLowerCase();
    }
    const bytes = web.bufferSourceBytes(value);
    if (!bytes) throw new TypeError(`${label} must be a hex string or an ArrayBuffer`);
    if (bytes.length !== size) throw new TypeError(`${label} is ${size} bytes, not ${bytes.length}`);
    return hex(bytes);
  }

  class R2Checksums {
    #hex;
    constructor(hexes) {
      this.#hex = hexes;
      for (const name of ["md5", "sha1", "sha256", "sha384", "sha512"]) {
        if (hexes[name] !== undefined) {
          Object.defineProperty(this, name, { value: b.toArrayBuffer(hexBytes(hexes[name])), enumerable: true });
        }
      }
    }
    toJSON() {
      return Object.assign({}, this.#hex);
    }
  }

  class R2Object {
    constructor(wire) {
      this.key = wire.key;
      this.version = wire.version;
      this.size = wire.size;
      this.etag = wire.etag;
      this.httpEtag = `"${wire.etag}"`;
      this.checksums = new R2Checksums(wire.checksums || {});
      this.uploaded = new Date(wire.uploaded);
      this.httpMetadata = readHttpMetadata(wire.httpMetadata || {});
      this.customMetadata = Object.assign({}, wire.customMetadata || {});
      this.range = wire.range || undefined;
      this.storageClass = wire.storageClass;
    }
    writeHttpMetadata(headers) {
      for (const [field, header] of HTTP_FIELDS) {
        const v = this.httpMetadata[field];
        if (v === undefined) continue;
        headers.set(header, field === "cacheExpiry" ? v.toUTCString() : v);
      }
    }
  }

  /** An object with its body: small bodies come in the answer, larger ones stream from the
   * object's file as they are read (js/web/hoststreams.js). */
  class R2ObjectBody extends R2Object {
    #data = null;
    #stream = null;
    #used = false;
    constructor(wire, owner) {
      super(wire);
      if (wire.stream) this.#stream = web.fromHost(wire.stream.id, wire.stream.length, owner);
      else this.#data = b.fromWire(wire.body);
    }
    get body() {
      if (this.#stream === null) this.#stream = web.streamFromBytes(this.#data.bytes());
      return this.#stream;
    }
    get bodyUsed() {
      return this.#used || (this.#stream !== null && web.streamDisturbed(this.#stream));
    }
    /** The whole body: {bytes(), text()}. */
    async #take() {
      if (this.bodyUsed) throw new TypeError("Body has already been used. It can only be used once.");
      this.#used = true;
      if (this.#data !== null) return this.#data;
      const bytes = await web.collectStream(this.#stream);
      let text = null;
      return { bytes: () => bytes, text: () => (text === null ? (text = web.utf8Decode(bytes)) : text) };
    }
    async arrayBuffer() {
      return b.toArrayBuffer((await this.#take()).bytes());
    }
    async bytes() {
      return new Uint8Array(b.toArrayBuffer((await this.#take()).bytes()));
    }
    async text() {
      return (await this.#take()).text();
    }
    async json() {
      return JSON.parse((await this.#take()).text());
    }
    async blob() {
      const type = this.httpMetadata.contentType || "";
      return new Blob([(await this.#take()).bytes()], { type });
    }
  }

  function wireRange(range) {
    if (range === undefined || range === null) return undefined;
    if (range instanceof Headers) {
      const text = range.get("range");
      if (!text) return undefined;
      const m = /^bytes=(\d*)-(\d*)$/.exec(text.trim());
      if (!m) throw new Error("get: The requested range is not satisfiable (10039)");
      if (m[1] === "") return { suffix: Number(m[2]) };
      const offset = Number(m[1]);
      return m[2] === "" ? { offset } : { offset, length: Number(m[2]) - offset + 1 };
    }
    return Object.assign({}, range);
  }

  class R2MultipartUpload {
    #bucket;
    constructor(bucket, key, uploadId) {
      this.#bucket = bucket;
      Object.defineProperty(this, "key", { value: key, enumerable: true });
      Object.defineProperty(this, "uploadId", { value: uploadId, enumerable: true });
    }
    async uploadPart(partNumber, value) {
      return this.#bucket.call("uploadPart", {
        key: this.key, uploadId: this.uploadId, partNumber, value: await b.toWire(value, "uploadPart"),
      });
    }
    async abort() {
      await this.#bucket.call("abort", { key: this.key, uploadId: this.uploadId });
    }
    async complete(parts) {
      const wire = await this.#bucket.call("complete", {
        key: this.key,
        uploadId: this.uploadId,
        parts: Array.from(parts, (p) => ({ partNumber: p.partNumber, etag: p.etag })),
      });
      return new R2Object(wire);
    }
  }

  /** Keys are converted with String(), as workerd's bindings convert them. */
  function checkKey(method, key) {
    return String(key);
  }

  const PUT_TYPES = "JsReadableStream or ArrayBuffer or ArrayBufferView or string or Blob";

  class R2Bucket {
    #id;
    constructor(id) {
      this.#id = id;
    }
    call(method, fields) {
      return host.request("r2", Object.assign({ id: this.#id, method }, fields));
    }
    async head(key) {
      const wire = await this.call("head", { key: checkKey("head", key) });
      return wire === null ? null : new R2Object(wire);
    }
    async get(key, options) {
      const opts = options || {};
      const owner = host.owner();
      const wire = await this.call("get", {
        key: checkKey("get", key),
        options: { onlyIf: wireConditional(opts.onlyIf), range: wireRange(opts.range) },
      });
      if (wire === null) return null;
      return "body" in wire || "stream" in wire ? new R2ObjectBody(wire, owner) : new R2Object(wire);
    }
    async put(key, value, options) {
      key = checkKey("put", key);
      const opts = options || {};
      if (value !== null && value !== undefined && typeof value !== "string"
        && !(value instanceof ArrayBuffer) && !ArrayBuffer.isView(value)
        && !(value instanceof ReadableStream) && !(value instanceof Blob)) {
        throw new TypeError(`Failed to execute 'put' on 'R2Bucket': parameter 2 is not of type '${PUT_TYPES}'.`);
      }
      const owner = host.owner();
      if (value instanceof Blob) value = await value.arrayBuffer();
      // A stream, or bytes too large for one message, streams to the host (which writes it
      // to the object's file as it comes); a host body nobody read goes there directly.
      let wireValue;
      let stream = null;
      if (value instanceof ReadableStream) {
        if (web.streamLocked(value) || web.streamDisturbed(value)) {
          throw new TypeError("put: the ReadableStream is locked or has already been read from");
        }
        const taken = web.takeHostSource(value);
        if (taken !== null) wireValue = { source: taken.id };
        else stream = value;
      } else {
        const bytes = typeof value === "string" && value.length > web.PIECE_BYTES / 3
          ? web.utf8Encode(value) : web.bufferSourceView(value);
        if (bytes && bytes.length > web.PIECE_BYTES) stream = web.streamFromBytes(bytes);
        else wireValue = await b.toWire(value, "put");
      }
      let pipe = null;
      if (stream !== null) {
        pipe = web.openPipe();
        wireValue = { pipe };
      }
      const wireOpts = {
        httpMetadata: wireHttpMetadata(opts.httpMetadata),
        customMetadata: opts.customMetadata ? Object.fromEntries(
          Object.entries(opts.customMetadata).map(([k, v]) => [k, String(v)])) : {},
        onlyIf: wireConditional(opts.onlyIf),
      };
      for (const name of ["md5", "sha1", "sha256", "sha384", "sha512"]) {
        if (opts[name] !== undefined) wireOpts[name] = wireChecksum(name, opts[name]);
      }
      const answer = this.call("put", { key, value: wireValue, options: wireOpts });
      if (pipe !== null) {
        // A failed body fails the put itself (the host answers with the stream's error).
        PromisePrototypeThen(web.pumpToHost(pipe, stream, owner), undefined, () => {});
      }
      const wire = await answer;
      return wire === null ? null : new R2Object(wire);
    }
    async delete(keys) {
      const list = Array.isArray(keys) ? keys : [keys];
      await this.call("delete", { keys: list.map((k) => checkKey("delete", k)) });
    }
    async list(options) {
      const opts = options || {};
      const wireOpts = {};
      for (const name of ["prefix", "delimiter", "cursor", "limit", "startAfter", "include"]) {
        if (opts[name] !== undefined && opts[name] !== null) wireOpts[name] = opts[name];
      }
      const answer = await this.call("list", { options: wireOpts });
      const result = {
        objects: answer.objects.map((o) => new R2Object(o)),
        truncated: answer.truncated,
        cursor: undefined,
        delimitedPrefixes: answer.delimitedPrefixes,
      };
      result.cursor = answer.cursor; // present (undefined) when not truncated, as in workerd
      return result;
    }
    async createMultipartUpload(key, options) {
      key = checkKey("createMultipartUpload", key);
      const opts = options || {};
      const uploadId = await this.call("createMultipartUpload", {
        key,
        options: {
          httpMetadata: wireHttpMetadata(opts.httpMetadata),
          customMetadata: opts.customMetadata || {},
        },
      });
      return new R2MultipartUpload(this, key, uploadId);
    }
    resumeMultipartUpload(key, uploadId) {
      return new R2MultipartUpload(this, checkKey("resumeMultipartUpload", key), String(uploadId));
    }
  }

  globalThis.__celld_cloudflare.onEnv((message, env) => {
    for (const binding of message.r2 || []) env[binding.binding] = new R2Bucket(binding.id);
  });
})();
