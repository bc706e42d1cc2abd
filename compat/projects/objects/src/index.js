import { DurableObject, WorkflowEntrypoint } from "cloudflare:workers";

export class Counter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.loaded = 0;
    ctx.blockConcurrencyWhile(async () => {
      this.loaded = (await ctx.storage.get("loads")) || 0;
      await ctx.storage.put("loads", this.loaded + 1);
    });
  }
  async increment(by = 1) {
    const value = ((await this.ctx.storage.get("count")) || 0) + by;
    await this.ctx.storage.put("count", value);
    return value;
  }
  async get() {
    return (await this.ctx.storage.get("count")) || 0;
  }
  whoami() {
    return { id: this.ctx.id.toString(), name: this.ctx.id.name, loads: this.loaded };
  }
  spin(ms) {
    const end = Date.now() + ms;
    while (Date.now() < end);
    return "done";
  }
  spinForever() {
    for (;;);
  }
  echo(value) {
    return value;
  }
  fail(message) {
    const error = new RangeError(message);
    error.code = 42;
    throw error;
  }
  async kv(op, ...args) {
    return this.ctx.storage[op](...args);
  }
  async scheduleIn(ms) {
    await this.ctx.storage.setAlarm(Date.now() + ms);
    return (await this.ctx.storage.getAlarm()) - Date.now() > ms - 1000;
  }
  async scheduleAt(at, failTimes = 0) {
    await this.ctx.storage.put("failTimes", failTimes);
    await this.ctx.storage.setAlarm(new Date(at));
    return this.ctx.storage.getAlarm();
  }
  async alarm(info) {
    const runs = (await this.ctx.storage.get("alarmRuns")) || [];
    runs.push({ retryCount: info.retryCount, isRetry: info.isRetry, during: await this.ctx.storage.getAlarm() });
    await this.ctx.storage.put("alarmRuns", runs);
    const failTimes = (await this.ctx.storage.get("failTimes")) || 0;
    if (runs.length <= failTimes) throw new Error("alarm failed on purpose");
  }
  async alarmState() {
    return { runs: (await this.ctx.storage.get("alarmRuns")) || [], alarm: await this.ctx.storage.getAlarm() };
  }
  /** `n` puts, then `n` gets of the key-value API (bench/objects.py). */
  async churn(n) {
    for (let i = 0; i < n; i++) await this.ctx.storage.put(`churn:${i}`, { i, pad: "x".repeat(100) });
    let sum = 0;
    for (let i = 0; i < n; i++) sum += (await this.ctx.storage.get(`churn:${i}`)).i;
    return sum;
  }
  /** transaction(): both writes, or (when `fail`) neither; `rollback` undoes them too. */
  async txn(mode) {
    try {
      await this.ctx.storage.transaction(async (txn) => {
        await txn.put("t1", 1);
        await txn.put("t2", 2);
        if (mode === "rollback") txn.rollback();
        if (mode === "throw") throw new Error("undo");
      });
    } catch (error) {
      return { error: error.message, t1: (await this.ctx.storage.get("t1")) ?? null };
    }
    return { t1: (await this.ctx.storage.get("t1")) ?? null, t2: (await this.ctx.storage.get("t2")) ?? null };
  }
  async startTally(id) {
    const instance = await this.env.TALLY.create({ id, params: { counter: this.ctx.id.name } });
    return instance.id;
  }
  async fetch(request) {
    const url = new URL(request.url);
    const value = await this.increment(Number(url.searchParams.get("by") || 1));
    return new Response(`${request.method} ${url.pathname} ${value}`, { headers: { "x-object": this.ctx.id.name } });
  }
}

export class Notes extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT, data BLOB)");
  }
  add(body) {
    const cursor = this.ctx.storage.sql.exec("INSERT INTO notes (body, data) VALUES (?, ?)", body, new Uint8Array([1, 2, 3]));
    return { written: cursor.rowsWritten };
  }
  all() {
    const cursor = this.ctx.storage.sql.exec("SELECT id, body FROM notes ORDER BY id");
    return { columns: cursor.columnNames, rows: cursor.toArray() };
  }
  raw() {
    return [...this.ctx.storage.sql.exec("SELECT id, body FROM notes ORDER BY id").raw()];
  }
  one(id) {
    return this.ctx.storage.sql.exec("SELECT body FROM notes WHERE id = ?", id).one();
  }
  blob() {
    const { data } = this.ctx.storage.sql.exec("SELECT data FROM notes LIMIT 1").one();
    return [data instanceof ArrayBuffer, [...new Uint8Array(data)]];
  }
  size() {
    return this.ctx.storage.sql.databaseSize;
  }
  atomic(fail) {
    try {
      this.ctx.storage.transactionSync(() => {
        this.ctx.storage.sql.exec("INSERT INTO notes (body) VALUES ('in transaction')");
        if (fail) throw new Error("undo");
      });
    } catch (error) {
      return error.message;
    }
    return "kept";
  }
  iterate() {
    const out = [];
    for (const row of this.ctx.storage.sql.exec("SELECT id, body FROM notes")) out.push([row.id, row.body]);
    this.ctx.storage.kv.put("k", 5);
    for (const [key, value] of this.ctx.storage.kv.list()) out.push([key, value]);
    return out;
  }
  async remember(key, value) {
    await this.ctx.storage.put(key, value);
  }
  /** `n` inserts, then `n` selects by key of the SQL API (bench/objects.py). */
  sqlChurn(n) {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS churn (k INTEGER PRIMARY KEY, v TEXT)");
    for (let i = 0; i < n; i++) this.ctx.storage.sql.exec("INSERT OR REPLACE INTO churn VALUES (?, ?)", i, "x".repeat(100));
    let found = 0;
    for (let i = 0; i < n; i++) found += this.ctx.storage.sql.exec("SELECT k FROM churn WHERE k = ?", i).toArray().length;
    return found;
  }
  count() {
    return this.ctx.storage.sql.exec("SELECT count(*) AS n FROM notes").one().n;
  }
  sneaky(query) {
    try {
      this.ctx.storage.sql.exec(query);
      return "allowed";
    } catch (error) {
      return error.message;
    }
  }
}

export class Plain {
  constructor(ctx, env) {
    this.ctx = ctx;
  }
  async fetch() {
    return new Response("plain");
  }
}

export class Tally extends WorkflowEntrypoint {
  async run(event, step) {
    const first = await step.do("increment", async () => {
      const stub = this.env.COUNTER.getByName(event.payload.counter);
      return stub.increment(10);
    });
    return { first };
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const name = url.searchParams.get("name") || "default";
    const stub = env.COUNTER.getByName(name);
    if (url.pathname === "/fetch") return stub.fetch("http://object/path?by=2", { method: "POST" });
    if (url.pathname === "/rpc") {
      const [method, ...args] = JSON.parse(url.searchParams.get("call"));
      const ns = method.startsWith("notes.") ? env.NOTES.getByName(name) : stub;
      try {
        const value = await ns[method.replace("notes.", "")](...args);
        return Response.json({ value: value instanceof Map ? { map: [...value] } : value === undefined ? "(undefined)" : value });
      } catch (error) {
        return Response.json({ error: { name: error.name, message: error.message, code: error.code, isRange: error instanceof RangeError } });
      }
    }
    if (url.pathname === "/ids") {
      const a = env.COUNTER.idFromName("x");
      const b = env.COUNTER.idFromName("x");
      const other = env.NOTES.idFromName("x");
      const unique = env.COUNTER.newUniqueId();
      const out = {
        a: a.toString(), name: a.name, same: a.equals(b), otherNs: other.toString() !== a.toString(),
        parsed: env.COUNTER.idFromString(a.toString()).equals(a), parsedName: env.COUNTER.idFromString(a.toString()).name ?? null,
        unique: unique.toString(), uniqueName: unique.name ?? null,
      };
      for (const [label, text] of [["bad", "xyz"], ["foreign", other.toString()]]) {
        try {
          env.COUNTER.idFromString(text);
          out[label] = "accepted";
        } catch (error) {
          out[label] = `${error.name}: ${error.message}`;
        }
      }
      return Response.json(out);
    }
    if (url.pathname === "/wfstatus") {
      const status = await (await env.TALLY.get(url.searchParams.get("id"))).status();
      return Response.json({ status: status.status, output: status.output ?? null });
    }
    if (url.pathname === "/alarm") {
      // Set an alarm `in` ms from now on the object's own clock.
      return Response.json({ at: await stub.scheduleIn(Number(url.searchParams.get("in"))) });
    }
    if (url.pathname === "/plain") {
      const plain = env.PLAIN.getByName(name);
      const text = await (await plain.fetch("http://x/")).text();
      let rpc;
      try {
        await plain.hello();
      } catch (error) {
        rpc = error.message;
      }
      return Response.json({ text, rpc });
    }
    return new Response("not found", { status: 404 });
  }
};
