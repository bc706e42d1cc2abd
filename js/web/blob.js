// Blob, File and FormData, with the multipart/form-data and urlencoded encodings that
// Request/Response bodies use (body.js reads and writes them through `web`).
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const blobs = new WeakMap(); // Blob -> { bytes, type }

  function partBytes(part) {
    if (part instanceof Blob) return blobs.get(part).bytes;
    const bytes = web.bufferSourceBytes(part);
    if (bytes) return bytes;
    return web.utf8Encode(String(part));
  }

  function normalizeType(type) {
    const text = type === undefined ? "" : String(type);
    return /^[\x20-\x7e]*$/.test(text) ? text.toLowerCase() : "";
  }

  class Blob {
    constructor(parts = [], options = {}) {
      if (parts === null || typeof parts !== "object" || typeof parts[Symbol.iterator] !== "function") {
        throw new TypeError("Blob: the first argument must be a sequence");
      }
      const chunks = [...parts].map(partBytes);
      const total = chunks.reduce((n, c) => n + c.length, 0);
      const bytes = new Uint8Array(total);
      let at = 0;
      for (const chunk of chunks) {
        bytes.set(chunk, at);
        at += chunk.length;
      }
      blobs.set(this, { bytes, type: normalizeType(options && options.type) });
    }
    get size() { return blobs.get(this).bytes.length; }
    get type() { return blobs.get(this).type; }
    slice(start = 0, end = undefined, type = "") {
      const bytes = blobs.get(this).bytes;
      const blob = new Blob([], { type });
      blobs.get(blob).bytes = bytes.slice(start, end === undefined ? bytes.length : end);
      return blob;
    }
    async arrayBuffer() { return blobs.get(this).bytes.slice().buffer; }
    async bytes() { return blobs.get(this).bytes.slice(); }
    async text() { return web.utf8Decode(blobs.get(this).bytes); }
    stream() { return web.streamFromBytes(blobs.get(this).bytes.slice()); }
  }

  class File extends Blob {
    #name;
    #lastModified;
    constructor(parts, name, options = {}) {
      if (arguments.length < 2) throw new TypeError("File: 2 arguments required");
      super(parts, options);
      this.#name = String(name);
      this.#lastModified = options && options.lastModified !== undefined
        ? Number(options.lastModified) : Date.now();
    }
    get name() { return this.#name; }
    get lastModified() { return this.#lastModified; }
  }

  const entriesOf = new WeakMap(); // FormData -> [[name, value], ...]

  function entryValue(value, filename) {
    if (value instanceof Blob) {
      if (!(value instanceof File) || filename !== undefined) {
        const name = filename !== undefined ? String(filename) : value instanceof File ? value.name : "blob";
        return new File([value], name, { type: value.type });
      }
      return value;
    }
    return String(value);
  }

  class FormData {
    constructor(form) {
      if (form !== undefined) throw new TypeError("FormData: a form element is not supported in a Worker");
      entriesOf.set(this, []);
    }
    append(name, value, filename) {
      entriesOf.get(this).push([String(name), entryValue(value, filename)]);
    }
    set(name, value, filename) {
      const list = entriesOf.get(this);
      const key = String(name);
      const entry = [key, entryValue(value, filename)];
      const first = list.findIndex(([n]) => n === key);
      if (first === -1) {
        list.push(entry);
        return;
      }
      list[first] = entry;
      for (let i = list.length - 1; i > first; i--) if (list[i][0] === key) list.splice(i, 1);
    }
    delete(name) {
      const key = String(name);
      entriesOf.set(this, entriesOf.get(this).filter(([n]) => n !== key));
    }
    get(name) {
      const found = entriesOf.get(this).find(([n]) => n === String(name));
      return found ? found[1] : null;
    }
    getAll(name) {
      return entriesOf.get(this).filter(([n]) => n === String(name)).map(([, v]) => v);
    }
    has(name) { return entriesOf.get(this).some(([n]) => n === String(name)); }
    forEach(callback, thisArg) {
      for (const [name, value] of [...entriesOf.get(this)]) callback.call(thisArg, value, name, this);
    }
    *entries() { yield* entriesOf.get(this).map(([n, v]) => [n, v]); }
    *keys() { for (const [n] of entriesOf.get(this)) yield n; }
    *values() { for (const [, v] of entriesOf.get(this)) yield v; }
    [Symbol.iterator]() { return this.entries(); }
  }

  // -- encodings ----------------------------------------------------------------------

  const escapeName = (s) => s.replace(/\r\n|\r|\n/g, "\r\n").replace(/"/g, "%22").replace(/\r\n/g, "%0D%0A");

  /** FormData -> { bytes, type } as multipart/form-data. */
  function encodeFormData(form) {
    const random = new Uint8Array(12);
    crypto.getRandomValues(random);
    const boundary = "----celldFormBoundary" + [...random].map((b) => b.toString(16).padStart(2, "0")).join("");
    const chunks = [];
    for (const [name, value] of entriesOf.get(form)) {
      let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(name)}"`;
      if (typeof value === "string") {
        chunks.push(web.utf8Encode(`${head}\r\n\r\n${value.replace(/\r\n|\r|\n/g, "\r\n")}\r\n`));
      } else {
        head += `; filename="${escapeName(value.name)}"\r\nContent-Type: ${value.type || "application/octet-stream"}\r\n\r\n`;
        chunks.push(web.utf8Encode(head), blobs.get(value).bytes, web.utf8Encode("\r\n"));
      }
    }
    chunks.push(web.utf8Encode(`--${boundary}--\r\n`));
    const bytes = new Blob(chunks);
    return { bytes: blobs.get(bytes).bytes, type: `multipart/form-data; boundary=${boundary}` };
  }

  function indexOf(bytes, needle, from) {
    outer: for (let i = from; i <= bytes.length - needle.length; i++) {
      for (let j = 0; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
      return i;
    }
    return -1;
  }

  function parameter(header, name) {
    const match = new RegExp(`;\\s*${name}\\*?=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]*))`, "i").exec(header);
    if (!match) return null;
    return match[1] !== undefined ? match[1].replace(/\\(.)/g, "$1") : match[2];
  }

  /** Body bytes + Content-Type -> FormData (urlencoded or multipart), or a TypeError. */
  function decodeFormData(bytes, contentType) {
    const type = String(contentType || "").toLowerCase();
    const form = new FormData();
    if (type.startsWith("application/x-www-form-urlencoded")) {
      for (const [name, value] of new URLSearchParams(web.utf8Decode(bytes))) form.append(name, value);
      return form;
    }
    if (!type.startsWith("multipart/form-data")) {
      throw new TypeError(`Unrecognized Content-Type header value. FormData can only parse the following MIME types: multipart/form-data, application/x-www-form-urlencoded`);
    }
    const boundary = parameter(contentType, "boundary");
    if (!boundary) throw new TypeError("multipart/form-data body has no boundary");
    const delimiter = web.utf8Encode(`--${boundary}`);
    let at = indexOf(bytes, delimiter, 0);
    if (at < 0) throw new TypeError("multipart/form-data body has no parts");
    for (;;) {
      at += delimiter.length;
      if (bytes[at] === 0x2d && bytes[at + 1] === 0x2d) break; // closing delimiter
      if (bytes[at] === 0x0d && bytes[at + 1] === 0x0a) at += 2;
      const headerEnd = indexOf(bytes, web.utf8Encode("\r\n\r\n"), at);
      if (headerEnd < 0) throw new TypeError("multipart/form-data part has no header end");
      const headers = web.utf8Decode(bytes.subarray(at, headerEnd)).split("\r\n");
      const next = indexOf(bytes, web.utf8Encode(`\r\n--${boundary}`), headerEnd + 4);
      if (next < 0) throw new TypeError("multipart/form-data body is not terminated");
      const content = bytes.slice(headerEnd + 4, next);
      let disposition = "", partType = "";
      for (const line of headers) {
        const colon = line.indexOf(":");
        const key = line.slice(0, colon).trim().toLowerCase();
        if (key === "content-disposition") disposition = line.slice(colon + 1).trim();
        if (key === "content-type") partType = line.slice(colon + 1).trim();
      }
      const name = parameter(disposition, "name");
      if (name === null) throw new TypeError("multipart/form-data part has no name");
      const filename = parameter(disposition, "filename");
      if (filename !== null) {
        form.append(name, new File([content], filename, { type: partType || "application/octet-stream" }));
      } else {
        form.append(name, web.utf8Decode(content));
      }
      at = next + 2;
    }
    return form;
  }

  for (const Class of [Blob, File, FormData]) {
    web.hideMethods(Class);
    web.setToStringTag(Class, Class.name);
    web.defineGlobal(Class.name, Class);
  }
  Object.assign(web, {
    blobBytes: (blob) => blobs.get(blob).bytes,
    encodeFormData,
    decodeFormData,
  });
})();
