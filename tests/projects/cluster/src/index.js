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

const routes = {
  "/kv/put": async (q, request, env) => {
    await env.KV.put(q.get("key"), await request.text());
    return json({ ok: true });
  },
  "/kv/get": async (q, request, env) => json({ value: await env.KV.get(q.get("key")) }),
  "/r2/put": async (q, request, env) => {
    const o = await env.BUCKET.put(q.get("key"), request.body);
    return json({ etag: o.etag, size: o.size });
  },
  "/r2/get": async (q, request, env) => {
    const o = await env.BUCKET.get(q.get("key"));
    if (o === null) return json({ missing: true }, 404);
    return new Response(o.body, { headers: { etag: o.etag } });
  },
  "/d1": async (q, request, env) => {
    const body = await request.json();
    const results = await env.DB.batch(body.map((s) => env.DB.prepare(s.sql).bind(...(s.params || []))));
    return json({ results: results.map((r) => r.results) });
  },
  "/do/add": async (q, request, env) =>
    json(await env.COUNTER.getByName(q.get("name")).add(Number(q.get("n") ?? "1"))),
  "/do/fetch": async (q, request, env) => {
    const stub = env.COUNTER.getByName(q.get("name"));
    return json(await (await stub.fetch(`http://do/?n=${q.get("n") ?? "1"}`)).json());
  },
  "/do/total": async (q, request, env) => json({ total: await env.COUNTER.getByName(q.get("name")).total() }),
};

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const route = routes[url.pathname];
    if (route === undefined) return json({ path: url.pathname }, 404);
    return route(url.searchParams, request, env).catch((e) =>
      json({ error: { name: e.name, message: e.message } }, 500),
    );
  },
};
