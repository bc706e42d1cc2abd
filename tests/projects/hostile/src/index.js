// Broken and hostile Worker code: each route misbehaves in one way. The tests check
// that only the request (or instance) that misbehaves fails, and that /ping keeps
// answering meanwhile.
import { WorkflowEntrypoint } from "cloudflare:workers";

function nested(depth) {
  let value = { leaf: true };
  for (let i = 0; i < depth; i++) value = { next: value };
  return value;
}

/** Replace the built-ins celld's own runtime used to rely on. */
function patchBuiltins() {
  JSON.stringify = () => "garbage";
  JSON.parse = () => ({ garbage: true });
  Array.prototype.push = function push() {
    return 666;
  };
  Object.assign = () => ({ a: 666 });
  Object.keys = () => ["a"];
  Map.prototype.get = () => 666;
  Map.prototype.set = function set() {
    return this;
  };
  Object.defineProperty(Object.prototype, "toJSON", {
    value: () => 666, writable: true, configurable: true, enumerable: false,
  });
  Promise.prototype.then = function then() {
    return this;
  };
}

/** CPU-bound work: `n` iterations of a loop. */
function spin(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x + i) % 7;
  return x;
}

// Which isolate answered: each isolate loads the module once and draws its own token.
const isolateToken = crypto.randomUUID();

const routes = {
  "/ping": () => new Response("pong"),
  "/isolate": () => new Response(isolateToken),
  "/spin": () => {
    for (;;) {}
  },
  "/microtask-loop": async () => {
    for (;;) await null;
  },
  "/timer-storm": () => {
    for (let i = 0; i < 5000; i++) setInterval(() => {}, 0);
    return new Response("armed");
  },
  "/late-timer-storm": async () => {
    await null;
    await new Promise((resolve) => setTimeout(resolve, 1));
    for (let i = 0; i < 2000; i++) setInterval(() => {}, 0);
    return new Response("armed late");
  },
  "/timer-storm-hang": () => {
    for (let i = 0; i < 200; i++) setInterval(() => { for (let j = 0; j < 1e4; j++); }, 0);
    return new Promise(() => {});
  },
  "/patch-builtins": () => {
    patchBuiltins();
    return new Response("patched");
  },
  "/deep-log": () => {
    const value = nested(1100);
    console.log(value);
    return new Response("logged");
  },
  "/deep-binding": async (request, env) => {
    try {
      await env.HOSTILE.create({ params: nested(1100) });
      return new Response("created");
    } catch (error) {
      return new Response(`${error.name}: ${error.message}`, { status: 400 });
    }
  },
  "/cyclic-binding": async (request, env) => {
    const value = { a: 1 };
    value.self = value;
    const instance = await env.HOSTILE.create({ params: { kind: "cyclic", value } });
    return Response.json({ id: instance.id });
  },
  "/create": async (request, env) => {
    const url = new URL(request.url);
    const body = await request.json();
    const instance = await env.HOSTILE.create({ id: url.searchParams.get("id"), params: body });
    return Response.json({ id: instance.id });
  },
  "/status": async (request, env) => {
    const id = new URL(request.url).searchParams.get("id");
    return Response.json(await (await env.HOSTILE.get(id)).status());
  },
  "/event": async (request, env) => {
    const url = new URL(request.url);
    const instance = await env.HOSTILE.get(url.searchParams.get("id"));
    try {
      await instance.sendEvent({ type: url.searchParams.get("type") || "go", payload: await request.json() });
      return new Response("sent");
    } catch (error) {
      return new Response(`${error.name}: ${error.message}`, { status: 400 });
    }
  },
  "/flood": async (request, env) => {
    const url = new URL(request.url);
    const instance = await env.HOSTILE.get(url.searchParams.get("id"));
    const count = Number(url.searchParams.get("n"));
    for (let i = 0; i < count; i++) {
      try {
        await instance.sendEvent({ type: "other", payload: i });
      } catch (error) {
        return Response.json({ accepted: i, error: `${error.name}: ${error.message}` });
      }
    }
    return Response.json({ accepted: count });
  },
  "/response-error": () => Response.error(),
  "/stream": () => {
    const encoder = new TextEncoder();
    let n = 0;
    return new Response(new ReadableStream({
      pull(controller) {
        if (n === 3) controller.close();
        else controller.enqueue(encoder.encode(`chunk${n++};`));
      },
    }));
  },
  "/broken-stream": () => new Response(new ReadableStream({
    pull() {
      throw new TypeError("the stream broke");
    },
  })),
  "/redirect": () => Response.redirect("https://example.com/elsewhere", 301),
  "/body-length": async (request) => {
    const bytes = new Uint8Array(await request.arrayBuffer());
    return new Response(String(bytes.length));
  },
  "/ignore-body": () => new Response("ignored"),
  "/drain": async (request) => {
    // Reads the body chunk by chunk without keeping it.
    const reader = request.body.getReader();
    let total = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
    }
    return new Response(String(total));
  },
  "/fetch-and-leave": async (request) => {
    // A fetch nobody awaits: it belongs to this request and is cancelled with it.
    fetch(new URL(request.url).searchParams.get("url")).catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 300));
    return new Response("left");
  },
  "/long-timer": async () => {
    await new Promise((resolve) => setTimeout(resolve, 600_000));
    return new Response("woke");
  },
  "/many-timers": async (request) => {
    // `n` timers at once, spread over `spread` ms, each pushing its number; the answer
    // says how many fired and whether they fired in deadline order.
    const params = new URL(request.url).searchParams;
    const n = Number(params.get("n"));
    const spread = Number(params.get("spread") || 1000);
    let fired = 0;
    let last = -1;
    let ordered = true;
    await new Promise((resolve) => {
      for (let i = 0; i < n; i++) {
        const delay = Math.floor((i * spread) / n);
        setTimeout(() => {
          if (delay < last) ordered = false;
          last = delay;
          if (++fired === n) resolve();
        }, delay);
      }
    });
    return new Response(JSON.stringify({ fired, ordered }));
  },
  "/big-header": () => new Response("x", { headers: { "x-big": "y".repeat(200_000) } }),
  // A status poll (get, then status()) and the same with CPU-bound work after the reads
  // or after a create (?spin= loop iterations): celld/isolate/worker_pool.py lets only the
  // first kind's later turns run on the event loop, where a long one starts over.
  "/wf-create": async (request, env) => {
    const q = new URL(request.url).searchParams;
    const instance = await env.HOSTILE.create({ id: q.get("id"), params: { kind: q.get("kind") } });
    spin(Number(q.get("spin") || 0));
    return new Response(instance.id);
  },
  "/wf-status": async (request, env) => {
    const q = new URL(request.url).searchParams;
    const status = await (await env.HOSTILE.get(q.get("id"))).status();
    spin(Number(q.get("spin") || 0));
    return new Response(status.status);
  },
  // get(id), then another answer from outside (get(other)), then status(): what get(id)
  // was answered with may be older than what the isolate has heard since
  "/wf-status-after-get": async (request, env) => {
    const q = new URL(request.url).searchParams;
    const instance = await env.HOSTILE.get(q.get("id"));
    await env.HOSTILE.get(q.get("other"));
    return new Response((await instance.status()).status);
  },
};

export default {
  async fetch(request, env, ctx) {
    const route = routes[new URL(request.url).pathname];
    if (!route) return new Response("not found", { status: 404 });
    return route(request, env, ctx);
  },
};

export class HostileWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { kind } = event.payload;
    if (kind === "patch-push") {
      const pair = await step.do("pair", async () => {
        Array.prototype.push = function push() {
          return 666;
        };
        Object.assign = () => ({ a: 666, b: 666 });
        Object.keys = () => ["a"];
        Map.prototype.set = function set() {
          return this;
        };
        JSON.parse = () => ({ a: 666, b: 666 });
        return { a: 5, b: 6 };
      });
      return { pair, list: await step.do("list", async () => [1, 2, 3]) };
    }
    if (kind === "patch-at-end") {
      const pair = await step.do("pair", async () => ({ a: 5, b: 6 }));
      Array.prototype.push = function push() {
        return 666;
      };
      Map.prototype.set = function set() {
        return this;
      };
      Map.prototype.get = () => 666;
      Object.keys = () => ["a"];
      return { pair };
    }
    if (kind === "plain") {
      const pair = await step.do("pair", async () => ({ a: 5, b: 6 }));
      const list = await step.do("list", async () => {
        const items = [];
        items.push(1, 2, 3);
        return items;
      });
      return { pair, list };
    }
    if (kind === "microtask-loop") {
      return step.do("loop", { retries: { limit: 0, delay: 1000 } }, async () => {
        for (;;) await null;
      });
    }
    if (kind === "break-json") {
      return step.do("break", { retries: { limit: 0, delay: 1000 } }, async () => {
        JSON.stringify = () => "garbage";
        JSON.parse = () => 666;
        return { fine: true };
      });
    }
    if (kind === "big-output") {
      return "x".repeat(2 * 1024 * 1024);
    }
    if (kind === "wait") {
      const event = await step.waitForEvent("go", { type: "go", timeout: "1 hour" });
      return event.payload;
    }
    return event.payload;
  }
}
