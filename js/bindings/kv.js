// `env.MY_KV`: a KV namespace. Each method is one `kv` request to the host
// (celld/bindings/kv.py keeps the data and enforces Cloudflare's limits).
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const b = globalThis.__celld_bindings;

  const MIN_CACHE_TTL = 30;

  function readOptions(options, method) {
    if (typeof options === "string") return { type: options };
    if (options === undefined || options === null) return {};
    if (typeof options !== "object") throw new TypeError(`KV ${method}: options must be a string or an object`);
    return options;
  }

  function parseMetadata(text) {
    return text === null || text === undefined ? null : JSON.parse(text);
  }

  class KVNamespace {
    #id;
    constructor(id) {
      this.#id = id;
    }

    #call(method, fields) {
      return host.request("kv", Object.assign({ id: this.#id, method }, fields));
    }

    async #get(key, options, withMetadata) {
      const opts = readOptions(options, "GET");
      const type = opts.type === undefined ? "text" : opts.type;
      if (opts.cacheTtl !== undefined && Number(opts.cacheTtl) < MIN_CACHE_TTL) {
        // Accepted and otherwise unused: there is no edge cache in front of local KV.
        throw new Error(`KV ${Array.isArray(key) ? "GET_BULK" : "GET"} failed: 400 Invalid cache_ttl of ${opts.cacheTtl}. Cache TTL must be at least ${MIN_CACHE_TTL}.`);
      }
      if (Array.isArray(key)) {
        if (type !== "text" && type !== "json") {
          throw new Error(`KV GET_BULK failed: 400 "${type}" is not a valid type. Use "json" or "text"`);
        }
        if (key.length === 0) throw new Error("KV GET_BULK failed: 400 You must request a minimum of 1 key");
        const found = await this.#call("get", { keys: key.map(String), bulk: true });
        const out = new Map();
        for (const name of key) {
          const entry = found[String(name)];
          if (!entry) {
            out.set(name, null);
            continue;
          }
          let value;
          try {
            value = b.wireAs(entry.value, type, "KV GET_BULK");
          } catch (error) {
            if (!(error instanceof SyntaxError)) throw error;
            throw new Error("KV GET_BULK failed: 400 At least one of the requested keys corresponds to a non-json value");
          }
          out.set(name, withMetadata ? { value, metadata: parseMetadata(entry.metadata) } : value);
        }
        return out;
      }
      if (typeof key !== "string") key = String(key);
      const found = await this.#call("get", { keys: [key], bulk: false });
      const entry = found[key];
      if (!entry) return withMetadata ? { value: null, metadata: null, cacheStatus: null } : null;
      const value = b.wireAs(entry.value, type, null);
      if (!withMetadata) return value;
      return { value, metadata: parseMetadata(entry.metadata), cacheStatus: null };
    }

    get(key, options) {
      return this.#get(key, options, false);
    }

    getWithMetadata(key, options) {
      return this.#get(key, options, true);
    }

    async put(key, value, options) {
      if (typeof key !== "string") key = String(key);
      const opts = options === undefined || options === null ? {} : options;
      if (typeof value === "object" && value !== null && !(value instanceof ArrayBuffer)
        && !ArrayBuffer.isView(value) && !(value instanceof ReadableStream)) {
        throw new TypeError(
          "KV put() accepts only strings, ArrayBuffers, ArrayBufferViews, and ReadableStreams as values.",
        );
      }
      // Other primitives are stored as their string form, as workerd does.
      if (typeof value !== "object" || value === null) value = String(value);
      const fields = { key, value: await b.toWire(value, "KV PUT") };
      if (opts.expiration !== undefined) fields.expiration = opts.expiration;
      if (opts.expirationTtl !== undefined) fields.expirationTtl = opts.expirationTtl;
      if (opts.metadata !== undefined && opts.metadata !== null) {
        fields.metadata = JSON.stringify(opts.metadata);
      }
      await this.#call("put", fields);
    }

    async delete(key) {
      if (typeof key !== "string") key = String(key);
      await this.#call("delete", { key });
    }

    async list(options) {
      const opts = options === undefined || options === null ? {} : options;
      const fields = {};
      if (opts.prefix !== undefined && opts.prefix !== null) fields.prefix = String(opts.prefix);
      if (opts.limit !== undefined) fields.limit = opts.limit;
      if (opts.cursor !== undefined && opts.cursor !== null) fields.cursor = String(opts.cursor);
      const answer = await this.#call("list", fields);
      const keys = answer.keys.map((k) => {
        const out = { name: k.name };
        if (k.expiration !== undefined) out.expiration = k.expiration;
        if (k.metadata !== undefined) out.metadata = JSON.parse(k.metadata);
        return out;
      });
      const result = { keys, list_complete: answer.list_complete, cacheStatus: null };
      if (answer.cursor !== undefined) result.cursor = answer.cursor;
      return result;
    }
  }

  globalThis.__celld_cloudflare.onEnv((message, env) => {
    for (const binding of message.kv || []) env[binding.binding] = new KVNamespace(binding.id);
  });
})();
