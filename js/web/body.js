// Request and Response, sharing one body implementation.
//
// A body's source is kept as bytes (Uint8Array) when it is known up front; a
// ReadableStream given by user code is read when the body is consumed. Reading
// a body twice fails as in Workers.
"use strict";
(() => {
  const { JSONParse, JSONStringify, ObjectAssign, PromisePrototypeThen, SafeSet } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const bodies = new WeakMap(); // Request/Response -> body state
  const USED = "Body has already been used. It can only be used once. Use tee() first if you need to read it twice.";
  const NULL_BODY_STATUSES = new SafeSet([101, 103, 204, 205, 304]);
  const REDIRECT_STATUSES = new SafeSet([301, 302, 303, 307, 308]);
  const INTERNAL = Symbol("internal");

  /** Body init -> {bytes|stream|promise, contentType} (null for no body). */
  function extractBody(init) {
    if (init === null || init === undefined) return null;
    if (typeof init === "string") return { bytes: web.utf8Encode(init), type: "text/plain;charset=UTF-8" };
    if (init instanceof URLSearchParams) {
      return { bytes: web.utf8Encode(init.toString()), type: "application/x-www-form-urlencoded;charset=UTF-8" };
    }
    if (init instanceof Blob) return { bytes: web.blobBytes(init).slice(), type: init.type || null };
    if (init instanceof FormData) return web.encodeFormData(init);
    const bytes = web.bufferSourceBytes(init);
    if (bytes) return { bytes, type: null };
    if (init instanceof ReadableStream) {
      if (web.streamLocked(init) || web.streamDisturbed(init)) {
        throw new TypeError("This ReadableStream is disturbed (has already been read from) or locked.");
      }
      return { stream: init, type: null };
    }
    return { bytes: web.utf8Encode(String(init)), type: "text/plain;charset=UTF-8" };
  }

  function newBody(source) {
    return { source, used: false, view: null };
  }

  function body(self) {
    const b = bodies.get(self);
    if (!b) throw new TypeError("Illegal invocation");
    return b;
  }

  function isDisturbed(b) {
    if (b.used) return true;
    const stream = b.view || (b.source && b.source.stream);
    return Boolean(stream && web.streamDisturbed(stream));
  }

  /** Take the whole body as bytes, marking it used. */
  async function consume(self) {
    const b = body(self);
    if (isDisturbed(b)) throw new TypeError(USED);
    b.used = true;
    const source = b.source;
    if (source === null) return new Uint8Array(0);
    if (b.view) return web.collectStream(b.view);
    if (source.bytes) return source.bytes;
    if (source.stream) return web.collectStream(source.stream);
    return await source.promise;
  }

  /** A copy of the body for clone(): stream sources are read once and shared. */
  function cloneSource(b) {
    if (isDisturbed(b)) throw new TypeError(USED);
    const source = b.source;
    if (source === null) return null;
    if (source.bytes) return { bytes: source.bytes.slice() };
    if (source.stream && !b.view) {
      const promise = web.collectStream(source.stream);
      promise.catch(() => {});
      b.source = { promise };
      return { promise };
    }
    return { promise: PromisePrototypeThen(b.source.promise, (bytes) => bytes.slice()) };
  }

  function defineBodyMethods(Class) {
    Object.defineProperties(Class.prototype, {
      body: {
        configurable: true,
        get() {
          const b = body(this);
          if (b.source === null) return null;
          if (!b.view) {
            const source = b.source;
            if (source.stream) b.view = source.stream;
            else if (source.bytes) b.view = web.streamFromBytes(source.bytes);
            else {
              b.view = new ReadableStream({
                async start(controller) {
                  const bytes = await source.promise;
                  if (bytes.length) controller.enqueue(bytes);
                  controller.close();
                },
              });
            }
          }
          return b.view;
        },
      },
      bodyUsed: {
        configurable: true,
        get() {
          return isDisturbed(body(this));
        },
      },
      arrayBuffer: {
        configurable: true,
        writable: true,
        value: async function arrayBuffer() {
          const bytes = await consume(this);
          return bytes.buffer.byteLength === bytes.byteLength ? bytes.buffer : bytes.slice().buffer;
        },
      },
      bytes: {
        configurable: true,
        writable: true,
        value: async function bytes() {
          return consume(this);
        },
      },
      text: {
        configurable: true,
        writable: true,
        value: async function text() {
          const bytes = await consume(this);
          const decoded = web.utf8Decode(bytes);
          return decoded.charCodeAt(0) === 0xfeff ? decoded.slice(1) : decoded;
        },
      },
      json: {
        configurable: true,
        writable: true,
        value: async function json() {
          return JSONParse(await this.text());
        },
      },
      blob: {
        configurable: true,
        writable: true,
        value: async function blob() {
          const bytes = await consume(this);
          return new Blob([bytes], { type: this.headers.get("content-type") || "" });
        },
      },
      formData: {
        configurable: true,
        writable: true,
        value: async function formData() {
          const bytes = await consume(this);
          return web.decodeFormData(bytes, this.headers.get("content-type"));
        },
      },
    });
  }

  // -- Request ------------------------------------------------------------------------

  const FORBIDDEN_METHODS = new SafeSet(["CONNECT", "TRACE", "TRACK"]);
  const NORMALIZED_METHODS = new SafeSet(["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH"]);
  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  const requests = new WeakMap();

  function normalizeMethod(method) {
    const m = String(method);
    if (!TOKEN.test(m)) throw new TypeError(`Invalid HTTP method string: ${m}`);
    const upper = m.toUpperCase();
    if (FORBIDDEN_METHODS.has(upper)) throw new TypeError(`Forbidden HTTP method: ${m}`);
    // Workers upper-cases every method it knows (PATCH too), unlike the fetch spec.
    return NORMALIZED_METHODS.has(upper) ? upper : m;
  }

  class Request {
    constructor(input, init = {}) {
      if (arguments.length === 0) throw new TypeError("Request: 1 argument required, but only 0 present");
      init = init === null || init === undefined ? {} : init;
      let from = null;
      if (input instanceof Request) from = requests.get(input);
      const r = {
        method: from ? from.method : "GET",
        url: from ? from.url : null,
        headers: null,
        redirect: from ? from.redirect : "follow",
        signal: null,
        cf: from ? from.cf : undefined,
        integrity: from ? from.integrity : "",
        keepalive: from ? from.keepalive : false,
      };
      if (!from) {
        try {
          r.url = new URL(String(input)).href;
        } catch {
          throw new TypeError(`Invalid URL: ${String(input)}`);
        }
      }
      if (init.method !== undefined) r.method = normalizeMethod(init.method);
      if (init.redirect !== undefined) {
        const redirect = String(init.redirect);
        if (!["follow", "manual", "error"].includes(redirect)) {
          throw new TypeError(`Invalid redirect value, must be one of "follow", "manual" or "error". Got: ${redirect}`);
        }
        r.redirect = redirect;
      }
      if (init.cf !== undefined) r.cf = init.cf;
      if (init.integrity !== undefined) r.integrity = String(init.integrity);
      if (init.keepalive !== undefined) r.keepalive = Boolean(init.keepalive);
      const parentSignal = "signal" in init ? init.signal : from ? from.signal : null;
      if (parentSignal !== null && parentSignal !== undefined && !(parentSignal instanceof AbortSignal)) {
        throw new TypeError("Request: signal must be an AbortSignal");
      }
      // A request without a parent signal can never be aborted (nothing holds a controller
      // for it): its signal is made when first asked for, not for every request served.
      r.signal = parentSignal ? web.followSignal(parentSignal) : null;
      r.headers = new Headers(init.headers !== undefined ? init.headers : from ? from.headers : undefined);

      let source = null;
      let contentType = null;
      if (init.body !== undefined && init.body !== null) {
        const extracted = extractBody(init.body);
        source = extracted.bytes ? { bytes: extracted.bytes } : { stream: extracted.stream };
        contentType = extracted.type;
      } else if (init.body === undefined && from && input instanceof Request) {
        const inputBody = body(input);
        if (inputBody.source !== null) {
          if (isDisturbed(inputBody)) throw new TypeError(USED);
          source = inputBody.view ? { stream: inputBody.view } : inputBody.source;
          inputBody.used = true; // the body moves to the new request
        }
      }
      if (source !== null && (r.method === "GET" || r.method === "HEAD")) {
        throw new TypeError("Request with a GET or HEAD method cannot have a body.");
      }
      if (contentType && !r.headers.has("content-type")) r.headers.set("content-type", contentType);
      requests.set(this, r);
      bodies.set(this, newBody(source));
    }

    get method() { return requests.get(this).method; }
    get url() { return requests.get(this).url; }
    get headers() { return requests.get(this).headers; }
    get redirect() { return requests.get(this).redirect; }
    get signal() {
      const r = requests.get(this);
      if (r.signal === null) r.signal = web.followSignal(null);
      return r.signal;
    }
    get cf() { return requests.get(this).cf; }
    get integrity() { return requests.get(this).integrity; }
    get keepalive() { return requests.get(this).keepalive; }
    get fetcher() { return null; }

    clone() {
      const r = requests.get(this);
      const copy = new Request(this.url, {
        method: r.method, headers: r.headers, redirect: r.redirect, signal: r.signal, cf: r.cf,
      });
      bodies.set(copy, newBody(cloneSource(body(this))));
      return copy;
    }
  }
  defineBodyMethods(Request);

  // -- Response -----------------------------------------------------------------------

  const responses = new WeakMap();

  function checkStatusText(text) {
    if (/[^\t\x20-\x7e\x80-\xff]/.test(text)) throw new TypeError(`Invalid statusText: "${text}"`);
    return text;
  }

  class Response {
    constructor(bodyInit = null, init = {}, internal = undefined) {
      if (internal === INTERNAL) return; // filled in by makeResponse
      init = init === null || init === undefined ? {} : init;
      const status = init.status === undefined ? 200 : Number(init.status);
      const webSocket = init.webSocket === undefined || init.webSocket === null ? null : init.webSocket;
      if (webSocket !== null && !web.isSocket(webSocket)) {
        throw new TypeError("Failed to construct 'Response': webSocket must be a WebSocket");
      }
      if (webSocket !== null && status !== 101) {
        throw new RangeError(`Responses with a webSocket must have status 101. Got: ${init.status}`);
      }
      if (webSocket === null && (!Number.isInteger(status) || status < 200 || status > 599)) {
        throw new RangeError(`Responses may only be constructed with status codes in the range 200 to 599, inclusive.`);
      }
      const statusText = init.statusText === undefined ? "" : checkStatusText(String(init.statusText));
      const headers = new Headers(init.headers);
      let source = null;
      if (bodyInit !== null && bodyInit !== undefined) {
        if (NULL_BODY_STATUSES.has(status)) {
          throw new TypeError(`Response with null body status (${status}) cannot have a body.`);
        }
        const extracted = extractBody(bodyInit);
        source = extracted.bytes ? { bytes: extracted.bytes } : { stream: extracted.stream };
        if (extracted.type && !headers.has("content-type")) headers.set("content-type", extracted.type);
      }
      responses.set(this, { status, statusText, headers, type: "default", url: "", redirected: false, webSocket });
      bodies.set(this, newBody(source));
    }

    static error() {
      return makeResponse({ status: 0, statusText: "", headers: [], bytes: null, type: "error" });
    }

    static redirect(url, status = 302) {
      const code = Number(status);
      if (!REDIRECT_STATUSES.has(code)) throw new RangeError(`Invalid redirect status code: ${status}`);
      let location;
      try {
        location = new URL(String(url)).href;
      } catch {
        throw new TypeError(`Invalid URL: ${String(url)}`);
      }
      return makeResponse({ status: code, statusText: "", headers: [["location", location]], bytes: null, guard: "immutable" });
    }

    static json(data, init = {}) {
      const text = JSONStringify(data);
      if (text === undefined) throw new TypeError("Response.json: the value cannot be converted to JSON");
      const headers = new Headers(init && init.headers);
      if (!headers.has("content-type")) headers.set("content-type", "application/json");
      return new Response(text, ObjectAssign({}, init, { headers }));
    }

    get status() { return responses.get(this).status; }
    get statusText() { return responses.get(this).statusText; }
    get ok() {
      const status = responses.get(this).status;
      return status >= 200 && status <= 299;
    }
    get headers() { return responses.get(this).headers; }
    get type() { return responses.get(this).type; }
    get url() { return responses.get(this).url; }
    get redirected() { return responses.get(this).redirected; }
    get webSocket() { return responses.get(this).webSocket || null; }
    get cf() { return undefined; }

    clone() {
      const r = responses.get(this);
      const copy = new Response(null, {}, INTERNAL);
      const headers = web.headersFrom(r.headers);
      web.setHeadersGuard(headers, r.headersGuard || "none");
      responses.set(copy, ObjectAssign({}, r, { headers }));
      bodies.set(copy, newBody(cloneSource(body(this))));
      return copy;
    }
  }
  defineBodyMethods(Response);

  /** A Response with any status (fetch results, Response.error/redirect); its body is
   * `bytes`, or `stream` (a body the host streams in). */
  function makeResponse({ status, statusText, headers, bytes, stream = null, url = "", redirected = false, type = "default", guard = "none", webSocket = null }) {
    const response = new Response(null, {}, INTERNAL);
    const h = new Headers(headers);
    web.setHeadersGuard(h, guard);
    responses.set(response, { status, statusText, headers: h, headersGuard: guard, type, url, redirected, webSocket });
    let source = null;
    if (!NULL_BODY_STATUSES.has(status)) {
      if (stream !== null) source = { stream };
      else if (bytes !== null && bytes !== undefined) source = { bytes };
    }
    bodies.set(response, newBody(source));
    return response;
  }

  for (const Class of [Request, Response]) {
    web.hideMethods(Class);
    web.setToStringTag(Class, Class.name);
    web.defineGlobal(Class.name, Class);
  }

  // -- the wire format the server glue uses -------------------------------------------------

  /** {method, url, headers: [[k, v]], body: base64|null, stream?, cf?} -> Request; with
   * `stream` (a host source's id) the body is read from the host as the Worker consumes it
   * (js/web/hoststreams.js), so it is only held in the isolate as far as the Worker reads. */
  function requestFromWire(wire) {
    const method = String(wire.method || "GET").toUpperCase();
    const bodyless = method === "GET" || method === "HEAD";
    const hasBody = wire.body !== null && wire.body !== undefined && !bodyless;
    const init = { method, headers: wire.headers || [] };
    if (typeof wire.stream === "string" && !bodyless) init.body = web.fromHost(wire.stream);
    else if (hasBody) init.body = web.base64ToBytes(wire.body);
    if (wire.cf !== undefined) init.cf = wire.cf;
    return new Request(wire.url, init);
  }

  /** Response -> {status, statusText, headers: [[k, v]], body: base64} (body "" when null). */
  async function responseToWire(response) {
    if (!(response instanceof Response)) {
      throw new TypeError("Incorrect type for the 'fetch' handler's return value: expected a Response");
    }
    const r = responses.get(response);
    const b = body(response);
    const bytes = b.source === null ? new Uint8Array(0) : await consume(response);
    const wire = {
      status: r.status,
      statusText: r.statusText,
      headers: web.headerList(r.headers),
      body: web.bytesToBase64(bytes),
    };
    if (r.webSocket) wire.webSocket = web.socketId(r.webSocket);
    return wire;
  }

  /** Bodies of at most this size go in one message; larger ones stream. */
  const INLINE_BYTES = 64 * 1024;

  /**
   * A body for the host, marking it used: null (no body), {b64} (small, in the message),
   * {source: id, length} (a host source nothing read: the host takes it back whole) or
   * {pipe: id, length?} with `pump(owner)`, to call once the message naming the pipe is
   * queued: it streams the body there and settles when all of it was accepted.
   */
  function bodyForHost(self) {
    const b = body(self);
    if (b.source === null) return null;
    if (isDisturbed(b)) throw new TypeError(USED);
    b.used = true;
    const source = b.source;
    let stream = b.view || source.stream || null;
    let length;
    if (stream === null && source.bytes) {
      if (source.bytes.length <= INLINE_BYTES) return { b64: web.bytesToBase64(source.bytes) };
      stream = web.streamFromBytes(source.bytes);
      length = source.bytes.length;
    } else if (stream === null) {
      stream = new ReadableStream({
        async start(controller) {
          const bytes = await source.promise;
          if (bytes.length) controller.enqueue(bytes);
          controller.close();
        },
      });
    } else {
      const taken = web.takeHostSource(stream);
      if (taken !== null) return { source: taken.id, length: taken.length };
    }
    const pipe = web.openPipe();
    return {
      pipe, length, pump: (owner) => web.pumpToHost(pipe, stream, owner),
    };
  }

  /** Response -> {wire: {status, statusText, headers, body?|pipe?|source?, length?}, pump}:
   * what the `respond` message carries, and for a streamed body the pump to start once it
   * is queued (see bodyForHost). */
  function responseToHost(response) {
    if (!(response instanceof Response)) {
      throw new TypeError("Incorrect type for the 'fetch' handler's return value: expected a Response");
    }
    const r = responses.get(response);
    const out = bodyForHost(response);
    const wire = { status: r.status, statusText: r.statusText, headers: web.headerList(r.headers) };
    if (r.webSocket) wire.webSocket = web.socketId(r.webSocket);
    if (out === null) {
      wire.body = "";
      return { wire, pump: null };
    }
    if (out.b64 !== undefined) {
      wire.body = out.b64;
      return { wire, pump: null };
    }
    if (out.length !== undefined && out.length !== null) wire.length = out.length;
    if (out.source !== undefined) {
      wire.source = out.source;
      return { wire, pump: null };
    }
    wire.pipe = out.pipe;
    return { wire, pump: out.pump };
  }

  ObjectAssign(web, {
    requestFromWire, responseToWire, responseToHost, bodyForHost, makeResponse, consumeBody: consume,
    NULL_BODY_STATUSES,
  });
})();
