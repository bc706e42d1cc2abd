// What celld's runtime takes from the noble libraries, gathered under one internal global.
// js/vendor/noble.js is this file bundled by esbuild (`npm run build`); the runtime reads
// `__celld_noble` once (js/web/crypto.js) and removes it before any user code runs.
import { md5, sha1 } from "@noble/hashes/legacy.js";
import { sha224, sha256, sha384, sha512, sha512_224, sha512_256 } from "@noble/hashes/sha2.js";
import { hmac } from "@noble/hashes/hmac.js";
import { pbkdf2 } from "@noble/hashes/pbkdf2.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { scrypt } from "@noble/hashes/scrypt.js";
import { rngAesCtrDrbg256 } from "@noble/ciphers/aes.js";

Object.defineProperty(globalThis, "__celld_noble", {
  configurable: true,
  enumerable: false,
  writable: false,
  value: Object.freeze({
    hashes: Object.freeze({ md5, sha1, sha224, sha256, sha384, sha512, sha512_224, sha512_256 }),
    hmac,
    pbkdf2,
    hkdf,
    scrypt,
    rngAesCtrDrbg256,
  }),
});
