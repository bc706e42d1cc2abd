// What celld's runtime takes from @noble/hashes. js/vendor/noble-hashes.js is this file
// bundled by esbuild inside a function (`npm run build`), which js/web/digests.js calls the
// first time a synchronous digest is needed: most isolates never need one, and setting
// the hashes up costs about a millisecond in QuickJS.
export { md5, sha1 } from "@noble/hashes/legacy.js";
export { sha224, sha256, sha384, sha512, sha512_224, sha512_256 } from "@noble/hashes/sha2.js";
export { hmac } from "@noble/hashes/hmac.js";
export { pbkdf2 } from "@noble/hashes/pbkdf2.js";
export { hkdf } from "@noble/hashes/hkdf.js";
export { scrypt } from "@noble/hashes/scrypt.js";
