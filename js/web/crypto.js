// crypto: getRandomValues, randomUUID, subtle.digest and HMAC keys (importKey, generateKey,
// exportKey, sign, verify).
//
// getRandomValues must be synchronous, but JS cannot call the host synchronously.
// So randomness comes from a ChaCha20 DRBG in JS (RFC 8439 block function) keyed by
// OS entropy the host supplies:
//   * first key: the host evaluates webops.entropy_script() in each isolate, before
//     the runtime or right after it, and in any case before user code;
//   * at load, and again after every RESEED_BYTES of output or RESEED_CALLS calls,
//     JS sends an `entropy` request; the host answers with 32 fresh bytes (base64)
//     that are XORed into the key;
//   * every call rekeys from its own output first ("fast key erasure"), so a later
//     compromise of the state does not reveal earlier outputs.
"use strict";
(() => {
  const { ArrayFrom, PromisePrototypeThen } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;

  const RESEED_BYTES = 1 << 20;
  const RESEED_CALLS = 4096;
  const MAX_BYTES = 65536;

  const key = new Uint32Array(8);
  let keyed = false;
  let sinceSeedBytes = 0;
  let sinceSeedCalls = 0;
  let reseeding = false;

  /** One ChaCha20 block (key words, 32-bit counter, zero nonce), little-endian into out. */
  function chachaBlock(key, counter, out, offset) {
    const j0 = 0x61707865, j1 = 0x3320646e, j2 = 0x79622d32, j3 = 0x6b206574;
    const j4 = key[0], j5 = key[1], j6 = key[2], j7 = key[3];
    const j8 = key[4], j9 = key[5], j10 = key[6], j11 = key[7];
    const j12 = counter, j13 = 0, j14 = 0, j15 = 0;
    let x0 = j0, x1 = j1, x2 = j2, x3 = j3, x4 = j4, x5 = j5, x6 = j6, x7 = j7;
    let x8 = j8, x9 = j9, x10 = j10, x11 = j11, x12 = j12, x13 = j13, x14 = j14, x15 = j15;
    let t; // rotations are inlined: a function call per rotation halves the speed
    for (let i = 0; i < 10; i++) {
      // Column rounds.
      x0 = (x0 + x4) | 0; t = x12 ^ x0; x12 = (t << 16) | (t >>> 16); x8 = (x8 + x12) | 0; t = x4 ^ x8; x4 = (t << 12) | (t >>> 20);
      x0 = (x0 + x4) | 0; t = x12 ^ x0; x12 = (t << 8) | (t >>> 24); x8 = (x8 + x12) | 0; t = x4 ^ x8; x4 = (t << 7) | (t >>> 25);
      x1 = (x1 + x5) | 0; t = x13 ^ x1; x13 = (t << 16) | (t >>> 16); x9 = (x9 + x13) | 0; t = x5 ^ x9; x5 = (t << 12) | (t >>> 20);
      x1 = (x1 + x5) | 0; t = x13 ^ x1; x13 = (t << 8) | (t >>> 24); x9 = (x9 + x13) | 0; t = x5 ^ x9; x5 = (t << 7) | (t >>> 25);
      x2 = (x2 + x6) | 0; t = x14 ^ x2; x14 = (t << 16) | (t >>> 16); x10 = (x10 + x14) | 0; t = x6 ^ x10; x6 = (t << 12) | (t >>> 20);
      x2 = (x2 + x6) | 0; t = x14 ^ x2; x14 = (t << 8) | (t >>> 24); x10 = (x10 + x14) | 0; t = x6 ^ x10; x6 = (t << 7) | (t >>> 25);
      x3 = (x3 + x7) | 0; t = x15 ^ x3; x15 = (t << 16) | (t >>> 16); x11 = (x11 + x15) | 0; t = x7 ^ x11; x7 = (t << 12) | (t >>> 20);
      x3 = (x3 + x7) | 0; t = x15 ^ x3; x15 = (t << 8) | (t >>> 24); x11 = (x11 + x15) | 0; t = x7 ^ x11; x7 = (t << 7) | (t >>> 25);
      // Diagonal rounds.
      x0 = (x0 + x5) | 0; t = x15 ^ x0; x15 = (t << 16) | (t >>> 16); x10 = (x10 + x15) | 0; t = x5 ^ x10; x5 = (t << 12) | (t >>> 20);
      x0 = (x0 + x5) | 0; t = x15 ^ x0; x15 = (t << 8) | (t >>> 24); x10 = (x10 + x15) | 0; t = x5 ^ x10; x5 = (t << 7) | (t >>> 25);
      x1 = (x1 + x6) | 0; t = x12 ^ x1; x12 = (t << 16) | (t >>> 16); x11 = (x11 + x12) | 0; t = x6 ^ x11; x6 = (t << 12) | (t >>> 20);
      x1 = (x1 + x6) | 0; t = x12 ^ x1; x12 = (t << 8) | (t >>> 24); x11 = (x11 + x12) | 0; t = x6 ^ x11; x6 = (t << 7) | (t >>> 25);
      x2 = (x2 + x7) | 0; t = x13 ^ x2; x13 = (t << 16) | (t >>> 16); x8 = (x8 + x13) | 0; t = x7 ^ x8; x7 = (t << 12) | (t >>> 20);
      x2 = (x2 + x7) | 0; t = x13 ^ x2; x13 = (t << 8) | (t >>> 24); x8 = (x8 + x13) | 0; t = x7 ^ x8; x7 = (t << 7) | (t >>> 25);
      x3 = (x3 + x4) | 0; t = x14 ^ x3; x14 = (t << 16) | (t >>> 16); x9 = (x9 + x14) | 0; t = x4 ^ x9; x4 = (t << 12) | (t >>> 20);
      x3 = (x3 + x4) | 0; t = x14 ^ x3; x14 = (t << 8) | (t >>> 24); x9 = (x9 + x14) | 0; t = x4 ^ x9; x4 = (t << 7) | (t >>> 25);
    }
    const words = [
      x0 + j0, x1 + j1, x2 + j2, x3 + j3, x4 + j4, x5 + j5, x6 + j6, x7 + j7,
      x8 + j8, x9 + j9, x10 + j10, x11 + j11, x12 + j12, x13 + j13, x14 + j14, x15 + j15,
    ];
    for (let i = 0; i < 16; i++) {
      const w = words[i];
      const o = offset + i * 4;
      out[o] = w & 255;
      out[o + 1] = (w >>> 8) & 255;
      out[o + 2] = (w >>> 16) & 255;
      out[o + 3] = (w >>> 24) & 255;
    }
  }

  function readWordsLE(bytes, into) {
    for (let i = 0; i < into.length; i++) {
      const o = i * 4;
      into[i] = bytes[o] | (bytes[o + 1] << 8) | (bytes[o + 2] << 16) | (bytes[o + 3] << 24);
    }
  }

  /** Mix 32 bytes of fresh OS entropy into the key. */
  function mixEntropy(base64) {
    const bytes = web.base64ToBytes(base64);
    if (bytes.length < 32) throw new TypeError("celld: entropy must be 32 bytes");
    const words = new Uint32Array(8);
    readWordsLE(bytes, words);
    for (let i = 0; i < 8; i++) key[i] ^= words[i];
    pool.fill(0);
    poolAt = pool.length; // the next small request refills from the new key
    keyed = true;
    sinceSeedBytes = 0;
    sinceSeedCalls = 0;
  }

  function requestEntropy() {
    if (reseeding) return;
    reseeding = true;
    PromisePrototypeThen(host.request("entropy", {}), (base64) => {
      reseeding = false;
      mixEntropy(base64);
    }, (error) => {
      reseeding = false;
      web.reportError(error);
    });
  }

  /** `n` bytes of keystream after rekeying from its first 32 bytes (fast key erasure). */
  function generate(n) {
    const blocks = Math.ceil((n + 32) / 64);
    const buffer = new Uint8Array(blocks * 64);
    for (let i = 0; i < blocks; i++) chachaBlock(key, i, buffer, i * 64);
    readWordsLE(buffer, key);
    const out = buffer.slice(32, 32 + n);
    buffer.fill(0);
    return out;
  }

  // Small requests (UUIDs, a few words) are served from a pool so that each does
  // not pay a whole block; served bytes are wiped so the pool never holds past output.
  const POOL_BYTES = 1024;
  let pool = new Uint8Array(0);
  let poolAt = 0;

  function randomBytes(n) {
    if (!keyed) {
      throw new Error("celld: crypto has no entropy yet (the host must evaluate webops.entropy_script() in each isolate before user code)");
    }
    let out;
    if (n > POOL_BYTES / 4) {
      out = generate(n);
    } else {
      if (poolAt + n > pool.length) {
        pool.fill(0);
        pool = generate(POOL_BYTES);
        poolAt = 0;
      }
      out = pool.slice(poolAt, poolAt + n);
      pool.fill(0, poolAt, poolAt + n);
      poolAt += n;
    }
    sinceSeedBytes += n;
    sinceSeedCalls++;
    if (sinceSeedBytes >= RESEED_BYTES || sinceSeedCalls >= RESEED_CALLS) requestEntropy();
    return out;
  }

  // The first key, from webops.entropy_script(). That script may run before the
  // runtime (it then leaves the key in `__celld_entropy_initial`, taken here) or
  // after it (it then calls `__celld_entropy_seed`). Both are removed once used so
  // that user code cannot inject a key.
  if (typeof globalThis.__celld_entropy_initial === "string") {
    mixEntropy(globalThis.__celld_entropy_initial);
    delete globalThis.__celld_entropy_initial;
  } else {
    Object.defineProperty(globalThis, "__celld_entropy_seed", {
      configurable: true,
      enumerable: false,
      writable: false,
      value: (base64) => {
        mixEntropy(base64);
        delete globalThis.__celld_entropy_seed;
      },
    });
  }
  // Fresh entropy as soon as the host answers, whatever the first key was.
  requestEntropy();

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

  const DIGESTS = { "SHA-1": "SHA-1", "SHA-256": "SHA-256", "SHA-384": "SHA-384", "SHA-512": "SHA-512", MD5: "MD5" };
  const ILLEGAL = Symbol("illegal");

  function notSupported(method) {
    return () => Promise.reject(new DOMException(
      `crypto.subtle.${method} is not supported by celld yet`, "NotSupportedError"));
  }

  class SubtleCrypto {
    constructor(key) {
      if (key !== ILLEGAL) throw new TypeError("Illegal constructor");
    }

    async digest(algorithm, data) {
      const rawName = typeof algorithm === "string" ? algorithm : algorithm && algorithm.name;
      const name = DIGESTS[String(rawName).toUpperCase()];
      if (!name) {
        throw new DOMException(`Unrecognized or unsupported digest algorithm: ${rawName}`, "NotSupportedError");
      }
      const bytes = web.bufferSourceView(data);
      if (!bytes) throw new TypeError("crypto.subtle.digest: data must be an ArrayBuffer or ArrayBufferView");
      const answer = await host.request("digest", { alg: name, data: web.bytesToBase64(bytes) });
      return web.base64ToBytes(answer).buffer;
    }

    async importKey(format, keyData, algorithm, extractable, usages) {
      const params = hmacParams(algorithm, "importKey");
      let bytes;
      if (format === "raw") {
        bytes = web.bufferSourceView(keyData);
        if (!bytes) throw new TypeError("crypto.subtle.importKey: keyData must be a BufferSource");
        bytes = Uint8Array.from(bytes);
      } else if (format === "jwk") {
        if (!keyData || keyData.kty !== "oct" || typeof keyData.k !== "string") {
          throw new DOMException("importKey: a JWK HMAC key needs kty \"oct\" and k", "DataError");
        }
        bytes = web.base64ToBytes(keyData.k.replace(/-/g, "+").replace(/_/g, "/"));
      } else {
        throw new DOMException(`importKey: format ${format} is not supported for HMAC by celld`, "NotSupportedError");
      }
      if (bytes.length === 0) throw new DOMException("importKey: an HMAC key may not be empty", "DataError");
      return makeKey(bytes, params.hash, extractable, usages);
    }

    async generateKey(algorithm, extractable, usages) {
      const params = hmacParams(algorithm, "generateKey");
      const bits = algorithm.length ?? (params.hash === "SHA-384" || params.hash === "SHA-512" ? 1024 : 512);
      const bytes = new Uint8Array(Math.ceil(bits / 8));
      getRandomValues(bytes);
      return makeKey(bytes, params.hash, extractable, usages);
    }

    async exportKey(format, key) {
      const slots = keys.get(key);
      if (!slots) throw new TypeError("exportKey: key must be a CryptoKey");
      if (!slots.extractable) throw new DOMException("key is not extractable", "InvalidAccessError");
      if (format === "raw") return Uint8Array.from(slots.bytes).buffer;
      if (format === "jwk") {
        const k = web.bytesToBase64(slots.bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
        return { kty: "oct", k, alg: "HS" + slots.hash.slice(4), key_ops: [...slots.usages], ext: true };
      }
      throw new DOMException(`exportKey: format ${format} is not supported by celld`, "NotSupportedError");
    }

    async sign(algorithm, key, data) {
      const slots = checkKey(algorithm, key, "sign");
      const bytes = web.bufferSourceView(data);
      if (!bytes) throw new TypeError("crypto.subtle.sign: data must be a BufferSource");
      const answer = await host.request("hmac", {
        alg: slots.hash, key: web.bytesToBase64(slots.bytes), data: web.bytesToBase64(bytes),
      });
      return web.base64ToBytes(answer).buffer;
    }

    async verify(algorithm, key, signature, data) {
      const slots = checkKey(algorithm, key, "verify");
      const given = web.bufferSourceView(signature);
      const bytes = web.bufferSourceView(data);
      if (!given || !bytes) throw new TypeError("crypto.subtle.verify: signature and data must be BufferSources");
      const answer = await host.request("hmac", {
        alg: slots.hash, key: web.bytesToBase64(slots.bytes), data: web.bytesToBase64(bytes),
      });
      const expected = web.base64ToBytes(answer);
      return expected.length === given.length && this.timingSafeEqual(expected, given);
    }

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
  for (const method of ["encrypt", "decrypt", "deriveKey", "deriveBits", "wrapKey", "unwrapKey"]) {
    Object.defineProperty(SubtleCrypto.prototype, method, {
      value: notSupported(method), writable: true, configurable: true, enumerable: false,
    });
  }

  const keys = new WeakMap();

  class CryptoKey {
    constructor(key) {
      if (key !== ILLEGAL) throw new TypeError("Illegal constructor");
    }
    get type() { return "secret"; }
    get extractable() { return keys.get(this).extractable; }
    get algorithm() {
      const slots = keys.get(this);
      return { name: "HMAC", hash: { name: slots.hash }, length: slots.bytes.length * 8 };
    }
    get usages() { return [...keys.get(this).usages]; }
  }

  function hashName(hash) {
    const raw = typeof hash === "string" ? hash : hash && hash.name;
    const name = DIGESTS[String(raw).toUpperCase()];
    if (!name || name === "MD5") {
      throw new DOMException(`Unrecognized or unsupported hash: ${raw}`, "NotSupportedError");
    }
    return name;
  }

  function hmacParams(algorithm, method) {
    const name = typeof algorithm === "string" ? algorithm : algorithm && algorithm.name;
    if (String(name).toUpperCase() !== "HMAC") {
      throw new DOMException(
        `crypto.subtle.${method}: celld supports HMAC keys only, not ${name}`, "NotSupportedError");
    }
    return { hash: hashName(algorithm.hash) };
  }

  function makeKey(bytes, hash, extractable, usages) {
    const allowed = ["sign", "verify"];
    for (const usage of usages || []) {
      if (!allowed.includes(usage)) throw new SyntaxError(`Unsupported key usage for an HMAC key: ${usage}`);
    }
    const key = new CryptoKey(ILLEGAL);
    keys.set(key, { bytes, hash, extractable: Boolean(extractable), usages: [...(usages || [])] });
    return key;
  }

  function checkKey(algorithm, key, usage) {
    const name = typeof algorithm === "string" ? algorithm : algorithm && algorithm.name;
    const slots = keys.get(key);
    if (!slots) throw new TypeError(`crypto.subtle.${usage}: key must be a CryptoKey`);
    if (String(name).toUpperCase() !== "HMAC") {
      throw new DOMException(`crypto.subtle.${usage}: celld supports HMAC only, not ${name}`, "NotSupportedError");
    }
    if (!slots.usages.includes(usage)) {
      throw new DOMException(`key does not allow ${usage}`, "InvalidAccessError");
    }
    return slots;
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
  web.randomBytes = randomBytes;
  /** For known-answer tests of the block function (RFC 8439 A.1). */
  web.chacha20Block = (keyBytes, counter) => {
    const k = new Uint32Array(8);
    readWordsLE(keyBytes, k);
    const out = new Uint8Array(64);
    chachaBlock(k, counter, out, 0);
    return out;
  };
  web.defineGlobal("crypto", new Crypto(ILLEGAL));
})();
