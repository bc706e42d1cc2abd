import { WorkerEntrypoint } from "cloudflare:workers";

export class Helper extends WorkerEntrypoint {
  greet(name) {
    return `hello ${name} from ${this.env.WHO}`;
  }
}

function shape(error) {
  return { name: error.name, message: error.message };
}

async function answer(work) {
  try {
    return Response.json({ ok: await work() });
  } catch (error) {
    return Response.json({ error: shape(error) });
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    switch (url.pathname) {
      case "/who":
        return new Response(env.WHO);
      case "/fetch": {
        const response = await env.BACK.fetch("http://back/some/path?q=1", { method: "POST", body: "hi" });
        return Response.json({ status: response.status, from: response.headers.get("x-from"), text: await response.text() });
      }
      case "/fetch-admin":
        return answer(async () => (await env.ADMIN.fetch("http://x/admin")).text());
      case "/rpc":
        return answer(() => env.BACK.add(2, 3));
      case "/rpc-later":
        return answer(async () => {
          const value = await env.BACK.later({ a: [1, "two"] });
          return { echoed: value.echoed, date: value.date instanceof Date, list: value.list, map: value.map instanceof Map ? [...value.map] : null };
        });
      case "/rpc-named":
        return answer(() => env.ADMIN.whoami());
      case "/rpc-error":
        return answer(() => env.BACK.fail("too big"));
      case "/rpc-error-async":
        return answer(() => env.BACK.failLater());
      case "/rpc-missing-method":
        return answer(() => env.BACK.nothing());
      case "/self":
        return answer(() => env.SELF.greet("you"));
      case "/do":
        return answer(() => env.COUNTER.get(env.COUNTER.idFromName("shared")).add(Number(url.searchParams.get("n") ?? "1")));
      case "/do-id":
        return answer(() => env.COUNTER.idFromName("shared").toString());
      case "/wf-create":
        return answer(async () => (await env.FLOW.create({ id: url.searchParams.get("id"), params: { n: 21 } })).id);
      case "/wf-status":
        return answer(async () => {
          const status = await (await env.FLOW.get(url.searchParams.get("id"))).status();
          return { status: status.status, output: status.output ?? null };
        });
      case "/gone-rpc":
        return answer(() => env.GONE.anything());
      case "/gone-fetch":
        return answer(async () => { const r = await env.GONE.fetch("http://x/"); return [r.status, await r.text()]; });
      default:
        return new Response("not found", { status: 404 });
    }
  },
};
