// node:string_decoder: StringDecoder, which decodes bytes written in pieces without splitting
// a character (UTF-8, UTF-16LE) or a base64 group across two pieces, as Node's does.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const { Buffer, decode } = globalThis.__celld_node.buffer;

  const ENCODINGS = {
    utf8: "utf8", "utf-8": "utf8", utf16le: "utf16le", "utf-16le": "utf16le", ucs2: "utf16le",
    "ucs-2": "utf16le", base64: "base64", base64url: "base64url", hex: "hex", latin1: "latin1",
    binary: "latin1", ascii: "ascii",
  };

  function normalize(encoding) {
    const name = ENCODINGS[String(encoding ?? "utf8").toLowerCase()];
    if (name === undefined) {
      const error = new TypeError(`Unknown encoding: ${encoding}`);
      error.code = "ERR_UNKNOWN_ENCODING";
      throw error;
    }
    return name;
  }

  function bytesOf(chunk) {
    if (typeof chunk === "string") return Buffer.from(chunk);
    if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const error = new TypeError('The "buf" argument must be an instance of Buffer, TypedArray, or DataView.');
    error.code = "ERR_INVALID_ARG_TYPE";
    throw error;
  }

  /** How many bytes at the end of `bytes` start a UTF-8 character not yet complete. */
  function utf8Tail(bytes) {
    const n = bytes.length;
    for (let back = 1; back <= Math.min(3, n); back++) {
      const byte = bytes[n - back];
      if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
      const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
      return need > back ? back : 0;
    }
    return 0;
  }

  class StringDecoder {
    #pending = new Uint8Array(0);
    constructor(encoding) {
      this.encoding = normalize(encoding);
      this.utf8 = new TextDecoder("utf-8");
    }

    #take(bytes) {
      const all = new Uint8Array(this.#pending.length + bytes.length);
      all.set(this.#pending);
      all.set(bytes, this.#pending.length);
      let keep = 0;
      switch (this.encoding) {
        case "utf8": keep = utf8Tail(all); break;
        case "utf16le": {
          keep = all.length % 2;
          const end = all.length - keep;
          // A high surrogate at the end waits for its low half.
          if (end >= 2) {
            const unit = all[end - 2] | (all[end - 1] << 8);
            if (unit >= 0xd800 && unit <= 0xdbff) keep += 2;
          }
          break;
        }
        case "base64":
        case "base64url": keep = all.length % 3; break;
      }
      this.#pending = all.slice(all.length - keep);
      return all.subarray(0, all.length - keep);
    }

    write(chunk) {
      const ready = this.#take(bytesOf(chunk));
      if (this.encoding === "utf8") return this.utf8.decode(ready);
      return decode(Buffer.from(ready.buffer, ready.byteOffset, ready.byteLength), this.encoding);
    }

    end(chunk) {
      let out = chunk === undefined ? "" : this.write(chunk);
      const rest = this.#pending;
      this.#pending = new Uint8Array(0);
      if (rest.length === 0) return out;
      if (this.encoding === "utf8") return out + "\ufffd";
      if (this.encoding === "utf16le") return out + decode(Buffer.from(rest.subarray(0, rest.length - (rest.length % 2))), "utf16le");
      return out + decode(Buffer.from(rest), this.encoding);
    }

    /** Node's legacy name for what write() returns for the bytes it holds back. */
    text(buffer, offset) {
      return this.write(bytesOf(buffer).subarray(offset));
    }

    get lastNeed() {
      if (this.encoding !== "utf8" || this.#pending.length === 0) return 0;
      const first = this.#pending[0];
      const need = first >= 0xf0 ? 4 : first >= 0xe0 ? 3 : 2;
      return need - this.#pending.length;
    }

    get lastTotal() {
      return this.#pending.length + this.lastNeed;
    }
  }

  const stringDecoder = { StringDecoder };
  modules["node:string_decoder"] = Object.freeze(Object.assign(Object.create(null), stringDecoder, {
    default: stringDecoder,
  }));
})();
