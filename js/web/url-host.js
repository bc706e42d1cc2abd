// WHATWG URL pieces that do not depend on the parser's state: percent-encoding
// sets, percent-decoding, and host parsing (domains with punycode, IPv4, IPv6,
// opaque hosts). url.js builds the URL parser on top of them.
"use strict";
(() => {
  const { ArrayFrom, ArrayPrototypeFilter, ArrayPrototypeJoin, ArrayPrototypeMap, ArrayPrototypePush, SafeSet } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const FAILURE = Symbol("failure");

  // -- percent-encoding sets (predicates over a code point) ---------------------------
  const c0Set = (c) => c < 0x20 || c > 0x7e;
  const fragmentSet = (c) => c0Set(c) || c === 0x20 || c === 0x22 || c === 0x3c || c === 0x3e || c === 0x60;
  const querySet = (c) => c0Set(c) || c === 0x20 || c === 0x22 || c === 0x23 || c === 0x3c || c === 0x3e;
  const specialQuerySet = (c) => querySet(c) || c === 0x27;
  const pathSet = (c) => querySet(c) || c === 0x3f || c === 0x60 || c === 0x7b || c === 0x7d;
  const userinfoSet = (c) => pathSet(c) || c === 0x2f || c === 0x3a || c === 0x3b || c === 0x3d
    || c === 0x40 || (c >= 0x5b && c <= 0x5e) || c === 0x7c;
  const componentSet = (c) => userinfoSet(c) || (c >= 0x24 && c <= 0x26) || c === 0x2b || c === 0x2c;
  const formSet = (c) => componentSet(c) || c === 0x21 || (c >= 0x27 && c <= 0x29) || c === 0x7e;

  const HEX = "0123456789ABCDEF";
  function byteEscape(b) {
    return "%" + HEX[b >> 4] + HEX[b & 15];
  }

  /** Percent-encode one code point (a string of one code point) if `set` says so. */
  function encodeCodePoint(ch, set) {
    const cp = ch.codePointAt(0);
    if (!set(cp)) return ch;
    let out = "";
    for (const b of web.utf8Encode(ch)) out += byteEscape(b);
    return out;
  }

  function encodeString(s, set, spaceAsPlus = false) {
    let out = "";
    for (const ch of s) {
      if (spaceAsPlus && ch === " ") out += "+";
      else out += encodeCodePoint(ch, set);
    }
    return out;
  }

  const isHex = (c) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);

  /** Percent-decode a string into bytes (invalid escapes stay as they are). */
  function percentDecode(s) {
    const bytes = web.utf8Encode(s);
    const out = new Uint8Array(bytes.length);
    let o = 0;
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i];
      if (b === 0x25 && i + 2 < bytes.length && isHex(bytes[i + 1]) && isHex(bytes[i + 2])) {
        out[o++] = parseInt(String.fromCharCode(bytes[i + 1], bytes[i + 2]), 16);
        i += 2;
      } else {
        out[o++] = b;
      }
    }
    return out.slice(0, o);
  }

  // -- IPv4 ----------------------------------------------------------------------------
  function parseIPv4Number(s) {
    if (s === "") return FAILURE;
    let radix = 10;
    if (s.length >= 2 && (s.startsWith("0x") || s.startsWith("0X"))) {
      radix = 16;
      s = s.slice(2);
    } else if (s.length >= 2 && s[0] === "0") {
      radix = 8;
      s = s.slice(1);
    }
    if (s === "") return 0;
    const valid = radix === 16 ? /^[0-9a-fA-F]+$/ : radix === 10 ? /^[0-9]+$/ : /^[0-7]+$/;
    if (!valid.test(s)) return FAILURE;
    return parseInt(s, radix);
  }

  function endsInANumber(s) {
    const parts = s.split(".");
    if (parts[parts.length - 1] === "") {
      if (parts.length === 1) return false;
      parts.pop();
    }
    const last = parts[parts.length - 1];
    if (last !== "" && /^[0-9]+$/.test(last)) return true;
    return parseIPv4Number(last) !== FAILURE;
  }

  function parseIPv4(s) {
    const parts = s.split(".");
    if (parts[parts.length - 1] === "" && parts.length > 1) parts.pop();
    if (parts.length > 4) return FAILURE;
    const numbers = [];
    for (const part of parts) {
      const n = parseIPv4Number(part);
      if (n === FAILURE) return FAILURE;
      ArrayPrototypePush(numbers, n);
    }
    for (let i = 0; i < numbers.length - 1; i++) if (numbers[i] > 255) return FAILURE;
    const last = numbers[numbers.length - 1];
    if (last >= 256 ** (5 - numbers.length)) return FAILURE;
    let address = last;
    for (let i = 0; i < numbers.length - 1; i++) address += numbers[i] * 256 ** (3 - i);
    const octets = [];
    for (let i = 3; i >= 0; i--) ArrayPrototypePush(octets, Math.floor(address / 256 ** i) % 256);
    return ArrayPrototypeJoin(octets, ".");
  }

  // -- IPv6 ----------------------------------------------------------------------------
  function parseIPv6(input) {
    const address = [0, 0, 0, 0, 0, 0, 0, 0];
    let piece = 0;
    let compress = null;
    let p = 0;
    const at = (i) => (i < input.length ? input.charCodeAt(i) : -1);
    const hexValue = (c) => parseInt(String.fromCharCode(c), 16);
    const isDigit = (c) => c >= 0x30 && c <= 0x39;
    if (at(p) === 0x3a) {
      if (at(p + 1) !== 0x3a) return FAILURE;
      p += 2;
      piece++;
      compress = piece;
    }
    while (at(p) !== -1) {
      if (piece === 8) return FAILURE;
      if (at(p) === 0x3a) {
        if (compress !== null) return FAILURE;
        p++;
        piece++;
        compress = piece;
        continue;
      }
      let value = 0;
      let length = 0;
      while (length < 4 && isHex(at(p))) {
        value = value * 16 + hexValue(at(p));
        p++;
        length++;
      }
      if (at(p) === 0x2e) {
        if (length === 0) return FAILURE;
        p -= length;
        if (piece > 6) return FAILURE;
        let seen = 0;
        while (at(p) !== -1) {
          let v4 = null;
          if (seen > 0) {
            if (at(p) === 0x2e && seen < 4) p++;
            else return FAILURE;
          }
          if (!isDigit(at(p))) return FAILURE;
          while (isDigit(at(p))) {
            const n = at(p) - 0x30;
            if (v4 === null) v4 = n;
            else if (v4 === 0) return FAILURE;
            else v4 = v4 * 10 + n;
            if (v4 > 255) return FAILURE;
            p++;
          }
          address[piece] = address[piece] * 256 + v4;
          seen++;
          if (seen === 2 || seen === 4) piece++;
        }
        if (seen !== 4) return FAILURE;
        break;
      } else if (at(p) === 0x3a) {
        p++;
        if (at(p) === -1) return FAILURE;
      } else if (at(p) !== -1) {
        return FAILURE;
      }
      address[piece] = value;
      piece++;
    }
    if (compress !== null) {
      let swaps = piece - compress;
      piece = 7;
      while (piece !== 0 && swaps > 0) {
        const tmp = address[piece];
        address[piece] = address[compress + swaps - 1];
        address[compress + swaps - 1] = tmp;
        piece--;
        swaps--;
      }
    } else if (piece !== 8) {
      return FAILURE;
    }
    return address;
  }

  function serializeIPv6(address) {
    // Compress the first longest run of two or more zero pieces.
    let best = -1;
    let bestLength = 1;
    for (let i = 0; i < 8; ) {
      if (address[i] !== 0) {
        i++;
        continue;
      }
      let j = i;
      while (j < 8 && address[j] === 0) j++;
      if (j - i > bestLength) {
        best = i;
        bestLength = j - i;
      }
      i = j;
    }
    let out = "";
    for (let i = 0; i < 8; i++) {
      if (i === best) {
        out += i === 0 ? "::" : ":";
        i += bestLength - 1;
        continue;
      }
      out += address[i].toString(16);
      if (i < 7) out += ":";
    }
    return out;
  }

  // -- domains (IDNA, simplified) ---------------------------------------------------------
  /** RFC 3492 punycode encoding of one label. */
  function punycode(label) {
    const base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700;
    const input = ArrayFrom(label, (ch) => ch.codePointAt(0));
    let n = 128;
    let delta = 0;
    let bias = 72;
    let out = ArrayPrototypeJoin(ArrayPrototypeMap(ArrayPrototypeFilter(input, (c) => c < 0x80), (c) => String.fromCharCode(c)), "");
    const basic = out.length;
    let handled = basic;
    if (basic > 0) out += "-";
    const digit = (d) => String.fromCharCode(d < 26 ? d + 97 : d + 22);
    const adapt = (d, count, first) => {
      d = first ? Math.floor(d / damp) : d >> 1;
      d += Math.floor(d / count);
      let k = 0;
      while (d > ((base - tMin) * tMax) >> 1) {
        d = Math.floor(d / (base - tMin));
        k += base;
      }
      return k + Math.floor(((base - tMin + 1) * d) / (d + skew));
    };
    while (handled < input.length) {
      const m = Math.min(...ArrayPrototypeFilter(input, (c) => c >= n));
      delta += (m - n) * (handled + 1);
      n = m;
      for (const c of input) {
        if (c < n) delta++;
        if (c === n) {
          let q = delta;
          for (let k = base; ; k += base) {
            const t = k <= bias ? tMin : k >= bias + tMax ? tMax : k - bias;
            if (q < t) break;
            out += digit(t + ((q - t) % (base - t)));
            q = Math.floor((q - t) / (base - t));
          }
          out += digit(q);
          bias = adapt(delta, handled + 1, handled === basic);
          delta = 0;
          handled++;
        }
      }
      delta++;
      n++;
    }
    return out;
  }

  /**
   * Domain to ASCII. Full UTS #46 mapping is out of scope: celld lower-cases,
   * applies NFKC (which covers full-width forms), maps ideographic full stops and
   * punycode-encodes non-ASCII labels.
   */
  function domainToASCII(domain) {
    let s = domain;
    if (/[^\x00-\x7f]/.test(s)) {
      s = s.replace(/[\u3002\uff0e\uff61]/g, ".").normalize("NFKC");
    }
    s = s.toLowerCase();
    const labels = ArrayPrototypeMap(s.split("."), (label) => (/[^\x00-\x7f]/.test(label) ? "xn--" + punycode(label) : label));
    const result = ArrayPrototypeJoin(labels, ".");
    if (result === "") return FAILURE;
    return result;
  }

  const FORBIDDEN_HOST = new SafeSet([0x00, 0x09, 0x0a, 0x0d, 0x20, 0x23, 0x2f, 0x3a, 0x3c, 0x3e, 0x3f, 0x40,
    0x5b, 0x5c, 0x5d, 0x5e, 0x7c]);
  const forbiddenHost = (c) => FORBIDDEN_HOST.has(c);
  const forbiddenDomain = (c) => forbiddenHost(c) || c <= 0x1f || c === 0x25 || c === 0x7f;

  /** Parse a host; returns its serialization (IPv6 in brackets) or FAILURE. */
  function parseHost(input, isOpaque) {
    if (input.startsWith("[")) {
      if (!input.endsWith("]")) return FAILURE;
      const address = parseIPv6(input.slice(1, -1));
      return address === FAILURE ? FAILURE : `[${serializeIPv6(address)}]`;
    }
    if (isOpaque) {
      for (let i = 0; i < input.length; i++) if (forbiddenHost(input.charCodeAt(i))) return FAILURE;
      return encodeString(input, c0Set);
    }
    const domain = web.utf8Decode(percentDecode(input));
    const ascii = domainToASCII(domain);
    if (ascii === FAILURE) return FAILURE;
    for (let i = 0; i < ascii.length; i++) if (forbiddenDomain(ascii.charCodeAt(i))) return FAILURE;
    if (endsInANumber(ascii)) return parseIPv4(ascii);
    return ascii;
  }

  web.url = {
    FAILURE,
    sets: { c0Set, fragmentSet, querySet, specialQuerySet, pathSet, userinfoSet, componentSet, formSet },
    encodeCodePoint,
    encodeString,
    percentDecode,
    parseHost,
    punycode,
  };
})();
