import { DurableObject } from "cloudflare:workers";

export class Local extends DurableObject {
  ping() {
    return "pong";
  }
}

async function attempt(fn) {
  try {
    return { ok: await fn() };
  } catch (e) {
    return { name: e.name, message: e.message };
  }
}

const remote = (env) => env.REMOTE.get(env.REMOTE.idFromName("x"));

const routes = {
  "/do": (env) => remote(env).ping(),
  "/do-fetch": async (env) => {
    const response = await remote(env).fetch("http://x/");
    return [response.status, await response.text()];
  },
  "/do-id": (env) => String(env.REMOTE.idFromName("x")),
  "/wf": async (env) => (await env.FLOW.create({ id: "a" })).id,
  "/wf-status": async (env) => (await env.FLOW.get("a")).status(),
  "/local": (env) => env.LOCAL.get(env.LOCAL.idFromName("x")).ping(),
};

export default {
  async fetch(request, env) {
    const route = routes[new URL(request.url).pathname];
    if (!route) return new Response("not found", { status: 404 });
    return Response.json(await attempt(() => route(env)));
  },
};
