// Every storage binding, driven over HTTP. The counter also counts its calls in memory
// (`calls`): with one live instance of each object in the whole cluster, that count
// equals the stored total (two live copies in two processes would each count only their
// own calls).
import { DurableObject } from "cloudflare:workers";

export class Counter extends DurableObject {
  calls = 0;
  async add(n) {
    const total = ((await this.ctx.storage.get("total")) ?? 0) + n;
    await this.ctx.storage.put("total", total);
    this.calls += n;
    return { total, calls: this.calls };
  }
  async total() {
    return (await this.ctx.storage.get("total")) ?? 0;
  }
  async fetch(request) {
    const n = Number(new URL(request.url).searchParams.get("n") ?? "1");
    return Response.json(await this.add(n));
  }
}

function json(body, status = 200) {
  return Response.json(body, { status });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    try {
      switch (url.pathname) {
        case "/kv/put":
          await env.KV.put(q.get("key"), await request.text());
          return json({ ok: true });
        case "/kv/get":
          return json({ value: await env.KV.get(q.get("key")) });
        case "/r2/put": {
          const o = await env.BUCKET.put(q.get("key"), request.body);
          return json({ etag: o.etag, size: o.size });
        }
        case "/r2/get": {
          const o = await env.BUCKET.get(q.get("key"));
          if (o === null) return json({ missing: true }, 404);
          return new Response(o.body, { headers: { etag: o.etag } });
        }
        case "/d1": {
          const body = await request.json();
          const results = await env.DB.batch(body.map((s) => env.DB.prepare(s.sql).bind(...(s.params || []))));
          return json({ results: results.map((r) => r.results) });
        }
        case "/do/add": {
          const stub = env.COUNTER.getByName(q.get("name"));
          return json(await stub.add(Number(q.get("n") ?? "1")));
        }
        case "/do/fetch": {
          const stub = env.COUNTER.getByName(q.get("name"));
          return json(await (await stub.fetch(`http://do/?n=${q.get("n") ?? "1"}`)).json());
        }
        case "/do/total":
          return json({ total: await env.COUNTER.getByName(q.get("name")).total() });
        default:
          return json({ path: url.pathname }, 404);
      }
    } catch (e) {
      return json({ error: { name: e.name, message: e.message } }, 500);
    }
  },
};
