// Last web file: globals celld does not provide throw a clear error when touched,
// and the internals object is frozen so user code cannot swap the helpers.
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const MISSING = [
    "WebSocket", "WebSocketPair", "caches", "Cache", "CacheStorage",
    "WritableStream", "TransformStream", "TextEncoderStream", "TextDecoderStream",
    "CompressionStream", "DecompressionStream", "IdentityTransformStream", "FixedLengthStream",
    "ByteLengthQueuingStrategy", "CountQueuingStrategy", "ReadableByteStreamController",
    "ReadableStreamBYOBReader", "HTMLRewriter", "EventSource", "MessageChannel", "MessagePort",
    "BroadcastChannel", "Worker", "XMLHttpRequest",
  ];
  for (const name of MISSING) {
    if (!Object.prototype.hasOwnProperty.call(globalThis, name)) web.defineMissingGlobal(name);
  }
  if (web.url) Object.freeze(web.url);
  Object.freeze(web);
})();
