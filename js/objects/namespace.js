// `env.MY_OBJECT`: a Durable Object namespace, its ids and its stubs.
//
// Ids are made here, synchronously, the way workerd makes them: 32 bytes shown as 64 hex
// digits; the first 16 are an HMAC-SHA-256 of the name (random for newUniqueId), the last
// 16 an HMAC of the first, both keyed by SHA-256("<worker>-<class>"). So the same name
// gives the same id in every isolate, across restarts and under `wrangler dev`, and
// idFromString() can tell an id of this namespace from any other string.
//
// A stub's calls are `do` requests to the host (celld/objects/manager.py): an RPC call
// carries its arguments structured-cloned (js/web/serialize.js) and gets back the result
// or the error the method threw, cloned the same way and rethrown here.
//
// A namespace of a class in another Worker of the session names that Worker in each call
// (celld/server/service.py routes it there). One of a Worker that is not running here
// ("not connected",
// celld/bindings/unconnected.py), makes ids as usual; as under `wrangler dev`, an RPC call
// through its stubs rejects with an Error and fetch() answers 503, both saying the Worker
// was not found.
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const web = globalThis.__celld_web;
  const { sha256, hmacSha256 } = web.digests;

  function hex(bytes) {
    let out = "";
    for (let i = 0; i < bytes.length; i++) out += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
    return out;
  }

  function idBytes(key, base) {
    const id = new Uint8Array(32);
    id.set(base.subarray(0, 16));
    id.set(hmacSha256(key, id.subarray(0, 16)).subarray(0, 16), 16);
    return id;
  }

  class DurableObjectId {
    #hex;
    #name;
    constructor(hexId, name) {
      this.#hex = hexId;
      this.#name = name;
    }
    get name() {
      return this.#name;
    }
    toString() {
      return this.#hex;
    }
    toJSON() {
      return this.#hex;
    }
    equals(other) {
      return other instanceof DurableObjectId && other.toString() === this.#hex;
    }
  }

  const RPC_RESERVED = new Set(["fetch", "connect", "id", "name", "then", "constructor"]);

  function unwrap(answer) {
    if (answer && typeof answer.e === "string") throw web.deserialize(answer.e);
    return web.deserialize(answer.v);
  }

  function makeStub(namespace, id) {
    const target = {
      get id() {
        return id;
      },
      get name() {
        return id.name;
      },
      async fetch(input, init) {
        const request = new Request(input, init);
        const hasBody = request.body !== null;
        const bytes = hasBody ? await web.consumeBody(request) : null;
        const answer = await namespace.send(id, {
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
          bytes: request.method === "HEAD" ? null : web.base64ToBytes(wire.body),
          guard: "immutable",
        });
      },
      connect() {
        throw new TypeError("celld does not support connect() on Durable Object stubs");
      },
    };
    return new Proxy(target, {
      get(t, property) {
        if (typeof property !== "string") return undefined;
        if (Object.prototype.hasOwnProperty.call(t, property)) return t[property];
        if (RPC_RESERVED.has(property)) return undefined;
        return (...args) => {
          let payload;
          try {
            payload = web.serialize(args);
          } catch (error) {
            return Promise.reject(error);
          }
          return namespace.send(id, { kind: "call", method: property, args: payload }).then(unwrap);
        };
      },
      set() {
        throw new TypeError("A Durable Object stub's properties cannot be set");
      },
    });
  }

  class DurableObjectNamespace {
    #cls;
    #key;
    #missing;
    #worker;
    constructor(cls, uniqueKey, missing, worker) {
      this.#cls = cls;
      this.#key = sha256(web.utf8Encode(uniqueKey));
      this.#missing = missing;
      this.#worker = worker;
    }

    /** @internal Send one call to the object with `id`. */
    send(id, fields) {
      if (this.#missing !== undefined) {
        if (fields.kind !== "fetch") return Promise.reject(new Error(this.#missing));
        const body = web.bytesToBase64(web.utf8Encode(this.#missing));
        const headers = [["content-type", "text/plain;charset=UTF-8"]];
        return Promise.resolve({ response: { status: 503, statusText: "Service Unavailable", headers, body } });
      }
      const target = { cls: this.#cls, id: id.toString(), name: id.name ?? null };
      if (this.#worker !== undefined) target.worker = this.#worker;
      return host.request("do", Object.assign(target, fields));
    }

    newUniqueId(options) {
      if (options && options.jurisdiction !== undefined) {
        throw new Error("Jurisdiction restrictions are not implemented in celld.");
      }
      const base = crypto.getRandomValues(new Uint8Array(16));
      return new DurableObjectId(hex(idBytes(this.#key, base)), undefined);
    }

    idFromName(name) {
      if (arguments.length === 0) throw new TypeError("idFromName(): 1 argument required, but only 0 present");
      name = String(name);
      const base = hmacSha256(this.#key, web.utf8Encode(name));
      return new DurableObjectId(hex(idBytes(this.#key, base)), name);
    }

    idFromString(text) {
      text = String(text);
      if (!/^[0-9a-fA-F]{64}$/.test(text)) throw new TypeError("Invalid Durable Object ID: must be 64 hex digits");
      const lower = text.toLowerCase();
      const base = new Uint8Array(16);
      for (let i = 0; i < 16; i++) base[i] = parseInt(lower.slice(i * 2, i * 2 + 2), 16);
      if (hex(idBytes(this.#key, base)) !== lower) {
        throw new TypeError("Durable Object ID is not valid for this namespace.");
      }
      return new DurableObjectId(lower, undefined);
    }

    get(id, options) {
      if (!(id instanceof DurableObjectId)) {
        throw new TypeError("get() takes a DurableObjectId from idFromName(), idFromString() or newUniqueId()");
      }
      if (!this.idFromString(id.toString()).equals(id)) {
        throw new TypeError("Durable Object ID is not valid for this namespace.");
      }
      return makeStub(this, id);
    }

    getByName(name, options) {
      return this.get(this.idFromName(name), options);
    }

    jurisdiction(name) {
      throw new Error("Jurisdiction restrictions are not implemented in celld.");
    }
  }

  globalThis.__celld_cloudflare.onEnv((message, env) => {
    for (const b of message.durable_objects || []) {
      env[b.binding] = new DurableObjectNamespace(b.cls, b.key, b.missing, b.worker);
    }
  });
  // Shared with the object side (js/objects/storage.js, object.js); hidden from user code.
  Object.defineProperty(globalThis, "__celld_objects", {
    value: { DurableObjectId }, configurable: false, enumerable: false, writable: false,
  });
})();
