// Synchronous digests for the runtime (Durable Object ids, node:crypto's createHash and
// createHmac), from the audited noble libraries vendored in js/vendor/noble.js.
//
// crypto.subtle is asynchronous and runs on the host (celld/isolate/webcrypto); these are
// for the APIs that must answer at once, where JS cannot wait for the host.
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const noble = globalThis.__celld_noble;
  if (!noble) throw new Error("celld: js/vendor/noble.js must load before web/digests.js");
  delete globalThis.__celld_noble; // the runtime's own copy; user code gets none

  const { hashes, hmac } = noble;

  /** SHA-256 of `bytes` (a Uint8Array). */
  const sha256 = (bytes) => hashes.sha256(bytes);

  /** HMAC-SHA-256 of `data` under `key` (both Uint8Arrays). */
  const hmacSha256 = (key, data) => hmac(hashes.sha256, key, data);

  web.noble = noble;
  web.digests = Object.freeze({ sha256, hmacSha256 });
})();
