// What celld's runtime takes from pako (a port of zlib's C code to JavaScript, whose output
// is byte for byte zlib's): js/vendor/pako.js is this file bundled by esbuild inside a
// function (`npm run build`); js/node/zlib.js calls it when a Worker imports node:zlib.
export { Deflate, Inflate, constants } from "./constants.js";
