// node:buffer: Buffer as a Uint8Array subclass with Node's encodings and the read/write
// helpers Worker code reaches for; the `Buffer` global of nodejs_compat.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const web = globalThis.__celld_web;
  const ENCODINGS = new Set([
    "utf8", "utf-8", "hex", "base64", "base64url", "latin1", "binary", "ascii", "ucs2",
    "ucs-2", "utf16le", "utf-16le",
  ]);

  function normalizeEncoding(encoding) {
    const name = String(encoding ?? "utf8").toLowerCase();
    if (!ENCODINGS.has(name)) throw new TypeError(`Unknown encoding: ${encoding}`);
    if (name === "utf-8") return "utf8";
    if (name === "binary") return "latin1";
    if (name === "ucs2" || name === "ucs-2" || name === "utf-16le") return "utf16le";
    return name;
  }

  function encode(string, encoding) {
    switch (normalizeEncoding(encoding)) {
      case "utf8": return web.utf8Encode(string);
      case "hex": {
        const length = string.length >>> 1;
        const out = new Uint8Array(length);
        let i = 0;
        for (; i < length; i++) {
          const byte = parseInt(string.substr(i * 2, 2), 16);
          if (Number.isNaN(byte)) break;
          out[i] = byte;
        }
        return out.subarray(0, i);
      }
      case "base64":
      case "base64url": {
        const clean = string.replace(/[^A-Za-z0-9+/\-_]/g, "");
        const padded = clean + "===".slice((clean.length + 3) % 4);
        return web.base64ToBytes(padded.length % 4 === 0 ? padded : clean);
      }
      case "latin1":
      case "ascii": {
        const out = new Uint8Array(string.length);
        for (let i = 0; i < string.length; i++) out[i] = string.charCodeAt(i) & 0xff;
        return out;
      }
      case "utf16le": {
        const out = new Uint8Array(string.length * 2);
        for (let i = 0; i < string.length; i++) {
          const code = string.charCodeAt(i);
          out[i * 2] = code & 0xff;
          out[i * 2 + 1] = code >>> 8;
        }
        return out;
      }
    }
  }

  function decode(bytes, encoding) {
    switch (normalizeEncoding(encoding)) {
      case "utf8": return web.utf8Decode(bytes);
      case "hex": {
        let out = "";
        for (const byte of bytes) out += (byte < 16 ? "0" : "") + byte.toString(16);
        return out;
      }
      case "base64": return web.bytesToBase64(bytes);
      case "base64url":
        return web.bytesToBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
      case "latin1": {
        let out = "";
        for (let i = 0; i < bytes.length; i += 4096) {
          out += String.fromCharCode(...bytes.subarray(i, i + 4096));
        }
        return out;
      }
      case "ascii": {
        let out = "";
        for (const byte of bytes) out += String.fromCharCode(byte & 0x7f);
        return out;
      }
      case "utf16le": {
        let out = "";
        for (let i = 0; i + 1 < bytes.length; i += 2) {
          out += String.fromCharCode(bytes[i] | (bytes[i + 1] << 8));
        }
        return out;
      }
    }
  }

  class Buffer extends Uint8Array {
    static from(value, encodingOrOffset, length) {
      if (typeof value === "string") return wrap(encode(value, encodingOrOffset));
      if (value instanceof ArrayBuffer || (typeof SharedArrayBuffer !== "undefined" && value instanceof SharedArrayBuffer)) {
        const offset = encodingOrOffset === undefined ? 0 : Number(encodingOrOffset);
        const size = length === undefined ? value.byteLength - offset : Number(length);
        return new Buffer(value, offset, size);
      }
      if (ArrayBuffer.isView(value)) {
        const copy = new Buffer(value.byteLength);
        copy.set(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
        return copy;
      }
      if (value && typeof value === "object") {
        if (value.type === "Buffer" && Array.isArray(value.data)) return Buffer.from(value.data);
        if (typeof value.length === "number" || Array.isArray(value)) {
          const out = new Buffer(value.length);
          for (let i = 0; i < value.length; i++) out[i] = Number(value[i]) & 0xff;
          return out;
        }
        if (typeof value.valueOf === "function" && value.valueOf() !== value) {
          return Buffer.from(value.valueOf(), encodingOrOffset, length);
        }
      }
      throw new TypeError("The first argument must be of type string, Buffer, ArrayBuffer, Array, or Array-like Object");
    }
    static alloc(size, fill, encoding) {
      const out = new Buffer(checkSize(size));
      if (fill !== undefined && fill !== 0) out.fill(fill, 0, out.length, encoding);
      return out;
    }
    static allocUnsafe(size) { return new Buffer(checkSize(size)); }
    static allocUnsafeSlow(size) { return new Buffer(checkSize(size)); }
    static isBuffer(value) { return value instanceof Buffer; }
    static isEncoding(encoding) {
      return typeof encoding === "string" && ENCODINGS.has(encoding.toLowerCase());
    }
    static byteLength(value, encoding) {
      if (typeof value === "string") return encode(value, encoding).length;
      if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return value.byteLength;
      throw new TypeError("The \"string\" argument must be of type string, Buffer, or ArrayBuffer");
    }
    static concat(list, totalLength) {
      if (!Array.isArray(list)) throw new TypeError("The \"list\" argument must be an Array");
      const total = totalLength ?? list.reduce((sum, b) => sum + b.length, 0);
      const out = Buffer.alloc(total);
      let offset = 0;
      for (const item of list) {
        if (offset >= total) break;
        const bytes = item instanceof Uint8Array ? item : Buffer.from(item);
        out.set(bytes.subarray(0, total - offset), offset);
        offset += bytes.length;
      }
      return out;
    }
    static compare(a, b) { return a.compare(b); }

    toString(encoding, start = 0, end = this.length) {
      return decode(this.subarray(start, end), encoding);
    }
    toJSON() { return { type: "Buffer", data: Array.from(this) }; }
    equals(other) { return this.compare(other) === 0; }
    compare(other, targetStart = 0, targetEnd = other.length, sourceStart = 0, sourceEnd = this.length) {
      const a = this.subarray(sourceStart, sourceEnd);
      const b = other.subarray(targetStart, targetEnd);
      const n = Math.min(a.length, b.length);
      for (let i = 0; i < n; i++) {
        if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
      }
      return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
    }
    slice(start, end) { return this.subarray(start, end); }
    subarray(start, end) {
      const view = Uint8Array.prototype.subarray.call(this, start, end);
      return new Buffer(view.buffer, view.byteOffset, view.length);
    }
    write(string, offset = 0, length, encoding) {
      if (typeof offset === "string") { encoding = offset; offset = 0; length = undefined; }
      if (typeof length === "string") { encoding = length; length = undefined; }
      const bytes = encode(string, encoding);
      const count = Math.min(bytes.length, this.length - offset, length ?? Infinity);
      this.set(bytes.subarray(0, count), offset);
      return count;
    }
    fill(value, offset = 0, end = this.length, encoding) {
      if (typeof offset === "string") { encoding = offset; offset = 0; end = this.length; }
      if (typeof value === "string") {
        const bytes = encode(value, encoding);
        if (bytes.length === 0) return Uint8Array.prototype.fill.call(this, 0, offset, end);
        for (let i = offset, j = 0; i < end; i++, j = (j + 1) % bytes.length) this[i] = bytes[j];
        return this;
      }
      if (value instanceof Uint8Array) {
        for (let i = offset, j = 0; i < end; i++, j = (j + 1) % value.length) this[i] = value[j];
        return this;
      }
      return Uint8Array.prototype.fill.call(this, Number(value) & 0xff, offset, end);
    }
    copy(target, targetStart = 0, sourceStart = 0, sourceEnd = this.length) {
      const bytes = this.subarray(sourceStart, sourceEnd);
      const count = Math.min(bytes.length, target.length - targetStart);
      target.set(bytes.subarray(0, count), targetStart);
      return count;
    }
    indexOf(value, byteOffset = 0, encoding) {
      if (typeof value === "number") return Uint8Array.prototype.indexOf.call(this, value, byteOffset);
      const needle = typeof value === "string" ? encode(value, encoding) : value;
      if (needle.length === 0) return byteOffset <= this.length ? byteOffset : this.length;
      outer: for (let i = byteOffset < 0 ? Math.max(0, this.length + byteOffset) : byteOffset; i <= this.length - needle.length; i++) {
        for (let j = 0; j < needle.length; j++) if (this[i + j] !== needle[j]) continue outer;
        return i;
      }
      return -1;
    }
    includes(value, byteOffset, encoding) { return this.indexOf(value, byteOffset, encoding) !== -1; }
    readUInt8(o = 0) { return dv(this).getUint8(o); }
    readInt8(o = 0) { return dv(this).getInt8(o); }
    readUInt16LE(o = 0) { return dv(this).getUint16(o, true); }
    readUInt16BE(o = 0) { return dv(this).getUint16(o, false); }
    readInt16LE(o = 0) { return dv(this).getInt16(o, true); }
    readInt16BE(o = 0) { return dv(this).getInt16(o, false); }
    readUInt32LE(o = 0) { return dv(this).getUint32(o, true); }
    readUInt32BE(o = 0) { return dv(this).getUint32(o, false); }
    readInt32LE(o = 0) { return dv(this).getInt32(o, true); }
    readInt32BE(o = 0) { return dv(this).getInt32(o, false); }
    readFloatLE(o = 0) { return dv(this).getFloat32(o, true); }
    readFloatBE(o = 0) { return dv(this).getFloat32(o, false); }
    readDoubleLE(o = 0) { return dv(this).getFloat64(o, true); }
    readDoubleBE(o = 0) { return dv(this).getFloat64(o, false); }
    readBigUInt64LE(o = 0) { return dv(this).getBigUint64(o, true); }
    readBigUInt64BE(o = 0) { return dv(this).getBigUint64(o, false); }
    writeUInt8(v, o = 0) { dv(this).setUint8(o, v); return o + 1; }
    writeInt8(v, o = 0) { dv(this).setInt8(o, v); return o + 1; }
    writeUInt16LE(v, o = 0) { dv(this).setUint16(o, v, true); return o + 2; }
    writeUInt16BE(v, o = 0) { dv(this).setUint16(o, v, false); return o + 2; }
    writeInt16LE(v, o = 0) { dv(this).setInt16(o, v, true); return o + 2; }
    writeInt16BE(v, o = 0) { dv(this).setInt16(o, v, false); return o + 2; }
    writeUInt32LE(v, o = 0) { dv(this).setUint32(o, v, true); return o + 4; }
    writeUInt32BE(v, o = 0) { dv(this).setUint32(o, v, false); return o + 4; }
    writeInt32LE(v, o = 0) { dv(this).setInt32(o, v, true); return o + 4; }
    writeInt32BE(v, o = 0) { dv(this).setInt32(o, v, false); return o + 4; }
    writeDoubleLE(v, o = 0) { dv(this).setFloat64(o, v, true); return o + 8; }
    writeDoubleBE(v, o = 0) { dv(this).setFloat64(o, v, false); return o + 8; }
  }

  function dv(bytes) {
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  for (const [alias, name] of [["readUint8", "readUInt8"], ["readUint16LE", "readUInt16LE"],
    ["readUint16BE", "readUInt16BE"], ["readUint32LE", "readUInt32LE"],
    ["readUint32BE", "readUInt32BE"], ["writeUint8", "writeUInt8"],
    ["writeUint16LE", "writeUInt16LE"], ["writeUint16BE", "writeUInt16BE"],
    ["writeUint32LE", "writeUInt32LE"], ["writeUint32BE", "writeUInt32BE"]]) {
    Buffer.prototype[alias] = Buffer.prototype[name];
  }
  Buffer.poolSize = 8192;

  function wrap(bytes) {
    return new Buffer(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  function checkSize(size) {
    if (typeof size !== "number" || size < 0 || !Number.isFinite(size)) {
      throw new RangeError(`The argument 'size' is invalid. Received ${size}`);
    }
    return Math.floor(size);
  }

  globalThis.__celld_node.buffer = { Buffer, encode, decode };
  const kMaxLength = 2 ** 31 - 1;
  const buffer = {
    Buffer,
    kMaxLength,
    constants: { MAX_LENGTH: kMaxLength, MAX_STRING_LENGTH: 2 ** 29 - 24 },
    atob: globalThis.atob,
    btoa: globalThis.btoa,
    isUtf8: (bytes) => {
      try {
        new TextDecoder("utf-8", { fatal: true }).decode(bytes);
        return true;
      } catch {
        return false;
      }
    },
  };
  Object.defineProperty(globalThis, "Buffer", {
    value: Buffer, writable: true, configurable: true, enumerable: false,
  });
  modules["node:buffer"] = Object.freeze(Object.assign(Object.create(null), buffer, {
    default: buffer,
  }));
})();
