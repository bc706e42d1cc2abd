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
  const remote = globalThis.__celld_remote;
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

  function makeStub(namespace, id) {
    const send = (fields) => namespace.send(id, fields);
    const target = {
      get id() {
        return id;
      },
      get name() {
        return id.name;
      },
      fetch(input, init) {
        return remote.remoteFetch(send, input, init);
      },
      connect() {
        throw new TypeError("celld does not support connect() on Durable Object stubs");
      },
    };
    return remote.rpcProxy(target, send, RPC_RESERVED, "A Durable Object stub");
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
      if (this.#missing !== undefined) return remote.notConnected(this.#missing, fields);
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
      // this Worker's own class: also in `exports` from cloudflare:workers, as in workerd
      if (!b.missing && b.worker === undefined) globalThis.__celld_cloudflare.exports[b.cls] = env[b.binding];
    }
  });
  // Shared with the object side (js/objects/storage.js, object.js); hidden from user code.
  Object.defineProperty(globalThis, "__celld_objects", {
    value: { DurableObjectId }, configurable: false, enumerable: false, writable: false,
  });
})();
