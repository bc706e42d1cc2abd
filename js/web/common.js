// Shared helpers for the web platform files: the `__celld_web` internals object,
// global definitions, base64 and UTF-8 over Uint8Array.
//
// Every web file adds what later files (and the host glue) need to `__celld_web`;
// web/final.js freezes it, so user code can read but never replace the helpers.
"use strict";
(() => {
  const { ObjectAssign } = globalThis.__celld_primordials;
  const web = {};
  Object.defineProperty(globalThis, "__celld_web", {
    value: web, configurable: false, enumerable: false, writable: false,
  });

  /** Define a global the way browsers do: writable, configurable, not enumerable. */
  function defineGlobal(name, value) {
    Object.defineProperty(globalThis, name, {
      value, configurable: true, enumerable: false, writable: true,
    });
  }

  /** A global that exists but throws a clear error when touched (APIs celld lacks). */
  function defineMissingGlobal(name, what = name) {
    Object.defineProperty(globalThis, name, {
      configurable: true,
      enumerable: false,
      get() {
        throw new TypeError(`celld does not provide ${what} yet`);
      },
      set(value) {
        // Let user code install its own polyfill.
        Object.defineProperty(globalThis, name, {
          value, configurable: true, enumerable: false, writable: true,
        });
      },
    });
  }

  /** Make the listed prototype methods non-enumerable, as WebIDL classes have them. */
  function hideMethods(Class) {
    for (const key of Reflect.ownKeys(Class.prototype)) {
      const desc = Object.getOwnPropertyDescriptor(Class.prototype, key);
      if (desc.enumerable && desc.configurable) {
        desc.enumerable = false;
        Object.defineProperty(Class.prototype, key, desc);
      }
    }
  }

  function setToStringTag(Class, tag) {
    Object.defineProperty(Class.prototype, Symbol.toStringTag, {
      value: tag, configurable: true, enumerable: false, writable: false,
    });
  }

  // -- base64 -----------------------------------------------------------------------

  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const B64_INDEX = new Int16Array(128).fill(-1);
  for (let i = 0; i < 64; i++) B64_INDEX[B64.charCodeAt(i)] = i;
  B64_INDEX["-".charCodeAt(0)] = 62; // accept base64url too
  B64_INDEX["_".charCodeAt(0)] = 63;

  /** Build a string from char codes without blowing the argument limit. */
  function codesToString(codes, length = codes.length) {
    let out = "";
    for (let i = 0; i < length; i += 8192) {
      out += String.fromCharCode.apply(null, codes.subarray
        ? codes.subarray(i, Math.min(length, i + 8192))
        : codes.slice(i, Math.min(length, i + 8192)));
    }
    return out;
  }

  // QuickJS's own base64 (Uint8Array.fromBase64 / toBase64) is two orders of magnitude
  // faster than a loop in JS; bodies cross the bridge as base64, so it matters.
  const nativeFromBase64 = typeof Uint8Array.fromBase64 === "function" ? Uint8Array.fromBase64 : null;
  const nativeToBase64 = typeof Uint8Array.prototype.toBase64 === "function"
    ? Uint8Array.prototype.toBase64 : null;
  const { ReflectApply } = globalThis.__celld_primordials;

  function bytesToBase64(bytes) {
    if (nativeToBase64 !== null && bytes instanceof Uint8Array) {
      return ReflectApply(nativeToBase64, bytes, []);
    }
    const n = bytes.length;
    const out = new Uint8Array(Math.ceil(n / 3) * 4);
    let o = 0;
    let i = 0;
    for (; i + 2 < n; i += 3) {
      const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
      out[o++] = B64.charCodeAt(v >> 18);
      out[o++] = B64.charCodeAt((v >> 12) & 63);
      out[o++] = B64.charCodeAt((v >> 6) & 63);
      out[o++] = B64.charCodeAt(v & 63);
    }
    if (i < n) {
      const v = (bytes[i] << 16) | ((i + 1 < n ? bytes[i + 1] : 0) << 8);
      out[o++] = B64.charCodeAt(v >> 18);
      out[o++] = B64.charCodeAt((v >> 12) & 63);
      out[o++] = i + 1 < n ? B64.charCodeAt((v >> 6) & 63) : 61;
      out[o++] = 61;
    }
    return codesToString(out);
  }

  /** Decode base64 (standard or url alphabet, padding optional, whitespace ignored). */
  function base64ToBytes(text) {
    const s = String(text);
    if (nativeFromBase64 !== null) {
      try {
        return ReflectApply(nativeFromBase64, Uint8Array, [s]);
      } catch (error) {
        // Not standard base64 (the url alphabet, stray padding): the lenient loop below.
      }
    }
    const out = new Uint8Array(Math.floor((s.length * 3) / 4) + 3);
    let bits = 0;
    let count = 0;
    let o = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c === 61) break; // '=' ends the data
      if (c === 32 || c === 9 || c === 10 || c === 12 || c === 13) continue;
      const v = c < 128 ? B64_INDEX[c] : -1;
      if (v < 0) throw new TypeError("celld: invalid base64 data");
      bits = (bits << 6) | v;
      count += 6;
      if (count >= 8) {
        count -= 8;
        out[o++] = (bits >> count) & 255;
      }
    }
    return out.slice(0, o);
  }

  // -- UTF-8 ------------------------------------------------------------------------

  /** Encode a string as UTF-8; lone surrogates become U+FFFD (as TextEncoder does). */
  function utf8Encode(input) {
    const s = String(input);
    const out = new Uint8Array(s.length * 3);
    let o = 0;
    for (let i = 0; i < s.length; i++) {
      let c = s.charCodeAt(i);
      if (c < 0x80) {
        out[o++] = c;
        continue;
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
          i++;
        } else {
          c = 0xfffd;
        }
      }
      if (c < 0x800) {
        out[o++] = 0xc0 | (c >> 6);
        out[o++] = 0x80 | (c & 63);
      } else if (c < 0x10000) {
        out[o++] = 0xe0 | (c >> 12);
        out[o++] = 0x80 | ((c >> 6) & 63);
        out[o++] = 0x80 | (c & 63);
      } else {
        out[o++] = 0xf0 | (c >> 18);
        out[o++] = 0x80 | ((c >> 12) & 63);
        out[o++] = 0x80 | ((c >> 6) & 63);
        out[o++] = 0x80 | (c & 63);
      }
    }
    return out.slice(0, o);
  }

  /**
   * The WHATWG UTF-8 decoder as a resumable state machine. `decode(bytes, stream)`
   * returns the text for the bytes so far; an incomplete sequence is kept for the
   * next call when streaming, and is an error (U+FFFD or throw) at the end.
   */
  class Utf8Decoder {
    constructor(fatal) {
      this.fatal = fatal;
      this.codePoint = 0;
      this.needed = 0;
      this.seen = 0;
      this.lower = 0x80;
      this.upper = 0xbf;
    }

    fail() {
      if (this.fatal) throw new TypeError("The encoded data was not valid for encoding utf-8");
      return 0xfffd;
    }

    decode(bytes, stream) {
      const units = new Uint16Array(bytes.length * 2 + 2);
      let u = 0;
      const push = (cp) => {
        if (cp >= 0x10000) {
          cp -= 0x10000;
          units[u++] = 0xd800 + (cp >> 10);
          units[u++] = 0xdc00 + (cp & 0x3ff);
        } else {
          units[u++] = cp;
        }
      };
      for (let i = 0; i < bytes.length; i++) {
        const b = bytes[i];
        if (this.needed === 0) {
          if (b < 0x80) units[u++] = b;
          else if (b >= 0xc2 && b <= 0xdf) {
            this.needed = 1;
            this.codePoint = b & 0x1f;
          } else if (b >= 0xe0 && b <= 0xef) {
            if (b === 0xe0) this.lower = 0xa0;
            if (b === 0xed) this.upper = 0x9f;
            this.needed = 2;
            this.codePoint = b & 0xf;
          } else if (b >= 0xf0 && b <= 0xf4) {
            if (b === 0xf0) this.lower = 0x90;
            if (b === 0xf4) this.upper = 0x8f;
            this.needed = 3;
            this.codePoint = b & 0x7;
          } else {
            push(this.fail());
          }
          continue;
        }
        if (b < this.lower || b > this.upper) {
          // The byte is not part of the sequence: report it, then reprocess the byte.
          this.reset();
          push(this.fail());
          i--;
          continue;
        }
        this.lower = 0x80;
        this.upper = 0xbf;
        this.codePoint = (this.codePoint << 6) | (b & 0x3f);
        this.seen++;
        if (this.seen === this.needed) {
          push(this.codePoint);
          this.reset();
        }
      }
      if (!stream && this.needed !== 0) {
        this.reset();
        push(this.fail());
      }
      return codesToString(units, u);
    }

    reset() {
      this.codePoint = 0;
      this.needed = 0;
      this.seen = 0;
      this.lower = 0x80;
      this.upper = 0xbf;
    }
  }

  function utf8Decode(bytes) {
    return new Utf8Decoder(false).decode(bytes, false);
  }

  /** A copy of the bytes of any BufferSource, or null if `value` is not one. */
  function bufferSourceBytes(value) {
    if (value instanceof ArrayBuffer || value instanceof SharedArrayBuffer) {
      return new Uint8Array(value.slice(0));
    }
    if (ArrayBuffer.isView(value)) {
      return new Uint8Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
    }
    return null;
  }

  /** A view (no copy) over any BufferSource, or null. */
  function bufferSourceView(value) {
    if (value instanceof ArrayBuffer || value instanceof SharedArrayBuffer) return new Uint8Array(value);
    if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    return null;
  }

  ObjectAssign(web, {
    defineGlobal,
    defineMissingGlobal,
    hideMethods,
    setToStringTag,
    codesToString,
    bytesToBase64,
    base64ToBytes,
    utf8Encode,
    utf8Decode,
    Utf8Decoder,
    bufferSourceBytes,
    bufferSourceView,
  });

  defineGlobal("self", globalThis);
})();
