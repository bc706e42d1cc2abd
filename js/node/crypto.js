// node:crypto: createHash/createHmac (md5, sha1, sha256, sha384, sha512), randomBytes,
// randomUUID, randomInt, timingSafeEqual, and the Web Crypto objects.
//
// Node's hashing is synchronous and the host can only be reached asynchronously, so the
// digests are computed here in JavaScript (FIPS 180-4 and RFC 1321).
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const { Buffer, encode, decode } = globalThis.__celld_node.buffer;

  const { pad, words, sha256 } = globalThis.__celld_web.digests;

  function sha1(bytes) {
    const view = pad(bytes, 64, 8, false);
    const h = new Uint32Array([0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0]);
    const w = new Uint32Array(80);
    for (let offset = 0; offset < view.byteLength; offset += 64) {
      for (let i = 0; i < 16; i++) w[i] = view.getUint32(offset + i * 4);
      for (let i = 16; i < 80; i++) {
        const x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16];
        w[i] = (x << 1) | (x >>> 31);
      }
      let [a, b, c, d, e] = h;
      for (let i = 0; i < 80; i++) {
        let f, k;
        if (i < 20) { f = (b & c) | (~b & d); k = 0x5a827999; }
        else if (i < 40) { f = b ^ c ^ d; k = 0x6ed9eba1; }
        else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8f1bbcdc; }
        else { f = b ^ c ^ d; k = 0xca62c1d6; }
        const t = (((a << 5) | (a >>> 27)) + f + e + k + w[i]) | 0;
        e = d; d = c; c = (b << 30) | (b >>> 2); b = a; a = t;
      }
      h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
    }
    return words(h, false);
  }

  const MD5_S = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21];
  const MD5_K = new Uint32Array(64).map((_, i) => Math.floor(Math.abs(Math.sin(i + 1)) * 2 ** 32));

  function md5(bytes) {
    const view = pad(bytes, 64, 8, true);
    const h = new Uint32Array([0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476]);
    const m = new Uint32Array(16);
    for (let offset = 0; offset < view.byteLength; offset += 64) {
      for (let i = 0; i < 16; i++) m[i] = view.getUint32(offset + i * 4, true);
      let [a, b, c, d] = h;
      for (let i = 0; i < 64; i++) {
        let f, g;
        if (i < 16) { f = (b & c) | (~b & d); g = i; }
        else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) % 16; }
        else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) % 16; }
        else { f = c ^ (b | ~d); g = (7 * i) % 16; }
        const s = MD5_S[(i >> 4) * 4 + (i % 4)];
        const x = (a + f + MD5_K[i] + m[g]) | 0;
        a = d; d = c; c = b;
        b = (b + ((x << s) | (x >>> (32 - s)))) | 0;
      }
      h[0] += a; h[1] += b; h[2] += c; h[3] += d;
    }
    return words(h, true);
  }

  const K512 = [
    "428a2f98d728ae22", "7137449123ef65cd", "b5c0fbcfec4d3b2f", "e9b5dba58189dbbc", "3956c25bf348b538",
    "59f111f1b605d019", "923f82a4af194f9b", "ab1c5ed5da6d8118", "d807aa98a3030242", "12835b0145706fbe",
    "243185be4ee4b28c", "550c7dc3d5ffb4e2", "72be5d74f27b896f", "80deb1fe3b1696b1", "9bdc06a725c71235",
    "c19bf174cf692694", "e49b69c19ef14ad2", "efbe4786384f25e3", "0fc19dc68b8cd5b5", "240ca1cc77ac9c65",
    "2de92c6f592b0275", "4a7484aa6ea6e483", "5cb0a9dcbd41fbd4", "76f988da831153b5", "983e5152ee66dfab",
    "a831c66d2db43210", "b00327c898fb213f", "bf597fc7beef0ee4", "c6e00bf33da88fc2", "d5a79147930aa725",
    "06ca6351e003826f", "142929670a0e6e70", "27b70a8546d22ffc", "2e1b21385c26c926", "4d2c6dfc5ac42aed",
    "53380d139d95b3df", "650a73548baf63de", "766a0abb3c77b2a8", "81c2c92e47edaee6", "92722c851482353b",
    "a2bfe8a14cf10364", "a81a664bbc423001", "c24b8b70d0f89791", "c76c51a30654be30", "d192e819d6ef5218",
    "d69906245565a910", "f40e35855771202a", "106aa07032bbd1b8", "19a4c116b8d2d0c8", "1e376c085141ab53",
    "2748774cdf8eeb99", "34b0bcb5e19b48a8", "391c0cb3c5c95a63", "4ed8aa4ae3418acb", "5b9cca4f7763e373",
    "682e6ff3d6b2b8a3", "748f82ee5defb2fc", "78a5636f43172f60", "84c87814a1f0ab72", "8cc702081a6439ec",
    "90befffa23631e28", "a4506cebde82bde9", "bef9a3f7b2c67915", "c67178f2e372532b", "ca273eceea26619c",
    "d186b8c721c0c207", "eada7dd6cde0eb1e", "f57d4f7fee6ed178", "06f067aa72176fba", "0a637dc5a2c898a6",
    "113f9804bef90dae", "1b710b35131c471b", "28db77f523047d84", "32caab7b40c72493", "3c9ebe0a15c9bebc",
    "431d67c49c100d4c", "4cc5d4becb3e42b6", "597f299cfc657e2a", "5fcb6fab3ad6faec", "6c44198c4a475817",
  ].map((x) => BigInt("0x" + x));
  const IV512 = ["6a09e667f3bcc908", "bb67ae8584caa73b", "3c6ef372fe94f82b", "a54ff53a5f1d36f1",
    "510e527fade682d1", "9b05688c2b3e6c1f", "1f83d9abfb41bd6b", "5be0cd19137e2179"].map((x) => BigInt("0x" + x));
  const IV384 = ["cbbb9d5dc1059ed8", "629a292a367cd507", "9159015a3070dd17", "152fecd8f70e5939",
    "67332667ffc00b31", "8eb44a8768581511", "db0c2e0d64f98fa7", "47b5481dbefa4fa4"].map((x) => BigInt("0x" + x));
  const M64 = (1n << 64n) - 1n;
  const rotr = (x, n) => ((x >> n) | (x << (64n - n))) & M64;

  function sha512(bytes, iv = IV512, outBytes = 64) {
    const view = pad(bytes, 128, 16, false);
    const h = [...iv];
    const w = new Array(80);
    for (let offset = 0; offset < view.byteLength; offset += 128) {
      for (let i = 0; i < 16; i++) w[i] = view.getBigUint64(offset + i * 8);
      for (let i = 16; i < 80; i++) {
        const s0 = rotr(w[i - 15], 1n) ^ rotr(w[i - 15], 8n) ^ (w[i - 15] >> 7n);
        const s1 = rotr(w[i - 2], 19n) ^ rotr(w[i - 2], 61n) ^ (w[i - 2] >> 6n);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) & M64;
      }
      let [a, b, c, d, e, f, g, hh] = h;
      for (let i = 0; i < 80; i++) {
        const S1 = rotr(e, 14n) ^ rotr(e, 18n) ^ rotr(e, 41n);
        const ch = (e & f) ^ (~e & M64 & g);
        const t1 = (hh + S1 + ch + K512[i] + w[i]) & M64;
        const S0 = rotr(a, 28n) ^ rotr(a, 34n) ^ rotr(a, 39n);
        const maj = (a & b) ^ (a & c) ^ (b & c);
        const t2 = (S0 + maj) & M64;
        hh = g; g = f; f = e; e = (d + t1) & M64; d = c; c = b; b = a; a = (t1 + t2) & M64;
      }
      const add = [a, b, c, d, e, f, g, hh];
      for (let i = 0; i < 8; i++) h[i] = (h[i] + add[i]) & M64;
    }
    const out = new Uint8Array(64);
    const outView = new DataView(out.buffer);
    h.forEach((x, i) => outView.setBigUint64(i * 8, x));
    return out.subarray(0, outBytes);
  }

  const ALGORITHMS = {
    md5: { hash: md5, block: 64 },
    sha1: { hash: sha1, block: 64 },
    sha256: { hash: sha256, block: 64 },
    sha384: { hash: (b) => sha512(b, IV384, 48), block: 128 },
    sha512: { hash: (b) => sha512(b), block: 128 },
  };

  function algorithm(name) {
    const key = String(name).toLowerCase().replace(/^sha-/, "sha").replace(/^rsa-/, "");
    const found = ALGORITHMS[key];
    if (!found) {
      throw new Error(`Digest method not supported: ${name} (celld provides ${Object.keys(ALGORITHMS).join(", ")})`);
    }
    return found;
  }

  function toBytes(data, encoding) {
    if (typeof data === "string") return encode(data, encoding);
    if (data instanceof ArrayBuffer) return new Uint8Array(data);
    if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    throw new TypeError("The \"data\" argument must be of type string or an instance of Buffer, TypedArray, or DataView");
  }

  function concat(chunks) {
    const total = chunks.reduce((n, c) => n + c.length, 0);
    const out = new Uint8Array(total);
    let at = 0;
    for (const chunk of chunks) { out.set(chunk, at); at += chunk.length; }
    return out;
  }

  function output(bytes, encoding) {
    const buffer = Buffer.from(bytes);
    return encoding === undefined || encoding === "buffer" ? buffer : decode(buffer, encoding);
  }

  class Hash {
    constructor(name, chunks = []) {
      this._name = name;
      this._algorithm = algorithm(name);
      this._chunks = chunks;
      this._done = false;
    }
    update(data, encoding) {
      if (this._done) throw new Error("Digest already called");
      this._chunks.push(Uint8Array.from(toBytes(data, encoding)));
      return this;
    }
    digest(encoding) {
      if (this._done) throw new Error("Digest already called");
      this._done = true;
      return output(this._algorithm.hash(concat(this._chunks)), encoding);
    }
    copy() {
      if (this._done) throw new Error("Digest already called");
      return new Hash(this._name, [...this._chunks]);
    }
  }

  function hmac(name, key, data) {
    const { hash, block } = algorithm(name);
    let k = key.length > block ? hash(key) : key;
    const padded = new Uint8Array(block);
    padded.set(k);
    const inner = padded.map((b) => b ^ 0x36);
    const outer = padded.map((b) => b ^ 0x5c);
    return hash(concat([outer, hash(concat([inner, data]))]));
  }

  class Hmac {
    constructor(name, key) {
      algorithm(name);
      this._name = name;
      this._key = typeof key === "object" && key !== null && key.type === "secret" && key._bytes
        ? key._bytes : Uint8Array.from(toBytes(key, "utf8"));
      this._chunks = [];
      this._done = false;
    }
    update(data, encoding) {
      if (this._done) throw new Error("Digest already called");
      this._chunks.push(Uint8Array.from(toBytes(data, encoding)));
      return this;
    }
    digest(encoding) {
      if (this._done) throw new Error("Digest already called");
      this._done = true;
      return output(hmac(this._name, this._key, concat(this._chunks)), encoding);
    }
  }

  function randomBytes(size, callback) {
    if (typeof size !== "number" || size < 0 || size > 2 ** 31 - 1) {
      throw new RangeError(`The value of "size" is out of range. Received ${size}`);
    }
    const out = Buffer.alloc(size);
    for (let i = 0; i < size; i += 65536) {
      crypto.getRandomValues(out.subarray(i, Math.min(size, i + 65536)));
    }
    if (typeof callback === "function") {
      queueMicrotask(() => callback(null, out));
      return undefined;
    }
    return out;
  }

  function randomInt(min, max, callback) {
    if (max === undefined || typeof max === "function") { callback = max; max = min; min = 0; }
    if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || max <= min) {
      throw new RangeError(`The value of "max" is out of range. It must be greater than ${min}`);
    }
    const range = max - min;
    const limit = Math.floor(2 ** 48 / range) * range;
    let value;
    do {
      const bytes = randomBytes(6);
      value = bytes.readUInt32BE(0) * 65536 + bytes.readUInt16BE(4);
    } while (value >= limit);
    const result = min + (value % range);
    if (typeof callback === "function") {
      queueMicrotask(() => callback(null, result));
      return undefined;
    }
    return result;
  }

  function timingSafeEqual(a, b) {
    const x = toBytes(a), y = toBytes(b);
    if (x.length !== y.length) {
      throw new RangeError("Input buffers must have the same byte length");
    }
    let diff = 0;
    for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
    return diff === 0;
  }

  function unsupported(name) {
    return () => {
      throw new Error(`crypto.${name} is not supported by celld; use crypto.subtle`);
    };
  }

  const nodeCrypto = {
    createHash: (name, options) => new Hash(name),
    createHmac: (name, key) => new Hmac(name, key),
    Hash,
    Hmac,
    hash: (name, data, encoding = "hex") => new Hash(name).update(data).digest(encoding),
    getHashes: () => Object.keys(ALGORITHMS),
    randomBytes,
    randomInt,
    randomUUID: () => crypto.randomUUID(),
    getRandomValues: (array) => crypto.getRandomValues(array),
    timingSafeEqual,
    webcrypto: globalThis.crypto,
    subtle: globalThis.crypto.subtle,
    createCipheriv: unsupported("createCipheriv"),
    createDecipheriv: unsupported("createDecipheriv"),
    createSign: unsupported("createSign"),
    createVerify: unsupported("createVerify"),
    pbkdf2Sync: unsupported("pbkdf2Sync"),
    scryptSync: unsupported("scryptSync"),
    generateKeyPairSync: unsupported("generateKeyPairSync"),
  };
  globalThis.__celld_node.hmac = hmac;
  globalThis.__celld_node.digest = (name, bytes) => algorithm(name).hash(bytes);
  modules["node:crypto"] = Object.freeze(Object.assign(Object.create(null), nodeCrypto, {
    default: nodeCrypto,
  }));
})();
