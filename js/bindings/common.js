// Helpers shared by the storage bindings (KV, D1, R2, assets): turning the values a Worker
// passes into bytes for the host, and bytes back into what the binding returns.
"use strict";
(() => {
  const web = globalThis.__celld_web;

  /** string | ArrayBuffer | view | ReadableStream | Request/Response body | null -> bytes. */
  async function valueBytes(value, what) {
    if (value === null || value === undefined) return new Uint8Array(0);
    if (typeof value === "string") return web.utf8Encode(value);
    const bytes = web.bufferSourceBytes(value);
    if (bytes) return bytes;
    if (value instanceof ReadableStream) return web.collectStream(value);
    throw new TypeError(
      `${what}: the value must be a string, an ArrayBuffer, an ArrayBufferView or a ReadableStream`,
    );
  }

  // Bytes on the bridge (celld/bindings/wire.py): UTF-8 text as a JSON string, anything
  // else as base64, because base64 in JS is slow for large values.

  /** A value given to put() -> {text} | {b64}. */
  async function toWire(value, what) {
    if (typeof value === "string") return { text: value.toWellFormed() }; // as TextEncoder would
    return { b64: web.bytesToBase64(await valueBytes(value, what)) };
  }

  /** {text} | {b64} -> {text?, bytes?}: a holder that converts on demand, once. */
  function fromWire(wire) {
    let text = wire && typeof wire.text === "string" ? wire.text : null;
    let bytes = text === null ? web.base64ToBytes((wire && wire.b64) || "") : null;
    return {
      text() {
        if (text === null) text = web.utf8Decode(bytes);
        return text;
      },
      bytes() {
        if (bytes === null) bytes = web.utf8Encode(text);
        return bytes;
      },
    };
  }

  /** A wire value as the type a get() asked for. */
  function wireAs(wire, type, what) {
    const holder = fromWire(wire);
    switch (type) {
      case undefined:
      case null:
      case "text":
        return holder.text();
      case "json":
        return JSON.parse(holder.text());
      default:
        return asType(holder.bytes(), type, what);
    }
  }

  function toBase64(bytes) {
    return web.bytesToBase64(bytes);
  }

  function fromBase64(text) {
    return web.base64ToBytes(text || "");
  }

  /** A fresh ArrayBuffer holding exactly these bytes. */
  function toArrayBuffer(bytes) {
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  }

  function decodeText(bytes) {
    return web.utf8Decode(bytes);
  }

  /** The body types a get() can return by name (KV's `type`, R2's body readers). */
  function asType(bytes, type, what) {
    switch (type) {
      case undefined:
      case null:
      case "text":
        return decodeText(bytes);
      case "json":
        return JSON.parse(decodeText(bytes));
      case "arrayBuffer":
        return toArrayBuffer(bytes);
      case "stream":
        return web.streamFromBytes(bytes);
      default:
        throw new TypeError(
          `${what ? `${what}: ` : ""}Unknown response type. Possible types are "text", "arrayBuffer", "json", and "stream".`,
        );
    }
  }

  const hidden = { configurable: false, enumerable: false, writable: false };
  Object.defineProperty(globalThis, "__celld_bindings", Object.assign({
    value: Object.freeze({
      valueBytes, toBase64, fromBase64, toArrayBuffer, decodeText, asType, toWire, fromWire, wireAs,
    }),
  }, hidden));
})();
