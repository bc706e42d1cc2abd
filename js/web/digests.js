// Synchronous digests for the runtime (Durable Object ids, node:crypto's createHash and
// createHmac), from the audited noble libraries vendored in js/vendor/.
//
// crypto.subtle is asynchronous and runs on the host (celld/isolate/webcrypto); these are
// for the APIs that must answer at once, where JS cannot wait for the host. Each vendored
// bundle is a function run the first time it is needed: setting them up costs QuickJS
// about a millisecond (hashes) and tens of milliseconds (AES tables), and most isolates
// never need either.
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const makeHashes = globalThis.__celld_noble_hashes;
  const makeCiphers = globalThis.__celld_noble_ciphers;
  if (!makeHashes || !makeCiphers) throw new Error("celld: js/vendor/noble-*.js must load before web/digests.js");
  // The runtime's own copies; user code gets none.
  delete globalThis.__celld_noble_hashes;
  delete globalThis.__celld_noble_ciphers;

  let hashes = null;
  let ciphers = null;
  /** @noble/hashes: md5, sha1, sha224..sha512_256, hmac, pbkdf2, hkdf, scrypt. */
  const nobleHashes = () => (hashes ??= makeHashes());
  /** @noble/ciphers: rngAesCtrDrbg256. */
  const nobleCiphers = () => (ciphers ??= makeCiphers());

  /** SHA-256 of `bytes` (a Uint8Array). */
  const sha256 = (bytes) => nobleHashes().sha256(bytes);

  /** HMAC-SHA-256 of `data` under `key` (both Uint8Arrays). */
  const hmacSha256 = (key, data) => {
    const noble = nobleHashes();
    return noble.hmac(noble.sha256, key, data);
  };

  web.nobleHashes = nobleHashes;
  web.nobleCiphers = nobleCiphers;
  web.digests = Object.freeze({ sha256, hmacSha256 });
})();
