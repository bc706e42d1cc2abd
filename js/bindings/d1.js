// `env.DB`: a D1 database. Statements are prepared and bound in JS (binding types are
// checked here, as workerd checks them before anything reaches the database) and run by
// the host (celld/bindings/d1.py), which answers with columns, rows and meta.
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const b = globalThis.__celld_bindings;

  function bindValue(value) {
    if (value === null) return null;
    switch (typeof value) {
      case "number":
      case "string":
        return value;
      case "boolean":
        return value ? 1 : 0;
      case "object": {
        if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) {
          const bytes = value instanceof ArrayBuffer
            ? new Uint8Array(value)
            : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
          return { $blob: b.toBase64(bytes) };
        }
        if (Array.isArray(value) && value.every((n) => Number.isInteger(n) && n >= 0 && n < 256)) {
          return { $blob: b.toBase64(Uint8Array.from(value)) };
        }
        break;
      }
      default:
        break;
    }
    throw new Error(`D1_TYPE_ERROR: Type '${typeof value}' not supported for value '${String(value)}'`);
  }

  /** A result column value: blobs come back as arrays of byte values, as D1 returns them. */
  function columnValue(value) {
    if (value !== null && typeof value === "object" && "$blob" in value) {
      return Array.from(b.fromBase64(value.$blob));
    }
    return value;
  }

  function rowObject(columns, row) {
    const out = {};
    for (let i = 0; i < columns.length; i++) out[columns[i]] = columnValue(row[i]);
    return out;
  }

  function meta(answer) {
    const m = answer.meta;
    return {
      served_by: "celld",
      served_by_primary: true,
      total_attempts: 1,
      timings: { sql_duration_ms: m.duration },
      duration: m.duration,
      changes: m.changes,
      last_row_id: m.last_row_id,
      changed_db: m.changed_db,
      size_after: m.size_after,
      rows_read: m.rows_read,
      rows_written: m.rows_written,
    };
  }

  function resultOf(answer) {
    return {
      success: true,
      meta: meta(answer),
      results: answer.rows.map((row) => rowObject(answer.columns, row)),
    };
  }

  function wire(statement) {
    if (!(statement instanceof D1PreparedStatement)) {
      throw new TypeError("D1 batch() takes an array of D1PreparedStatement");
    }
    return statement[STATEMENT];
  }

  const STATEMENT = Symbol("statement");

  class D1PreparedStatement {
    #db;
    constructor(db, sql, params) {
      this.#db = db;
      Object.defineProperty(this, STATEMENT, { value: { sql, params } });
    }
    bind(...values) {
      return new D1PreparedStatement(this.#db, this[STATEMENT].sql, values.map(bindValue));
    }
    async #run() {
      const [answer] = await this.#db.query([this[STATEMENT]], false);
      return answer;
    }
    async first(column) {
      const answer = await this.#run();
      if (answer.rows.length === 0) return null;
      const row = rowObject(answer.columns, answer.rows[0]);
      if (column === undefined) return row;
      if (!(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${column})`);
      return row[column];
    }
    async all() {
      return resultOf(await this.#run());
    }
    async run() {
      return resultOf(await this.#run());
    }
    async raw(options) {
      const answer = await this.#run();
      const rows = answer.rows.map((row) => row.map(columnValue));
      if (options && options.columnNames) return [answer.columns.slice(), ...rows];
      return rows;
    }
  }

  class Connection {
    #id;
    constructor(id) {
      this.#id = id;
    }
    query(statements, batch) {
      return host.request("d1", { id: this.#id, method: "query", statements, batch });
    }
    exec(sql) {
      return host.request("d1", { id: this.#id, method: "exec", sql });
    }
  }

  class D1DatabaseSession {
    #connection;
    #bookmark;
    constructor(connection, bookmark) {
      this.#connection = connection;
      this.#bookmark = bookmark;
    }
    prepare(query) {
      return new D1PreparedStatement(this.#connection, String(query), []);
    }
    async batch(statements) {
      const answers = await this.#connection.query(Array.from(statements, wire), true);
      return answers.map(resultOf);
    }
    getBookmark() {
      return this.#bookmark;
    }
  }

  class D1Database {
    #connection;
    constructor(id) {
      this.#connection = new Connection(id);
    }
    prepare(query) {
      if (typeof query !== "string") throw new TypeError("D1 prepare() takes a string of SQL");
      return new D1PreparedStatement(this.#connection, query, []);
    }
    async batch(statements) {
      if (!Array.isArray(statements)) throw new TypeError("D1 batch() takes an array of statements");
      if (statements.length === 0) throw new Error("D1_ERROR: No SQL statements detected.");
      const answers = await this.#connection.query(statements.map(wire), true);
      return answers.map(resultOf);
    }
    async exec(query) {
      return this.#connection.exec(String(query));
    }
    withSession(constraintOrBookmark) {
      // One local database: every session reads its own writes. The bookmark is opaque.
      const bookmark = typeof constraintOrBookmark === "string"
        && !constraintOrBookmark.startsWith("first-") ? constraintOrBookmark : null;
      return new D1DatabaseSession(this.#connection, bookmark);
    }
    async dump() {
      throw new Error("D1_DUMP_ERROR: dump() is deprecated on D1 and not provided by celld");
    }
  }

  globalThis.__celld_cloudflare.onEnv((message, env) => {
    for (const binding of message.d1 || []) env[binding.binding] = new D1Database(binding.id);
  });
})();
