// TextEncoder and TextDecoder (utf-8, utf-16le, latin1/windows-1252 labels).
"use strict";
(() => {
  const { ArrayPrototypePush, SafeMap } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;

  class TextEncoder {
    get encoding() {
      return "utf-8";
    }

    encode(input = "") {
      return web.utf8Encode(input);
    }

    encodeInto(source, destination) {
      if (!(destination instanceof Uint8Array)) {
        throw new TypeError("TextEncoder.encodeInto: destination must be a Uint8Array");
      }
      const s = String(source);
      let read = 0;
      let written = 0;
      // Encode code point by code point so a character never straddles the end.
      for (let i = 0; i < s.length; ) {
        const cp = s.codePointAt(i);
        const units = cp > 0xffff ? 2 : 1;
        const bytes = web.utf8Encode(s.slice(i, i + units));
        if (written + bytes.length > destination.length) break;
        destination.set(bytes, written);
        written += bytes.length;
        read += units;
        i += units;
      }
      return { read, written };
    }
  }

  const LABELS = new SafeMap([
    ["utf-8", "utf-8"], ["utf8", "utf-8"], ["unicode-1-1-utf-8", "utf-8"],
    ["unicode11utf8", "utf-8"], ["unicode20utf8", "utf-8"], ["x-unicode20utf8", "utf-8"],
    ["utf-16le", "utf-16le"], ["utf-16", "utf-16le"], ["ucs-2", "utf-16le"],
    ["unicode", "utf-16le"], ["csunicode", "utf-16le"], ["iso-10646-ucs-2", "utf-16le"],
    ["unicodefeff", "utf-16le"],
    ["latin1", "windows-1252"], ["iso-8859-1", "windows-1252"], ["ascii", "windows-1252"],
    ["us-ascii", "windows-1252"], ["windows-1252", "windows-1252"], ["cp1252", "windows-1252"],
    ["iso8859-1", "windows-1252"], ["l1", "windows-1252"], ["x-cp1252", "windows-1252"],
  ]);

  // windows-1252 differs from latin1 in 0x80..0x9f.
  const CP1252_HIGH = [
    0x20ac, 0x81, 0x201a, 0x192, 0x201e, 0x2026, 0x2020, 0x2021, 0x2c6, 0x2030, 0x160, 0x2039,
    0x152, 0x8d, 0x17d, 0x8f, 0x90, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014,
    0x2dc, 0x2122, 0x161, 0x203a, 0x153, 0x9d, 0x17e, 0x178,
  ];

  const state = new WeakMap();

  class TextDecoder {
    constructor(label = "utf-8", options = {}) {
      const encoding = LABELS.get(String(label).trim().toLowerCase());
      if (!encoding) throw new RangeError(`TextDecoder: the encoding label "${label}" is not supported`);
      const fatal = Boolean(options && options.fatal);
      const ignoreBOM = Boolean(options && options.ignoreBOM);
      state.set(this, {
        encoding, fatal, ignoreBOM, utf8: new web.Utf8Decoder(fatal), bomSeen: false, pending: null,
      });
    }

    get encoding() {
      return state.get(this).encoding;
    }

    get fatal() {
      return state.get(this).fatal;
    }

    get ignoreBOM() {
      return state.get(this).ignoreBOM;
    }

    decode(input, options = {}) {
      const s = state.get(this);
      if (!s) throw new TypeError("Illegal invocation");
      const stream = Boolean(options && options.stream);
      let bytes = new Uint8Array(0);
      if (input !== undefined && input !== null) {
        bytes = web.bufferSourceView(input);
        if (!bytes) throw new TypeError("TextDecoder.decode: input must be an ArrayBuffer or a view");
      }
      let text;
      if (s.encoding === "utf-8") {
        text = s.utf8.decode(bytes, stream);
      } else if (s.encoding === "utf-16le") {
        text = this._utf16(s, bytes, stream);
      } else {
        const codes = new Uint16Array(bytes.length);
        for (let i = 0; i < bytes.length; i++) {
          const b = bytes[i];
          codes[i] = b >= 0x80 && b <= 0x9f ? CP1252_HIGH[b - 0x80] : b;
        }
        text = web.codesToString(codes);
      }
      // The BOM is dropped once, at the start of the stream, unless ignoreBOM.
      if (!s.ignoreBOM && !s.bomSeen && text.length > 0) {
        s.bomSeen = true;
        if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      }
      if (!stream) s.bomSeen = false;
      return text;
    }

    _utf16(s, input, stream) {
      let bytes = input;
      if (s.pending) {
        bytes = new Uint8Array(s.pending.length + input.length);
        bytes.set(s.pending);
        bytes.set(input, s.pending.length);
        s.pending = null;
      }
      const even = bytes.length & ~1;
      const codes = [];
      for (let i = 0; i < even; i += 2) ArrayPrototypePush(codes, bytes[i] | (bytes[i + 1] << 8));
      // Keep a trailing odd byte or high surrogate for the next chunk when streaming.
      let keep = even < bytes.length ? bytes.slice(even) : null;
      const last = codes[codes.length - 1];
      if (stream && last >= 0xd800 && last <= 0xdbff) {
        codes.pop();
        const tail = bytes.slice(even - 2);
        keep = tail;
      }
      if (stream) s.pending = keep;
      let out = "";
      for (let i = 0; i < codes.length; i++) {
        const c = codes[i];
        if (c >= 0xd800 && c <= 0xdbff && i + 1 < codes.length && codes[i + 1] >= 0xdc00 && codes[i + 1] <= 0xdfff) {
          out += String.fromCharCode(c, codes[++i]);
        } else if (c >= 0xd800 && c <= 0xdfff) {
          if (s.fatal) throw new TypeError("The encoded data was not valid for encoding utf-16le");
          out += "\ufffd";
        } else {
          out += String.fromCharCode(c);
        }
      }
      if (!stream && keep) {
        if (s.fatal) throw new TypeError("The encoded data was not valid for encoding utf-16le");
        out += "\ufffd";
      }
      return out;
    }
  }

  web.hideMethods(TextEncoder);
  web.hideMethods(TextDecoder);
  web.setToStringTag(TextEncoder, "TextEncoder");
  web.setToStringTag(TextDecoder, "TextDecoder");
  Object.defineProperty(TextDecoder.prototype, "_utf16", { enumerable: false });
  web.defineGlobal("TextEncoder", TextEncoder);
  web.defineGlobal("TextDecoder", TextDecoder);
})();
