// node:crypto as nodejs_compat provides it, as far as JS that cannot call the host
// synchronously can:
//   * synchronous, in the isolate, on the audited noble libraries (js/vendor/):
//     createHash, hash, createHmac (md5, sha1, sha224, sha256, sha384, sha512,
//     sha512-224, sha512-256), pbkdf2Sync, hkdfSync, scryptSync; randomBytes,
//     randomFillSync, randomInt, randomUUID, getRandomValues (js/web/random.js);
//     timingSafeEqual; createSecretKey and KeyObject (secret keys, and KeyObject.from of
//     any CryptoKey);
//   * with a callback, on the host (celld/isolate/webcrypto/node.py): pbkdf2, hkdf,
//     scrypt, generateKeyPair, sign and verify;
//   * webcrypto and subtle: the Web Crypto objects.
// What Node only offers synchronously and needs the host's OpenSSL (createSign,
// createVerify, generateKeyPairSync, createCipheriv, createPrivateKey, ...) throws an
// error that says so and names the asynchronous alternative.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;
  const { PromisePrototypeThen } = globalThis.__celld_primordials;
  const { Buffer, encode, decode } = globalThis.__celld_node.buffer;
  const noble = web.nobleHashes();

  const HASHES = {
    md5: noble.md5,
    sha1: noble.sha1,
    sha224: noble.sha224,
    sha256: noble.sha256,
    sha384: noble.sha384,
    sha512: noble.sha512,
    "sha512-224": noble.sha512_224,
    "sha512-256": noble.sha512_256,
  };
  const ALIASES = {
    "sha-1": "sha1", "sha-224": "sha224", "sha-256": "sha256", "sha-384": "sha384",
    "sha-512": "sha512", "sha-512/224": "sha512-224", "sha-512/256": "sha512-256",
    "sha512/224": "sha512-224", "sha512/256": "sha512-256",
  };

  function hashName(name) {
    let key = String(name).toLowerCase();
    if (key.startsWith("rsa-")) key = key.slice(4);
    key = ALIASES[key] || key;
    if (!Object.prototype.hasOwnProperty.call(HASHES, key)) {
      const error = new Error(`Digest method not supported: ${name} (celld provides ${Object.keys(HASHES).join(", ")})`);
      error.code = "ERR_CRYPTO_INVALID_DIGEST";
      throw error;
    }
    return key;
  }

  function hashFunction(name) {
    return HASHES[hashName(name)];
  }

  function toBytes(data, encoding, what = "data") {
    if (typeof data === "string") return encode(data, encoding);
    if (data instanceof ArrayBuffer) return new Uint8Array(data);
    if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const error = new TypeError(`The "${what}" argument must be of type string or an instance of Buffer, TypedArray, or DataView.`);
    error.code = "ERR_INVALID_ARG_TYPE";
    throw error;
  }

  function output(bytes, encoding) {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return encoding === undefined || encoding === "buffer" ? buffer : decode(buffer, encoding);
  }

  function finished() {
    const error = new Error("Digest already called");
    error.code = "ERR_CRYPTO_HASH_FINALIZED";
    return error;
  }

  class Hash {
    #state;
    #done = false;
    constructor(name, options, state) {
      this.#state = state || hashFunction(name).create();
    }
    update(data, encoding) {
      if (this.#done) throw finished();
      this.#state.update(toBytes(data, encoding));
      return this;
    }
    digest(encoding) {
      if (this.#done) throw finished();
      this.#done = true;
      return output(this.#state.digest(), encoding);
    }
    copy() {
      if (this.#done) throw finished();
      return new Hash(null, undefined, this.#state.clone());
    }
  }

  // -- keys -----------------------------------------------------------------------------

  const KEY_SLOT = Symbol("celld.keyObject");

  /** Node's KeyObject: a secret key's bytes, or a CryptoKey's record (KeyObject.from). */
  class KeyObject {
    constructor(type, slot) {
      if (slot === undefined || slot[KEY_SLOT] !== true) {
        throw new TypeError("KeyObject cannot be constructed directly; use createSecretKey or KeyObject.from");
      }
      this._type = type;
      this._slot = slot;
    }
    static from(key) {
      const record = web.cryptoKeyRecord(key);
      if (!record) throw new TypeError('The "key" argument must be an instance of CryptoKey.');
      if (record.type === "secret") {
        return new KeyObject("secret", { [KEY_SLOT]: true, bytes: web.base64ToBytes(record.data) });
      }
      return new KeyObject(record.type, { [KEY_SLOT]: true, record });
    }
    get type() { return this._type; }
    get symmetricKeySize() {
      return this._type === "secret" ? this._slot.bytes.length : undefined;
    }
    get asymmetricKeyType() {
      if (this._type === "secret") return undefined;
      const name = this._slot.record.algorithm.name;
      if (name === "ECDSA" || name === "ECDH") return "ec";
      if (name === "RSA-PSS") return "rsa-pss";
      if (name.startsWith("RSA")) return "rsa";
      return name.toLowerCase();
    }
    export(options = {}) {
      if (this._type === "secret") {
        if (options.format === "jwk") {
          return { kty: "oct", k: Buffer.from(this._slot.bytes).toString("base64url") };
        }
        return Buffer.from(this._slot.bytes);
      }
      const der = web.base64ToBytes(this._slot.record.data);
      const label = this._type === "private" ? "PRIVATE KEY" : "PUBLIC KEY";
      const wanted = this._type === "private" ? "pkcs8" : "spki";
      if (options.type !== undefined && options.type !== wanted) {
        throw new Error(`celld: a ${this._type} KeyObject exports as ${wanted} only, not ${options.type}`);
      }
      if (options.format === "der") return Buffer.from(der);
      if (options.format === "pem") return pem(label, der);
      throw new Error(`celld: KeyObject.export of a ${this._type} key takes format "pem" or "der"`);
    }
    equals(other) {
      if (!(other instanceof KeyObject) || other._type !== this._type) return false;
      const a = this._type === "secret" ? this._slot.bytes : web.base64ToBytes(this._slot.record.data);
      const b = other._type === "secret" ? other._slot.bytes : web.base64ToBytes(other._slot.record.data);
      return a.length === b.length && timingSafeEqual(a, b);
    }
  }

  function pem(label, der) {
    const body = Buffer.from(der).toString("base64").replace(/.{1,64}/g, "$&\n");
    return `-----BEGIN ${label}-----\n${body}-----END ${label}-----\n`;
  }

  function createSecretKey(key, encoding) {
    return new KeyObject("secret", { [KEY_SLOT]: true, bytes: Uint8Array.from(toBytes(key, encoding, "key")) });
  }

  /** Key material for an HMAC or KDF: a string, a buffer, a secret KeyObject or CryptoKey. */
  function secretBytes(key, what = "key") {
    if (key instanceof KeyObject) {
      if (key.type !== "secret") throw new TypeError(`The "${what}" argument must be a secret key`);
      return key._slot.bytes;
    }
    const record = web.cryptoKeyRecord(key);
    if (record) {
      if (record.type !== "secret") throw new TypeError(`The "${what}" argument must be a secret key`);
      return web.base64ToBytes(record.data);
    }
    return Uint8Array.from(toBytes(key, "utf8", what));
  }

  class Hmac {
    #state;
    #done = false;
    constructor(name, key) {
      this.#state = noble.hmac.create(hashFunction(name), secretBytes(key));
    }
    update(data, encoding) {
      if (this.#done) throw finished();
      this.#state.update(toBytes(data, encoding));
      return this;
    }
    digest(encoding) {
      if (this.#done) throw finished();
      this.#done = true;
      return output(this.#state.digest(), encoding);
    }
  }

  // -- key derivation -------------------------------------------------------------------

  function checkLength(value, what) {
    if (!Number.isSafeInteger(value) || value < 0) {
      const error = new RangeError(`The value of "${what}" is out of range. Received ${value}`);
      error.code = "ERR_OUT_OF_RANGE";
      throw error;
    }
  }

  function pbkdf2Sync(password, salt, iterations, keylen, digest) {
    checkLength(keylen, "keylen");
    checkLength(iterations, "iterations");
    const bytes = noble.pbkdf2(hashFunction(digest), secretBytes(password, "password"),
      toBytes(salt, "utf8", "salt"), { c: iterations, dkLen: keylen });
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  function hkdfSync(digest, ikm, salt, info, keylen) {
    checkLength(keylen, "keylen");
    const bytes = noble.hkdf(hashFunction(digest), secretBytes(ikm, "ikm"),
      toBytes(salt, "utf8", "salt"), toBytes(info, "utf8", "info"), keylen);
    return bytes.slice().buffer;
  }

  function scryptOptions(options = {}) {
    return {
      N: options.N ?? options.cost ?? 16384,
      r: options.r ?? options.blockSize ?? 8,
      p: options.p ?? options.parallelization ?? 1,
      maxmem: options.maxmem ?? 32 * 1024 * 1024,
    };
  }

  function scryptSync(password, salt, keylen, options) {
    checkLength(keylen, "keylen");
    const o = scryptOptions(options);
    const bytes = noble.scrypt(secretBytes(password, "password"), toBytes(salt, "utf8", "salt"),
      { N: o.N, r: o.r, p: o.p, dkLen: keylen, maxmem: o.maxmem });
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  function callbackOf(callback) {
    if (typeof callback !== "function") {
      const error = new TypeError('The "callback" argument must be of type function.');
      error.code = "ERR_INVALID_ARG_TYPE";
      throw error;
    }
    return callback;
  }

  /** Ask the host (celld/isolate/webcrypto/node.py) and call back with (error, result). */
  function viaHost(method, fields, callback, convert) {
    PromisePrototypeThen(
      host.request("nodecrypto", { method, ...fields }),
      (answer) => callback(null, ...convert(answer)),
      (error) => callback(error),
    );
  }

  const b64 = (bytes) => web.bytesToBase64(bytes);
  const toBuffer = (base64) => Buffer.from(web.base64ToBytes(base64));

  function pbkdf2(password, salt, iterations, keylen, digest, callback) {
    callbackOf(callback);
    checkLength(keylen, "keylen");
    checkLength(iterations, "iterations");
    viaHost("pbkdf2", {
      password: b64(secretBytes(password, "password")), salt: b64(toBytes(salt, "utf8", "salt")),
      iterations, keylen, digest: hashName(digest),
    }, callback, (answer) => [toBuffer(answer)]);
  }

  function hkdf(digest, ikm, salt, info, keylen, callback) {
    callbackOf(callback);
    checkLength(keylen, "keylen");
    viaHost("hkdf", {
      digest: hashName(digest), ikm: b64(secretBytes(ikm, "ikm")),
      salt: b64(toBytes(salt, "utf8", "salt")), info: b64(toBytes(info, "utf8", "info")), keylen,
    }, callback, (answer) => [toBuffer(answer).buffer]);
  }

  function scrypt(password, salt, keylen, options, callback) {
    if (typeof options === "function") { callback = options; options = undefined; }
    callbackOf(callback);
    checkLength(keylen, "keylen");
    viaHost("scrypt", {
      password: b64(secretBytes(password, "password")), salt: b64(toBytes(salt, "utf8", "salt")),
      keylen, ...scryptOptions(options),
    }, callback, (answer) => [toBuffer(answer)]);
  }

  // -- asymmetric keys, with a callback -------------------------------------------------

  /** A key argument as the host reads it: {pem}, {der, type}, or a CryptoKey record. */
  function keyArgument(key) {
    if (key instanceof KeyObject) {
      if (key.type === "secret") throw new TypeError("celld: a secret KeyObject cannot sign or verify");
      return { record: key._slot.record };
    }
    const record = web.cryptoKeyRecord(key);
    if (record) return { record };
    if (typeof key === "string" || ArrayBuffer.isView(key)) {
      return { pem: typeof key === "string" ? key : decode(toBytes(key), "latin1") };
    }
    if (key && typeof key === "object" && key.key !== undefined) {
      if (key.format === "der") return { der: b64(toBytes(key.key)), type: key.type, dsaEncoding: key.dsaEncoding, padding: key.padding, saltLength: key.saltLength };
      if (key.format === "jwk") return { jwk: key.key, dsaEncoding: key.dsaEncoding, padding: key.padding, saltLength: key.saltLength };
      const inner = keyArgument(key.key);
      return { ...inner, dsaEncoding: key.dsaEncoding, padding: key.padding, saltLength: key.saltLength };
    }
    throw new TypeError('The "key" argument must be a PEM string, a Buffer, a KeyObject, a CryptoKey or {key, format}');
  }

  function sign(algorithm, data, key, callback) {
    if (typeof callback !== "function") throw refusal("sign without a callback", "crypto.sign(algorithm, data, key, callback) or crypto.subtle.sign");
    viaHost("sign", {
      algorithm: algorithm == null ? null : hashName(algorithm), data: b64(toBytes(data)), key: keyArgument(key),
    }, callback, (answer) => [toBuffer(answer)]);
  }

  function verify(algorithm, data, key, signature, callback) {
    if (typeof callback !== "function") throw refusal("verify without a callback", "crypto.verify(algorithm, data, key, signature, callback) or crypto.subtle.verify");
    viaHost("verify", {
      algorithm: algorithm == null ? null : hashName(algorithm), data: b64(toBytes(data)),
      key: keyArgument(key), signature: b64(toBytes(signature, undefined, "signature")),
    }, callback, (answer) => [answer]);
  }

  function generateKeyPair(type, options, callback) {
    if (typeof options === "function") { callback = options; options = {}; }
    callbackOf(callback);
    viaHost("generateKeyPair", { type: String(type), options: options || {} }, callback, (answer) => {
      const convert = (part) => {
        if (part.record) return KeyObject.from(web.makeCryptoKey(part.record));
        if (part.der !== undefined) return toBuffer(part.der);
        return part.value;
      };
      return [convert(answer.publicKey), convert(answer.privateKey)];
    });
  }

  // -- randomness -----------------------------------------------------------------------

  function randomBytes(size, callback) {
    checkLength(size, "size");
    if (size > 2 ** 31 - 1) checkLength(-1, "size");
    const bytes = web.randomBytes(size);
    const out = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (typeof callback === "function") {
      queueMicrotask(() => callback(null, out));
      return undefined;
    }
    return out;
  }

  function randomFillSync(buffer, offset = 0, size) {
    const view = toBytes(buffer, undefined, "buf");
    const end = size === undefined ? view.length : offset + size;
    if (offset < 0 || end > view.length) checkLength(-1, "offset + size");
    view.set(web.randomBytes(end - offset), offset);
    return buffer;
  }

  function randomFill(buffer, offset, size, callback) {
    if (typeof offset === "function") { callback = offset; offset = 0; size = undefined; }
    else if (typeof size === "function") { callback = size; size = undefined; }
    callbackOf(callback);
    randomFillSync(buffer, offset, size);
    queueMicrotask(() => callback(null, buffer));
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
      const bytes = web.randomBytes(6);
      value = ((bytes[0] << 8) | bytes[1]) * 2 ** 32
        + ((bytes[2] << 24) >>> 0) + (bytes[3] << 16) + (bytes[4] << 8) + bytes[5];
    } while (value >= limit);
    const result = min + (value % range);
    if (typeof callback === "function") {
      queueMicrotask(() => callback(null, result));
      return undefined;
    }
    return result;
  }

  function timingSafeEqual(a, b) {
    const x = toBytes(a, undefined, "buf1"), y = toBytes(b, undefined, "buf2");
    if (x.length !== y.length) {
      const error = new RangeError("Input buffers must have the same byte length");
      error.code = "ERR_CRYPTO_TIMING_SAFE_EQUAL_LENGTH";
      throw error;
    }
    let diff = 0;
    for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
    return diff === 0;
  }

  function refusal(name, instead) {
    const error = new Error(
      `celld: node:crypto ${name} is not provided: Node's API answers synchronously and celld ` +
      `does this work with the host's OpenSSL, which JS reaches only asynchronously; use ${instead}`);
    error.code = "ERR_METHOD_NOT_IMPLEMENTED";
    return error;
  }

  function refused(name, instead) {
    return () => { throw refusal(name, instead); };
  }

  const nodeCrypto = {
    createHash: (name, options) => new Hash(name, options),
    createHmac: (name, key) => new Hmac(name, key),
    Hash,
    Hmac,
    hash: (name, data, encoding = "hex") => new Hash(name).update(data).digest(encoding),
    getHashes: () => Object.keys(HASHES),
    getCiphers: () => [],
    getCurves: () => ["prime256v1", "secp384r1", "secp521r1"],
    pbkdf2,
    pbkdf2Sync,
    hkdf,
    hkdfSync,
    scrypt,
    scryptSync,
    randomBytes,
    randomFill,
    randomFillSync,
    randomInt,
    randomUUID: () => crypto.randomUUID(),
    getRandomValues: (array) => crypto.getRandomValues(array),
    timingSafeEqual,
    createSecretKey,
    KeyObject,
    sign,
    verify,
    generateKeyPair,
    webcrypto: globalThis.crypto,
    subtle: globalThis.crypto.subtle,
    createSign: refused("createSign", "crypto.sign(algorithm, data, key, callback) or crypto.subtle.sign"),
    createVerify: refused("createVerify", "crypto.verify(algorithm, data, key, signature, callback) or crypto.subtle.verify"),
    generateKeyPairSync: refused("generateKeyPairSync", "crypto.generateKeyPair(type, options, callback) or crypto.subtle.generateKey"),
    createPrivateKey: refused("createPrivateKey", "crypto.subtle.importKey"),
    createPublicKey: refused("createPublicKey", "crypto.subtle.importKey"),
    createCipheriv: refused("createCipheriv", "crypto.subtle.encrypt"),
    createDecipheriv: refused("createDecipheriv", "crypto.subtle.decrypt"),
    publicEncrypt: refused("publicEncrypt", "crypto.subtle.encrypt with RSA-OAEP"),
    privateDecrypt: refused("privateDecrypt", "crypto.subtle.decrypt with RSA-OAEP"),
    createECDH: refused("createECDH", "crypto.subtle.deriveBits with ECDH"),
    createDiffieHellman: refused("createDiffieHellman", "crypto.subtle.deriveBits with ECDH or X25519"),
    diffieHellman: refused("diffieHellman", "crypto.subtle.deriveBits with ECDH or X25519"),
  };
  modules["node:crypto"] = Object.freeze(Object.assign(Object.create(null), nodeCrypto, {
    default: nodeCrypto,
  }));
})();
