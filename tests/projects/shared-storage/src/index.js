// /kv/KEY: PUT stores the request body, GET reads it (404 when missing).
// /r2/KEY: PUT streams the request body into the bucket, GET streams the object back.
// /kv-list?prefix=P, /r2-list?prefix=P: every key under a prefix (all pages).
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
