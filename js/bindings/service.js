// `env.MY_SERVICE`: a service binding, another Worker of the session (or this one) called
// through `fetch()` or RPC methods, as workerd's Fetcher does.
//
// Each call is one `svc` request to the host (celld/server/service.py op_service), served by
// an isolate of the bound Worker (js/cloudflare/worker_entry.js): fetch() carries the
// request and gets the response back whole; an RPC call carries its arguments
// structured-cloned (js/web/serialize.js) and gets back the result, or the error the method
// threw, cloned the same way and rethrown here.
//
// A binding to a Worker that is not running here ("not connected",
// celld/bindings/unconnected.py) fails as under `wrangler dev`: an RPC call rejects with an
// Error and fetch() answers 503, both saying the Worker was not found.
//
// The stub's pieces (fetch over the host, RPC methods, the not-connected answer) are shared
// with Durable Object stubs (js/objects/namespace.js) as `__celld_remote`.
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const web = globalThis.__celld_web;
  const { ObjectAssign, ObjectPrototypeHasOwnProperty, SafeSet, TypeError } = globalThis.__celld_primordials;

  const RESERVED = new SafeSet(["then", "constructor", "connect"]);

  function unwrap(answer) {
    if (answer && typeof answer.e === "string") throw web.deserialize(answer.e);
    return web.deserialize(answer.v);
  }

  /** wrangler dev's answer to a call through a binding whose Worker is not running. */
  function notConnected(missing, fields) {
    if (fields.kind !== "fetch") return Promise.reject(new Error(missing));
    const body = web.bytesToBase64(web.utf8Encode(missing));
    const headers = [["content-type", "text/plain;charset=UTF-8"]];
    return Promise.resolve({ response: { status: 503, statusText: "Service Unavailable", headers, body } });
  }

  /** fetch(input, init) through `send({kind: "fetch", request})`. */
  async function remoteFetch(send, input, init) {
    const request = new Request(input, init);
    const bytes = request.body !== null ? await web.consumeBody(request) : null;
    const answer = await send({
      kind: "fetch",
      request: {
        method: request.method,
        url: request.url,
        headers: web.headerList(request.headers),
        body: bytes === null ? null : web.bytesToBase64(bytes),
      },
    });
    if (answer.e !== undefined) throw web.deserialize(answer.e);
    const wire = answer.response;
    return web.makeResponse({
      status: wire.status,
      statusText: wire.statusText,
      headers: wire.headers,
      bytes: request.method === "HEAD" || wire.body === null ? null : web.base64ToBytes(wire.body),
      guard: "immutable",
      // a Durable Object's 101 answer carries the client end of its WebSocket
      webSocket: wire.webSocket === undefined ? null : web.adoptSocket(wire.webSocket),
    });
  }

  /** A stub: `target`'s own properties, and any other name an RPC method through `send`. */
  function rpcProxy(target, send, reserved, what) {
    return new Proxy(target, {
      get(t, property) {
        if (typeof property !== "string") return undefined;
        if (ObjectPrototypeHasOwnProperty(t, property)) return t[property];
        if (reserved.has(property)) return undefined;
        return (...args) => {
          let payload;
          try {
            payload = web.serialize(args);
          } catch (error) {
            return Promise.reject(error);
          }
          return send({ kind: "call", method: property, args: payload }).then(unwrap);
        };
      },
      set() {
        throw new TypeError(`${what}'s properties cannot be set`);
      },
    });
  }

  function makeService(spec) {
    const base = { service: spec.service, entrypoint: spec.entrypoint ?? null };
    const missing = typeof spec.missing === "string" ? spec.missing : undefined;
    const send = (fields) => missing !== undefined
      ? notConnected(missing, fields)
      : host.request("svc", ObjectAssign({}, base, fields));
    const target = {
      fetch(input, init) {
        return remoteFetch(send, input, init);
      },
      connect() {
        throw new TypeError("celld does not support connect() on service bindings");
      },
    };
    return rpcProxy(target, send, RESERVED, "A service binding");
  }

  globalThis.__celld_cloudflare.onEnv((message, env) => {
    for (const spec of message.services || []) env[spec.binding] = makeService(spec);
  });

  Object.defineProperty(globalThis, "__celld_remote", {
    value: Object.freeze({ notConnected, remoteFetch, rpcProxy }),
    configurable: false, enumerable: false, writable: false,
  });
})();
