// crypto: getRandomValues, randomUUID, and crypto.subtle with CryptoKey.
//
// Every crypto.subtle method is asynchronous, so each call is one `subtle` request to the
// host, which does the work with Python's `cryptography` (celld/isolate/webcrypto). This
// file only converts: BufferSources to base64, CryptoKeys to the key record they hold,
// answers back to ArrayBuffers and CryptoKeys, and host errors to the DOMExceptions
// workerd throws. A CryptoKey's record (algorithm, usages, and its material: raw bytes,
// PKCS #8 or SPKI DER) stays in a slot user code cannot reach; the host keeps nothing
// between calls (celld/isolate/DECISIONS.md, "Web Crypto keys").
//
// Randomness: js/web/random.js.
"use strict";
(() => {
  const {
    ArrayFrom, ArrayIsArray, ArrayPrototypeMap, ArrayPrototypePush, ObjectKeys, SafeWeakMap, SafeSet,
  } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;
  const randomBytes = web.randomBytes;

  const MAX_BYTES = 65536;
  const ILLEGAL = Symbol("illegal");

  const INTEGER_ARRAYS = [
    Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
    BigInt64Array, BigUint64Array,
  ];

  function getRandomValues(array) {
    if (!ArrayBuffer.isView(array) || !INTEGER_ARRAYS.some((T) => array instanceof T)) {
      throw new DOMException(
        "The data argument must be an integer-type TypedArray", "TypeMismatchError");
    }
    if (array.byteLength > MAX_BYTES) {
      throw new DOMException(
        `The ArrayBufferView's byte length (${array.byteLength}) exceeds the number of bytes of entropy available via this API (${MAX_BYTES})`,
        "QuotaExceededError");
    }
    new Uint8Array(array.buffer, array.byteOffset, array.byteLength).set(randomBytes(array.byteLength));
    return array;
  }

  const HEX = ArrayFrom({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

  function randomUUID() {
    const b = randomBytes(16);
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let s = "";
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) s += "-";
      s += HEX[b[i]];
    }
    return s;
  }

  // -- CryptoKey ------------------------------------------------------------------------

  const slots = new SafeWeakMap(); // CryptoKey -> {record, algorithm, usages}

  class CryptoKey {
    constructor(key) {
      if (key !== ILLEGAL) throw new TypeError("Illegal constructor");
    }
    get type() { return slotOf(this).record.type; }
    get extractable() { return slotOf(this).record.extractable; }
    get algorithm() { return slotOf(this).algorithm; }
    get usages() { return slotOf(this).usages; }
  }

  function slotOf(key) {
    const slot = slots.get(key);
    if (!slot) throw new TypeError("Illegal invocation: not a CryptoKey");
    return slot;
  }

  /** A CryptoKey around the record the host made. `algorithm` and `usages` are made once,
   * so they are the same objects on every read (as Web Crypto's cached attributes are). */
  function makeKey(record) {
    const key = new CryptoKey(ILLEGAL);
    slots.set(key, { record, algorithm: fromWire(record.algorithm), usages: [...record.usages] });
    return key;
  }

  // -- the bridge -----------------------------------------------------------------------

  /** An argument as JSON the host reads: BufferSources as {$b}, CryptoKeys as {$k}. */
  function toWire(value, depth) {
    if (value === null || value === undefined) return null;
    const type = typeof value;
    if (type === "string" || type === "boolean" || type === "number") return value;
    if (type === "bigint") throw new TypeError("crypto.subtle: a BigInt is not a valid argument");
    if (type !== "object") return null;
    const slot = slots.get(value);
    if (slot) return { $k: slot.record };
    const view = web.bufferSourceView(value);
    if (view) return { $b: web.bytesToBase64(view) };
    if (depth > 8) throw new TypeError("crypto.subtle: an argument is nested too deeply");
    if (ArrayIsArray(value)) return ArrayPrototypeMap(value, (item) => toWire(item, depth + 1));
    const out = {};
    for (const name in value) out[name] = toWire(value[name], depth + 1);
    return out;
  }

  function toArrayBuffer(bytes) {
    return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
      ? bytes.buffer : bytes.slice().buffer;
  }

  /** An answer as JS values: {$b} an ArrayBuffer, {$u8} a Uint8Array, {$k} a CryptoKey. */
  function fromWire(value) {
    if (value === null || typeof value !== "object") return value;
    if (ArrayIsArray(value)) return ArrayPrototypeMap(value, fromWire);
    if (typeof value.$b === "string") return toArrayBuffer(web.base64ToBytes(value.$b));
    if (typeof value.$u8 === "string") return web.base64ToBytes(value.$u8);
    if (value.$k) return makeKey(value.$k);
    const out = {};
    const names = ObjectKeys(value);
    for (let i = 0; i < names.length; i++) out[names[i]] = fromWire(value[names[i]]);
    return out;
  }

  const DOM_NAMES = new SafeSet([
    "NotSupportedError", "DataError", "OperationError", "InvalidAccessError", "SyntaxError",
    "InvalidStateError", "QuotaExceededError",
  ]);

  /** The error workerd throws for what the host reported. */
  function domError(error) {
    if (error && DOM_NAMES.has(error.name)) {
      const dom = new DOMException(error.message, error.name);
      if (typeof error.stack === "string") {
        Object.defineProperty(dom, "stack", { value: error.stack, configurable: true, writable: true });
      }
      return dom;
    }
    return error;
  }

  async function call(method, args, count) {
    if (args.length < count) {
      throw new TypeError(
        `Failed to execute '${method}' on 'SubtleCrypto': ${count} arguments required, but only ${args.length} present.`);
    }
    const wire = [];
    for (let i = 0; i < count; i++) ArrayPrototypePush(wire, toWire(args[i], 0));
    let answer;
    try {
      answer = await host.request("subtle", { method, args: wire });
    } catch (error) {
      throw domError(error);
    }
    return fromWire(answer);
  }

  // -- SubtleCrypto ---------------------------------------------------------------------

  class SubtleCrypto {
    constructor(key) {
      if (key !== ILLEGAL) throw new TypeError("Illegal constructor");
    }
    digest(...args) { return call("digest", args, 2); }
    generateKey(...args) { return call("generateKey", args, 3); }
    importKey(...args) { return call("importKey", args, 5); }
    exportKey(...args) { return call("exportKey", args, 2); }
    sign(...args) { return call("sign", args, 3); }
    verify(...args) { return call("verify", args, 4); }
    encrypt(...args) { return call("encrypt", args, 3); }
    decrypt(...args) { return call("decrypt", args, 3); }
    deriveBits(algorithm, baseKey, length = null) {
      return call("deriveBits", [algorithm, baseKey, length], 3);
    }
    deriveKey(...args) { return call("deriveKey", args, 5); }
    wrapKey(...args) { return call("wrapKey", args, 4); }
    unwrapKey(...args) { return call("unwrapKey", args, 7); }

    /** Workers extension: compare two buffers in time independent of their contents. */
    timingSafeEqual(a, b) {
      const x = web.bufferSourceView(a);
      const y = web.bufferSourceView(b);
      if (!x || !y) throw new TypeError("timingSafeEqual: arguments must be ArrayBuffers or views");
      if (x.byteLength !== y.byteLength) throw new RangeError("timingSafeEqual: input buffers must have the same byte length");
      let diff = 0;
      for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
      return diff === 0;
    }
  }

  const subtle = new SubtleCrypto(ILLEGAL);

  class Crypto {
    constructor(key) {
      if (key !== ILLEGAL) throw new TypeError("Illegal constructor");
    }

    get subtle() {
      return subtle;
    }

    getRandomValues(array) {
      return getRandomValues(array);
    }

    randomUUID() {
      return randomUUID();
    }
  }

  for (const Class of [SubtleCrypto, CryptoKey, Crypto]) {
    web.hideMethods(Class);
    web.setToStringTag(Class, Class.name);
    web.defineGlobal(Class.name, Class);
  }
  /** The record of a CryptoKey (node:crypto's KeyObject.from), or undefined. */
  web.cryptoKeyRecord = (key) => {
    const slot = slots.get(key);
    return slot ? slot.record : undefined;
  };
  web.makeCryptoKey = makeKey;
  web.defineGlobal("crypto", new Crypto(ILLEGAL));
})();
