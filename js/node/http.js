// node:http and node:https clients over the Worker's fetch(), as workerd's nodejs_compat
// provides them: request()/get() give a ClientRequest (headers, write/end, abort) whose
// 'response' is an IncomingMessage stream (status, headers, rawHeaders, body). The body
// written is sent when end() is called, and the response body is read whole before it is
// streamed to the listener (fetch has no half-open requests). The server side is partly
// there: createServer() gives a Server, but celld routes a Worker's requests only to its
// fetch handler, so listen() throws and says so.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const host = globalThis.__celld_host;
  const EventEmitter = modules["node:events"].default;
  const { Readable, Writable } = modules["node:stream"];
  const { Buffer } = globalThis.__celld_node.buffer;

  const STATUS_CODES = {"100":"Continue","101":"Switching Protocols","102":"Processing","103":"Early Hints","200":"OK","201":"Created","202":"Accepted","203":"Non-Authoritative Information","204":"No Content","205":"Reset Content","206":"Partial Content","207":"Multi-Status","208":"Already Reported","226":"IM Used","300":"Multiple Choices","301":"Moved Permanently","302":"Found","303":"See Other","304":"Not Modified","305":"Use Proxy","307":"Temporary Redirect","308":"Permanent Redirect","400":"Bad Request","401":"Unauthorized","402":"Payment Required","403":"Forbidden","404":"Not Found","405":"Method Not Allowed","406":"Not Acceptable","407":"Proxy Authentication Required","408":"Request Timeout","409":"Conflict","410":"Gone","411":"Length Required","412":"Precondition Failed","413":"Payload Too Large","414":"URI Too Long","415":"Unsupported Media Type","416":"Range Not Satisfiable","417":"Expectation Failed","418":"I'm a Teapot","421":"Misdirected Request","422":"Unprocessable Entity","423":"Locked","424":"Failed Dependency","425":"Too Early","426":"Upgrade Required","428":"Precondition Required","429":"Too Many Requests","431":"Request Header Fields Too Large","451":"Unavailable For Legal Reasons","500":"Internal Server Error","501":"Not Implemented","502":"Bad Gateway","503":"Service Unavailable","504":"Gateway Timeout","505":"HTTP Version Not Supported","506":"Variant Also Negotiates","507":"Insufficient Storage","508":"Loop Detected","509":"Bandwidth Limit Exceeded","510":"Not Extended","511":"Network Authentication Required"};
  const METHODS = ["ACL", "BIND", "CHECKOUT", "CONNECT", "COPY", "DELETE", "GET", "HEAD", "LINK", "LOCK", "M-SEARCH", "MERGE", "MKACTIVITY", "MKCALENDAR", "MKCOL", "MOVE", "NOTIFY", "OPTIONS", "PATCH", "POST", "PROPFIND", "PROPPATCH", "PURGE", "PUT", "QUERY", "REBIND", "REPORT", "SEARCH", "SOURCE", "SUBSCRIBE", "TRACE", "UNBIND", "UNLINK", "UNLOCK", "UNSUBSCRIBE"];
  const TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;

  function typeError(code, message) {
    const error = new TypeError(message);
    error.code = code;
    return error;
  }
  function validateHeaderName(name) {
    if (typeof name !== "string" || !TOKEN.test(name)) {
      throw typeError("ERR_INVALID_HTTP_TOKEN", `Header name must be a valid HTTP token ["${name}"]`);
    }
  }
  function validateHeaderValue(name, value) {
    if (value === undefined) throw typeError("ERR_HTTP_INVALID_HEADER_VALUE", `Invalid value "undefined" for header "${name}"`);
    if (/[^\t\x20-\x7e\x80-\xff]/.test(String(value))) throw typeError("ERR_INVALID_CHAR", `Invalid character in header content ["${name}"]`);
  }

  class Agent extends EventEmitter {
    constructor(options = {}) {
      super();
      this.options = { ...options };
      this.keepAlive = Boolean(options.keepAlive);
      this.maxSockets = options.maxSockets ?? Infinity;
      this.sockets = {};
      this.requests = {};
      this.freeSockets = {};
      this.defaultPort = 80;
      this.protocol = "http:";
    }
    destroy() {}
  }

  class IncomingMessage extends Readable {
    constructor(response) {
      super();
      this.statusCode = response.status;
      this.statusMessage = response.statusText || STATUS_CODES[response.status] || "";
      this.headers = {};
      this.rawHeaders = [];
      for (const [name, value] of response.headers) {
        this.rawHeaders.push(name, value);
        this.headers[name] = name in this.headers ? `${this.headers[name]}, ${value}` : value;
      }
      this.trailers = {};
      this.rawTrailers = [];
      this.httpVersion = "1.1";
      this.httpVersionMajor = 1;
      this.httpVersionMinor = 1;
      this.complete = false;
      this.url = response.url;
      this.aborted = false;
    }
    _read() {}
    setTimeout(ms, callback) { if (callback) this.once("timeout", callback); return this; }
  }

  /** The URL and fetch options a request's arguments describe. */
  function describe(protocol, input, options, callback) {
    if (typeof input === "string" || input instanceof URL) {
      const url = new URL(String(input));
      if (typeof options === "function") { callback = options; options = {}; }
      options = { protocol: url.protocol, hostname: url.hostname, port: url.port, path: url.pathname + url.search, ...(options || {}) };
      if (url.username || url.password) options.auth ??= `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    } else {
      callback = options;
      options = { ...(input || {}) };
    }
    const scheme = options.protocol ?? protocol;
    if (scheme !== protocol) {
      throw typeError("ERR_INVALID_PROTOCOL", `Protocol "${scheme}" not supported. Expected "${protocol}"`);
    }
    const hostname = options.hostname ?? (options.host ? String(options.host).replace(/:\d+$/, "") : "localhost");
    const port = options.port ? `:${options.port}` : "";
    const shownHost = hostname.includes(":") && !hostname.startsWith("[") ? `[${hostname}]` : hostname;
    const url = `${scheme}//${shownHost}${port}${options.path ?? "/"}`;
    return { url, options, callback };
  }

  class ClientRequest extends Writable {
    #headers = new Map();
    #chunks = [];
    #controller = new AbortController();
    #url;
    constructor(protocol, input, options, callback) {
      super();
      const described = describe(protocol, input, options, callback);
      this.#url = described.url;
      options = described.options;
      this.method = String(options.method ?? "GET").toUpperCase();
      this.path = options.path ?? "/";
      this.host = options.hostname ?? options.host ?? "localhost";
      this.protocol = protocol;
      this.aborted = false;
      this.reusedSocket = false;
      this.finished = false;
      for (const [name, value] of Object.entries(options.headers ?? {})) this.setHeader(name, value);
      if (options.auth && !this.hasHeader("authorization")) this.setHeader("authorization", `Basic ${Buffer.from(options.auth).toString("base64")}`);
      if (options.signal) options.signal.addEventListener("abort", () => this.destroy(options.signal.reason));
      if (typeof described.callback === "function") this.once("response", described.callback);
    }
    setHeader(name, value) {
      validateHeaderName(name);
      validateHeaderValue(name, value);
      this.#headers.set(name.toLowerCase(), [name, value]);
      return this;
    }
    getHeader(name) { return this.#headers.get(String(name).toLowerCase())?.[1]; }
    getHeaders() { const out = {}; for (const [key, [, value]] of this.#headers) out[key] = value; return out; }
    getHeaderNames() { return [...this.#headers.keys()]; }
    getRawHeaderNames() { return [...this.#headers.values()].map(([name]) => name); }
    hasHeader(name) { return this.#headers.has(String(name).toLowerCase()); }
    removeHeader(name) { this.#headers.delete(String(name).toLowerCase()); }
    flushHeaders() {}
    setTimeout(ms, callback) { if (callback) this.once("timeout", callback); return this; }
    setNoDelay() {}
    setSocketKeepAlive() {}
    abort() { this.aborted = true; this.destroy(); }
    _write(chunk, encoding, callback) {
      this.#chunks.push(typeof chunk === "string" ? Buffer.from(chunk, encoding) : chunk);
      callback();
    }
    _destroy(error, callback) {
      this.#controller.abort(error ?? new Error("socket hang up"));
      callback(error);
    }
    _final(callback) {
      this.finished = true;
      const headers = new Headers();
      for (const [, [name, value]] of this.#headers) {
        for (const one of Array.isArray(value) ? value : [value]) headers.append(name, String(one));
      }
      const body = this.#chunks.length && this.method !== "GET" && this.method !== "HEAD" ? Buffer.concat(this.#chunks) : undefined;
      const deliver = host.bindContext((error, response, bytes) => {
        if (error) {
          this.destroy(error);
          return;
        }
        const message = new IncomingMessage(response);
        if (bytes.length) message.push(Buffer.from(bytes));
        message.push(null);
        message.on("end", () => { message.complete = true; });
        this.emit("response", message);
        this.emit("close");
      });
      fetch(this.#url, { method: this.method, headers, body, redirect: "manual", signal: this.#controller.signal })
        .then(async (response) => deliver(null, response, new Uint8Array(await response.arrayBuffer())))
        .catch((error) => deliver(error instanceof Error ? error : new Error(String(error))));
      callback();
    }
  }

  class Server extends EventEmitter {
    constructor(options, listener) {
      super();
      if (typeof options === "function") listener = options;
      if (typeof listener === "function") this.on("request", listener);
      this.listening = false;
      this.timeout = 0;
      this.keepAliveTimeout = 5000;
      this.headersTimeout = 60000;
      this.requestTimeout = 300000;
    }
    listen() {
      const error = new Error("celld: a node:http server cannot listen: celld sends a Worker's requests to its fetch handler only (export default { fetch })");
      error.code = "ERR_METHOD_NOT_IMPLEMENTED";
      throw error;
    }
    close(callback) { if (typeof callback === "function") queueMicrotask(callback); return this; }
    address() { return null; }
    setTimeout() { return this; }
  }
  class OutgoingMessage extends Writable {}
  class ServerResponse extends OutgoingMessage {}

  function make(protocol, defaultPort) {
    const globalAgent = new Agent();
    globalAgent.defaultPort = defaultPort;
    globalAgent.protocol = protocol;
    const request = (input, options, callback) => new ClientRequest(protocol, input, options, callback);
    const get = (input, options, callback) => {
      const req = request(input, options, callback);
      req.end();
      return req;
    };
    return { Agent, Server, globalAgent, request, get, createServer: (options, listener) => new Server(options, listener) };
  }
  const http = {
    ...make("http:", 80), STATUS_CODES, METHODS, ClientRequest, IncomingMessage, OutgoingMessage, ServerResponse,
    validateHeaderName, validateHeaderValue, maxHeaderSize: 16384, setMaxIdleHTTPParsers() {},
  };
  const https = make("https:", 443);
  const namespace = (object) => Object.freeze(Object.assign(Object.create(null), object, { default: object }));
  modules["node:http"] = namespace(http);
  modules["node:https"] = namespace(https);
})();
