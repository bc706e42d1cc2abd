import { greeting, count, requests } from "./lib/util.js";

const pending = [];

export default {
  "/hello": (request, env) => new Response(greeting(env.NAME)),
  "/vars": (request, env) => Response.json({ name: env.NAME, count: env.COUNT }),
  "/echo": async (request) => {
    const body = new Uint8Array(await request.arrayBuffer());
    return new Response(body, {
      status: 201,
      headers: {
        "x-method": request.method,
        "x-length": String(body.length),
        "content-type": request.headers.get("content-type") || "application/octet-stream",
      },
    });
  },
  "/cookies": () => {
    const headers = new Headers();
    headers.append("set-cookie", "a=1");
    headers.append("set-cookie", "b=2");
    return new Response("ok", { headers });
  },
  "/count": () => {
    count();
    return Response.json({ requests });
  },
  "/throw": () => {
    throw new RangeError("deliberate failure");
  },
  "/loop": () => {
    for (;;) {}
  },
  "/bomb": () => {
    const hoard = [];
    for (;;) hoard.push(new Array(1e6).fill(7));
  },
  "/recurse": () => {
    const dive = (n) => dive(n + 1) + 1;
    return new Response(String(dive(0)));
  },
  "/alloc": (request) => {
    const mb = Number(new URL(request.url).searchParams.get("mb") || 1);
    const block = new Uint8Array(mb * 1024 * 1024).fill(1);
    return new Response(String(block.length));
  },
  "/slow": async (request) => {
    const ms = Number(new URL(request.url).searchParams.get("ms") || 500);
    await new Promise((resolve) => setTimeout(resolve, ms));
    return new Response(`slept ${ms}`);
  },
  "/hang": () => new Promise(() => {}),
  "/hang-after-cleared-timer": () => {
    clearTimeout(setTimeout(() => {}, 600_000));
    return new Promise(() => {});
  },
  "/not-a-response": () => "just a string",
  "/wait-until": (request, env, ctx) => {
    ctx.waitUntil(new Promise((resolve) => setTimeout(() => { pending.push("done"); resolve(); }, 50)));
    return new Response("accepted");
  },
  "/wait-until-result": () => Response.json(pending),
  "/fetch": async (request) => {
    const target = new URL(request.url).searchParams.get("url");
    const upstream = await fetch(target, { headers: { "x-from": "celld" } });
    return Response.json({ status: upstream.status, body: await upstream.text() });
  },
  "/digest": async () => {
    const data = new TextEncoder().encode("abc");
    const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
    return new Response([...hash].map((b) => b.toString(16).padStart(2, "0")).join(""));
  },
  "/redirect": () => Response.redirect("https://example.com/next", 302),
};
