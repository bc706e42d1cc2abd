// What celld's runtime takes from unenv: Node's querystring and punycode.js, ported as plain
// JavaScript. js/vendor/unenv-node.js is this file bundled by esbuild inside a function
// (`npm run build`); js/node/querystring.js calls it when a Worker imports either module.
export * as querystring from "unenv/node/querystring";
export * as punycode from "unenv/node/punycode";
