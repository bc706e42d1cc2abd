// What celld's runtime takes from @noble/ciphers: the SP 800-90A CTR_DRBG behind a random
// pool that ran dry (js/web/random.js). js/vendor/noble-ciphers.js is this file bundled by
// esbuild inside a function (`npm run build`): AES's tables cost tens of milliseconds to
// compute in QuickJS, so they are computed the first time the generator is needed, not in
// every isolate.
export { rngAesCtrDrbg256 } from "@noble/ciphers/aes.js";
