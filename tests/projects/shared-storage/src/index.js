// /kv/KEY: PUT stores the request body, GET reads it (404 when missing).
// /r2/KEY: PUT streams the request body into the bucket, GET streams the object back.
// /kv-list?prefix=P, /r2-list?prefix=P: every key under a prefix (all pages).
// /do/NAME/inc: the object NAME adds one turn (seq = last + 1) recording the node that ran
//   it, and answers {seq, node}; /do/NAME/turns: every turn it recorded, in order.
// /do/NAME/arm?ms=N: sets its alarm N ms ahead (its alarm() records an "alarm" turn).
// /wf/ID: POST creates the Tally instance ID, GET answers its status.
// /d1/KEY: PUT inserts KEY (with the node that received it) into the D1 table `items`;
//   /d1-list: every row.
import { DurableObject, WorkflowEntrypoint } from "cloudflare:workers";

// Writes to KV, then calls an object: every storage kind a step may reach on any node.
export class Tally extends WorkflowEntrypoint {
  async run(event, step) {
    const id = event.payload.id;
    await step.do("kv", async () => {
      await this.env.KV.put(`wf/${id}`, id);
      return id;
    });
    const turn = await step.do("object", async () => {
      const stub = this.env.COUNTER.get(this.env.COUNTER.idFromName(`wf-${id}`));
      return (await stub.inc()).seq;
    });
    return { id, turn };
  }
}

export class Counter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS turns (seq INTEGER PRIMARY KEY, node TEXT NOT NULL, kind TEXT NOT NULL)",
    );
  }

  inc(kind = "inc") {
    const last = this.ctx.storage.sql.exec("SELECT coalesce(max(seq), 0) AS n FROM turns").one().n;
    this.ctx.storage.sql.exec("INSERT INTO turns (seq, node, kind) VALUES (?, ?, ?)", last + 1, this.env.NODE, kind);
    return { seq: last + 1, node: this.env.NODE };
  }

  async arm(ms) {
    await this.ctx.storage.setAlarm(Date.now() + ms);
    return this.inc("arm");
  }

  async alarm() {
    this.inc("alarm");
  }

  turns() {
    return this.ctx.storage.sql.exec("SELECT seq, node, kind FROM turns ORDER BY seq").toArray();
  }
}

function json(body, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const prefix = url.searchParams.get("prefix") || "";
    if (url.pathname.startsWith("/kv/")) {
      const key = decodeURIComponent(url.pathname.slice(4));
      if (request.method === "PUT") {
        await env.KV.put(key, await request.arrayBuffer());
        return json({ ok: true });
      }
      const value = await env.KV.get(key, "arrayBuffer");
      return value === null ? json({ missing: key }, 404) : new Response(value);
    }
    if (url.pathname.startsWith("/r2/")) {
      const key = decodeURIComponent(url.pathname.slice(4));
      if (request.method === "PUT") {
        const object = await env.BUCKET.put(key, request.body);
        return json({ etag: object.etag, size: object.size });
      }
      const object = await env.BUCKET.get(key);
      return object === null ? json({ missing: key }, 404) : new Response(object.body, { headers: { etag: object.etag } });
    }
    if (url.pathname === "/kv-list") {
      const names = [];
      let cursor;
      do {
        const page = await env.KV.list({ prefix, cursor });
        names.push(...page.keys.map((k) => k.name));
        cursor = page.list_complete ? undefined : page.cursor;
      } while (cursor);
      return json(names);
    }
    if (url.pathname.startsWith("/do/")) {
      const [, , name, what] = url.pathname.split("/");
      const stub = env.COUNTER.get(env.COUNTER.idFromName(name));
      if (what === "arm") return json(await stub.arm(Number(url.searchParams.get("ms"))));
      return json(what === "inc" ? await stub.inc() : await stub.turns());
    }
    if (url.pathname.startsWith("/wf/")) {
      const id = url.pathname.slice(4);
      if (request.method === "POST") {
        await env.TALLY.create({ id, params: { id } });
        return json({ id });
      }
      return json(await (await env.TALLY.get(id)).status());
    }
    if (url.pathname.startsWith("/d1/")) {
      const key = decodeURIComponent(url.pathname.slice(4));
      await env.DB.prepare(
        "CREATE TABLE IF NOT EXISTS items (k TEXT PRIMARY KEY, node TEXT NOT NULL); INSERT INTO items (k, node) VALUES (?, ?)",
      ).bind(key, env.NODE).run();
      return json({ ok: true });
    }
    if (url.pathname === "/d1-list") {
      const { results } = await env.DB.prepare("SELECT k, node FROM items ORDER BY k").all();
      return json(results);
    }
    if (url.pathname === "/r2-list") {
      const names = [];
      let cursor;
      do {
        const page = await env.BUCKET.list({ prefix, cursor });
        names.push(...page.objects.map((o) => o.key));
        cursor = page.truncated ? page.cursor : undefined;
      } while (cursor);
      return json(names);
    }
    return json({ error: "no such route" }, 404);
  },
};
