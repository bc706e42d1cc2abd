// Sends to queues over HTTP and records every delivery in KV (one key per message tag), so
// tests can see what the queue() handler received.
function describe(error) {
  return { name: error.name, message: error.message };
}

async function attempt(fn) {
  try {
    return { ok: true, value: await fn() };
  } catch (error) {
    return { ok: false, error: describe(error) };
  }
}

function producer(env, name) {
  return { jobs: env.JOBS, slow: env.SLOW, hold: env.HOLD }[name || "jobs"];
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    const queue = producer(env, q.get("queue"));
    if (url.pathname === "/send") {
      const options = {};
      if (q.has("delay")) options.delaySeconds = Number(q.get("delay"));
      if (q.has("type")) options.contentType = q.get("type");
      const body = q.has("type") && q.get("type") === "text" ? q.get("tag") : { tag: q.get("tag"), mode: q.get("mode") || "ok" };
      const result = await attempt(() => queue.send(body, options));
      return Response.json(result, { status: result.ok ? 200 : 500 });
    }
    if (url.pathname === "/typed") {
      // A Date and a Map: kept by "v8", flattened by "json" (the default by date).
      const body = { tag: q.get("tag"), mode: "ok", d: new Date(0), m: new Map([[1, 2]]) };
      const options = q.has("type") ? { contentType: q.get("type") } : undefined;
      const result = await attempt(() => queue.send(body, options));
      return Response.json(result, { status: result.ok ? 200 : 500 });
    }
    if (url.pathname === "/bytes") {
      const result = await attempt(() => queue.send(new Uint8Array([1, 2, 3]), { contentType: "bytes" }));
      return Response.json(result, { status: result.ok ? 200 : 500 });
    }
    if (url.pathname === "/batch") {
      const items = await request.json();
      const result = await attempt(() => queue.sendBatch(items.map((m) => ({ body: m }))));
      return Response.json(result, { status: result.ok ? 200 : 500 });
    }
    if (url.pathname === "/errors") {
      const big = "x".repeat(128001);
      const out = {
        big: await attempt(() => env.JOBS.send(big, { contentType: "text" })),
        exact: await attempt(() => env.HOLD.send("y".repeat(128000), { contentType: "text" })),
        undefined: await attempt(() => env.JOBS.send(undefined)),
        badType: await attempt(() => env.JOBS.send("a", { contentType: "xml" })),
        textNumber: await attempt(() => env.JOBS.send(5, { contentType: "text" })),
        bytesString: await attempt(() => env.JOBS.send("a", { contentType: "bytes" })),
        delay: await attempt(() => env.JOBS.send("a", { contentType: "text", delaySeconds: 86401 })),
        batchEmpty: await attempt(() => env.JOBS.sendBatch([])),
        batch101: await attempt(() => env.JOBS.sendBatch(Array.from({ length: 101 }, (_, i) => ({ body: i })))),
        batchBytes: await attempt(() => env.JOBS.sendBatch(Array.from({ length: 3 }, () => ({ body: "z".repeat(100000), contentType: "text" })))),
        batchNotArray: await attempt(() => env.JOBS.sendBatch("nope")),
      };
      return Response.json(out);
    }
    if (url.pathname === "/metrics") return Response.json(await queue.metrics());
    if (url.pathname === "/seen") {
      return Response.json((await env.SEEN.get(`seen:${q.get("tag")}`, "json")) || []);
    }
    if (url.pathname === "/delivered") {
      const listed = await env.SEEN.list({ prefix: "seen:", cursor: q.get("cursor") || undefined });
      return Response.json({ tags: listed.keys.map((k) => k.name.slice(5)), cursor: listed.list_complete ? null : listed.cursor });
    }
    return new Response("not found", { status: 404 });
  },

  async queue(batch, env) {
    let fail = false;
    for (const message of batch.messages) {
      const body = message.body instanceof ArrayBuffer ? { tag: "bytes", length: message.body.byteLength } : message.body;
      const tag = typeof body === "string" ? body : body.tag;
      const mode = typeof body === "string" ? "ok" : body.mode;
      const types = body && typeof body === "object" ? { d: body.d?.constructor?.name, m: body.m?.constructor?.name } : {};
      const key = `seen:${tag}`;
      const seen = (await env.SEEN.get(key, "json")) || [];
      seen.push({
        queue: batch.queue,
        id: message.id,
        attempts: message.attempts,
        timestamp: message.timestamp.getTime(),
        batchSize: batch.messages.length,
        at: Date.now(),
        keys: Object.keys(message),
        types,
        body,
      });
      await env.SEEN.put(key, JSON.stringify(seen));
      if (mode === "ack") message.ack();
      if (mode === "throw" && batch.queue !== "dead") fail = true;
      if (mode === "retry-once" && message.attempts < 2) message.retry();
      if (mode === "retry-later" && message.attempts < 2) message.retry({ delaySeconds: 60 });
      if (mode === "retry-always") message.retry();
    }
    if (fail) throw new Error("the consumer failed");
  },
};
