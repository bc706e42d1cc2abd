// `ctx.storage` of a Durable Object: the key-value API, the SQL API and alarms.
//
// Every operation is one synchronous call into the host (celld/objects/storage.py),
// which only object isolates have: the SQL API must answer at once, and a call that
// never yields also keeps other events out while it runs (the input gate). The
// key-value methods still return promises, as on Cloudflare. Values are structured-cloned
// (js/web/serialize.js) into the object's own SQLite file; what a turn writes is
// committed before anything the turn sends leaves the isolate (the output gate).
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;
  const raw = globalThis.__celld_do_storage; // only defined in object isolates
  if (typeof raw === "function") delete globalThis.__celld_do_storage;

  const MAX_GET_KEYS = 128;

  function call(op, fields) {
    if (typeof raw !== "function") throw new Error("celld: Durable Object storage used outside an object");
    const answer = JSON.parse(raw(JSON.stringify(Object.assign({ op }, fields))));
    if (answer.e !== undefined) throw host.reviveError(answer.e);
    return answer.v;
  }

  function settle(fn) {
    try {
      return Promise.resolve(fn());
    } catch (error) {
      return Promise.reject(error);
    }
  }

  function key(value) {
    if (typeof value !== "string") return String(value);
    return value;
  }

  const kv = {
    get(keys) {
      if (Array.isArray(keys)) {
        if (keys.length > MAX_GET_KEYS) throw new RangeError(`Cannot get more than ${MAX_GET_KEYS} keys at once.`);
        const found = call("get", { keys: keys.map(key) });
        const out = new Map();
        keys.forEach((k, i) => {
          if (found[i] !== null) out.set(key(k), web.deserialize(found[i]));
        });
        return out;
      }
      const [found] = call("get", { keys: [key(keys)] });
      return found === null ? undefined : web.deserialize(found);
    },
    put(k, value) {
      if (k !== null && typeof k === "object") {
        const entries = Object.entries(k).map(([name, v]) => [name, web.serialize(v)]);
        call("put", { entries });
        return;
      }
      if (value === undefined) throw new TypeError("put() called with undefined as the value");
      call("put", { entries: [[key(k), web.serialize(value)]] });
    },
    delete(keys) {
      if (Array.isArray(keys)) return call("delete", { keys: keys.map(key) });
      return call("delete", { keys: [key(keys)] }) > 0;
    },
    list(options = {}) {
      const fields = {};
      for (const name of ["start", "startAfter", "end", "prefix"]) {
        if (options[name] !== undefined) fields[name] = String(options[name]);
      }
      if (options.start !== undefined && options.startAfter !== undefined) {
        throw new TypeError("list() cannot be called with both start and startAfter values.");
      }
      if (options.reverse) fields.reverse = true;
      if (options.limit !== undefined) fields.limit = options.limit;
      const out = new Map();
      for (const [name, value] of call("list", fields)) out.set(name, web.deserialize(value));
      return out;
    },
  };

  function sqlValue(value) {
    if (value instanceof ArrayBuffer) return { b64: web.bytesToBase64(new Uint8Array(value)) };
    if (ArrayBuffer.isView(value)) {
      return { b64: web.bytesToBase64(new Uint8Array(value.buffer, value.byteOffset, value.byteLength)) };
    }
    if (typeof value === "bigint") return Number(value);
    return value === undefined ? null : value;
  }

  function jsValue(cell) {
    if (cell !== null && typeof cell === "object") {
      const bytes = web.base64ToBytes(cell.b64);
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    }
    return cell;
  }

  class SqlStorageCursor {
    #columns;
    #rows;
    #next = 0;
    #read;
    #written;
    constructor(answer) {
      this.#columns = answer.columns;
      this.#rows = answer.rows.map((row) => row.map(jsValue));
      this.#read = answer.read;
      this.#written = answer.written;
    }
    get columnNames() {
      return this.#columns.slice();
    }
    get rowsRead() {
      return this.#read;
    }
    get rowsWritten() {
      return this.#written;
    }
    #object(row) {
      const out = {};
      this.#columns.forEach((name, i) => {
        out[name] = row[i];
      });
      return out;
    }
    next() {
      if (this.#next >= this.#rows.length) return { done: true, value: undefined };
      return { done: false, value: this.#object(this.#rows[this.#next++]) };
    }
    toArray() {
      const out = [];
      while (this.#next < this.#rows.length) out.push(this.#object(this.#rows[this.#next++]));
      return out;
    }
    one() {
      const rest = this.#rows.length - this.#next;
      if (rest === 0) throw new Error("Expected exactly one result from SQL query, but got no results.");
      if (rest > 1) throw new Error("Expected exactly one result from SQL query, but got multiple results.");
      return this.#object(this.#rows[this.#next++]);
    }
    *raw() {
      while (this.#next < this.#rows.length) yield this.#rows[this.#next++].slice();
    }
    [Symbol.iterator]() {
      return this;
    }
  }

  class SqlStorage {
    exec(query, ...bindings) {
      return new SqlStorageCursor(call("sql", { query: String(query), bindings: bindings.map(sqlValue) }));
    }
    get databaseSize() {
      return call("size", {});
    }
    prepare() {
      throw new TypeError("celld does not support sql.prepare(); use sql.exec()");
    }
  }

  function transactionSync(closure) {
    call("txn.begin", {});
    let result;
    try {
      result = closure();
    } catch (error) {
      call("txn.rollback", {});
      throw error;
    }
    call("txn.commit", {});
    return result;
  }

  class DurableObjectTransaction {
    #rolledBack = false;
    get(keys) {
      return settle(() => kv.get(keys));
    }
    put(k, value) {
      return settle(() => kv.put(k, value));
    }
    delete(keys) {
      return settle(() => kv.delete(keys));
    }
    list(options) {
      return settle(() => kv.list(options));
    }
    rollback() {
      if (this.#rolledBack) return;
      this.#rolledBack = true;
      call("txn.rollback", {});
      call("txn.begin", {}); // the closure may go on; its later writes are dropped too
    }
    get rolledBack() {
      return this.#rolledBack;
    }
  }

  function alarmTime(value) {
    if (value instanceof Date) return value.getTime();
    if (typeof value === "number") return value;
    throw new TypeError("setAlarm() takes a Date or a number of milliseconds since the epoch");
  }

  class DurableObjectStorage {
    #sqlite;
    #sql = null;
    constructor(sqlite) {
      this.#sqlite = sqlite;
    }
    get(keys, options) {
      return settle(() => kv.get(keys));
    }
    put(k, value, options) {
      return settle(() => kv.put(k, value));
    }
    delete(keys, options) {
      return settle(() => kv.delete(keys));
    }
    list(options) {
      return settle(() => kv.list(options || {}));
    }
    deleteAll(options) {
      return settle(() => {
        call("deleteAll", {});
      });
    }
    async transaction(closure) {
      call("txn.begin", {});
      const txn = new DurableObjectTransaction();
      let result;
      try {
        result = await closure(txn);
      } catch (error) {
        call("txn.rollback", {});
        throw error;
      }
      if (txn.rolledBack) call("txn.rollback", {});
      else call("txn.commit", {});
      return result;
    }
    transactionSync(closure) {
      return transactionSync(closure);
    }
    sync() {
      return settle(() => call("sync", {}));
    }
    getAlarm(options) {
      return settle(() => call("alarm.get", {}));
    }
    setAlarm(when, options) {
      return settle(() => {
        call("alarm.set", { at: alarmTime(when) });
      });
    }
    deleteAlarm(options) {
      return settle(() => {
        call("alarm.delete", {});
      });
    }
    get sql() {
      if (!this.#sqlite) {
        throw new Error(
          "SQL is not enabled for this Durable Object class. Declare it in new_sqlite_classes of a migration in your wrangler config.",
        );
      }
      if (this.#sql === null) this.#sql = new SqlStorage();
      return this.#sql;
    }
    get kv() {
      return {
        get: (k) => kv.get(k),
        put: (k, v) => kv.put(k, v),
        delete: (k) => kv.delete(k),
        list: (options) => kv.list(options || {}).entries(),
      };
    }
  }

  globalThis.__celld_objects.DurableObjectStorage = DurableObjectStorage;
})();
