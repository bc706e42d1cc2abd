// Steps write D1, R2 and KV; HTTP routes read them back or run single operations,
// so tests drive everything over HTTP.
import { WorkflowEntrypoint } from "cloudflare:workers";
import { EmailMessage } from "cloudflare:email";

export class Writer extends WorkflowEntrypoint {
  async run(event, step) {
    const n = event.payload.n;
    await step.do("d1", async () => {
      await this.env.DB.prepare("CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, n INTEGER)").run();
      const r = await this.env.DB.prepare("INSERT OR REPLACE INTO runs VALUES (?, ?)").bind(event.instanceId, n).run();
      return r.meta.changes;
    });
    await step.do("r2", async () => {
      const o = await this.env.BUCKET.put(`runs/${event.instanceId}`, JSON.stringify({ n }), {
        customMetadata: { n: String(n) },
        httpMetadata: { contentType: "application/json" },
      });
      return o.etag;
    });
    await step.do("kv", async () => {
      await this.env.KV.put(`run:${event.instanceId}`, String(n), { metadata: { n } });
      return true;
    });
    return { n };
  }
}

function json(body, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    try {
      switch (url.pathname) {
        case "/api/start": {
          const i = await env.WRITER.create({ id: q.get("id"), params: { n: Number(q.get("n")) } });
          return json({ id: i.id });
        }
        case "/api/status":
          return json(await (await env.WRITER.get(q.get("id"))).status());
        case "/api/read": {
          const id = q.get("id");
          const row = await env.DB.prepare("SELECT * FROM runs WHERE id = ?").bind(id).first();
          const obj = await env.BUCKET.get(`runs/${id}`);
          const kv = await env.KV.getWithMetadata(`run:${id}`, "json");
          const list = await env.KV.list({ prefix: "run:" });
          return json({
            row,
            object: obj && { body: await obj.json(), custom: obj.customMetadata, type: obj.httpMetadata.contentType },
            kv,
            keys: list.keys.map((k) => k.name),
          });
        }
        case "/api/kv/put":
          await env.KV.put(q.get("key"), await request.text());
          return json({ ok: true });
        case "/api/kv/get":
          return json({ value: await env.KV.get(q.get("key")) });
        case "/api/d1/batch": {
          const body = await request.json();
          const results = await env.DB.batch(body.map((s) => env.DB.prepare(s.sql).bind(...(s.params || []))));
          return json(results.map((r) => ({ results: r.results, changes: r.meta.changes })));
        }
        case "/api/d1/query":
          return json(await env.DB.prepare(await request.text()).all());
        case "/api/r2/put": {
          const o = await env.BUCKET.put(q.get("key"), await request.arrayBuffer());
          return json({ etag: o.etag, size: o.size });
        }
        case "/api/r2/get": {
          const o = await env.BUCKET.get(q.get("key"));
          if (o === null) return json(null, 404);
          const headers = new Headers();
          o.writeHttpMetadata(headers);
          headers.set("etag", o.httpEtag);
          return new Response(await o.arrayBuffer(), { headers });
        }
        case "/api/assets":
          return env.ASSETS.fetch(new URL(q.get("path"), request.url));
        case "/api/email": {
          const message = new EmailMessage("a@example.com", "b@example.com", "Subject: hi\r\n\r\nhi");
          try {
            await env.EMAIL.send(message);
          } catch (e) {
            return json({ from: message.from, error: e.message });
          }
          return json({ sent: true });
        }
        case "/api/ai":
          return json(await env.AI.run("@cf/model", {}));
        default:
          return json({ worker: url.pathname });
      }
    } catch (e) {
      return json({ error: { name: e.name, message: e.message } }, 500);
    }
  },
};
