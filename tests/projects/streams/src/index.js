// Bodies that stream both ways: server-sent events, large generated bodies, request bodies
// into R2 and R2 objects back out, fetch() responses relayed to the client.
const MB = 1024 * 1024;
const encoder = new TextEncoder();

// Module state, shared by every request when celld runs one isolate (--threads 1): what
// each stream has produced and which ones were cancelled, for the tests to look at.
const produced = new Map();
const cancelled = new Set();
const seen = new Map();

/** `total` bytes in chunks of `size`, made as they are pulled; byte i is (i * 7) & 255. */
function generated(total, id = null, size = 64 * 1024) {
  const block = new Uint8Array(size + 256);
  for (let i = 0; i < block.length; i++) block[i] = (i * 7) & 255;
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= total) {
        controller.close();
        return;
      }
      const n = Math.min(size, total - sent);
      const start = sent % 256;
      controller.enqueue(block.slice(start, start + n));
      sent += n;
      if (id !== null) produced.set(id, sent);
    },
    cancel() {
      if (id !== null) cancelled.add(id);
    },
  });
}

/** Copy a stream chunk by chunk through JS (every byte passes through the isolate). */
function relayed(stream) {
  const reader = stream.getReader();
  return new ReadableStream({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

const routes = {
  "/ping": () => new Response("pong"),
  "/health": () => new Response("ok"),
  // Server-sent events: `n` events `ms` apart (with `now`, the first at once); with
  // `hold`, the stream then stays open (an hour) instead of ending. Each event says when it
  // was enqueued (`ts`, ms since the epoch).
  "/sse": (request, url) => {
    const id = url.searchParams.get("id");
    const count = Number(url.searchParams.get("n") || 5);
    const every = Number(url.searchParams.get("ms") || 100);
    const hold = url.searchParams.has("hold");
    let n = 0;
    let timer;
    return new Response(new ReadableStream({
      start(controller) {
        const send = () => {
          controller.enqueue(encoder.encode(`id: ${n}\nts: ${Date.now()}\ndata: event ${n} of ${id}\n\n`));
          n += 1;
          if (n === count) {
            clearInterval(timer);
            if (hold) timer = setTimeout(() => controller.close(), 3_600_000);
            else controller.close();
            return false;
          }
          return true;
        };
        if (url.searchParams.has("now") && !send()) return;
        timer = setInterval(send, every);
      },
      cancel() {
        clearInterval(timer);
        clearTimeout(timer);
        cancelled.add(id);
      },
    }), { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
  },
  "/state": (request, url) => {
    const id = url.searchParams.get("id");
    return Response.json({
      produced: produced.get(id) || 0, cancelled: cancelled.has(id), seen: seen.get(id) || 0,
    });
  },
  "/generate": (request, url) => {
    const total = Number(url.searchParams.get("mb") || 1) * MB;
    const id = url.searchParams.get("id");
    return new Response(generated(total, id), { headers: { "content-type": "application/octet-stream" } });
  },
  "/bytes": (request, url) => {
    const total = Number(url.searchParams.get("mb") || 1) * MB;
    const bytes = new Uint8Array(total);
    for (let i = 0; i < total; i += 4096) bytes[i] = (i / 4096) & 255;
    return new Response(bytes);
  },
  "/echo": (request) => new Response(request.body),
  "/relay": (request) => new Response(relayed(request.body)),
  "/count": async (request, url) => {
    const id = url.searchParams.get("id");
    let total = 0;
    let chunks = 0;
    for await (const chunk of request.body) {
      total += chunk.length;
      chunks += 1;
      if (id !== null) seen.set(id, total);
    }
    return Response.json({ total, chunks });
  },
  "/r2/put": async (request, url, env) => {
    const object = await env.BUCKET.put(url.searchParams.get("key"), request.body, {
      httpMetadata: { contentType: "application/octet-stream" },
    });
    return Response.json({ size: object.size, etag: object.etag });
  },
  "/r2/put-generated": async (request, url, env) => {
    const total = Number(url.searchParams.get("mb") || 1) * MB;
    const object = await env.BUCKET.put(url.searchParams.get("key"), generated(total, url.searchParams.get("key")));
    return Response.json({ size: object.size, etag: object.etag });
  },
  "/r2/get": async (request, url, env) => {
    const object = await env.BUCKET.get(url.searchParams.get("key"));
    if (object === null) return new Response("no such object", { status: 404 });
    const body = url.searchParams.get("via") === "js" ? relayed(object.body) : object.body;
    return new Response(body, { headers: { etag: object.httpEtag } });
  },
  "/r2/count": async (request, url, env) => {
    const object = await env.BUCKET.get(url.searchParams.get("key"));
    let total = 0;
    for await (const chunk of object.body) total += chunk.length;
    return Response.json({ total, size: object.size });
  },
  "/r2/text": async (request, url, env) => {
    const object = await env.BUCKET.get(url.searchParams.get("key"));
    return new Response(await object.text());
  },
  "/proxy": async (request, url) => {
    const upstream = await fetch(url.searchParams.get("url"));
    const body = url.searchParams.get("via") === "js" ? relayed(upstream.body) : upstream.body;
    return new Response(body, { status: upstream.status, headers: upstream.headers });
  },
  "/proxy-count": async (request, url) => {
    const upstream = await fetch(url.searchParams.get("url"));
    let total = 0;
    for await (const chunk of upstream.body) total += chunk.length;
    return Response.json({ total });
  },
  "/forward": async (request, url) => {
    // The request body streamed on to another server (or, with `bytes`, that many zeros).
    const via = url.searchParams.get("via");
    let body = via === "js" ? relayed(request.body) : request.body;
    if (url.searchParams.has("bytes")) body = new Uint8Array(Number(url.searchParams.get("bytes")));
    const upstream = await fetch(url.searchParams.get("url"), { method: "POST", body, duplex: "half" });
    return new Response(upstream.body, { status: upstream.status });
  },
  // Three parts, then (after 50 ms: the head is out by then) an error.
  "/broken": () => {
    let n = 0;
    return new Response(new ReadableStream({
      async pull(controller) {
        if (n++ < 3) {
          controller.enqueue(encoder.encode(`part ${n}\n`));
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
        throw new TypeError("the stream broke");
      },
    }));
  },
  "/hang": () => new Response(new ReadableStream({
    start(controller) {
      controller.enqueue(encoder.encode("first\n"));
    },
    pull() {
      return new Promise(() => {}); // never settles
    },
  })),
};

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const route = routes[url.pathname];
    if (!route) return new Response("not found", { status: 404 });
    return route(request, url, env);
  },
};
