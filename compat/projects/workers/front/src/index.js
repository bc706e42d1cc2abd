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
    const param = (name) => url.searchParams.get(name);
    switch (url.pathname) {
      case "/vars":
        return Response.json({
          WHO: env.WHO,
          SECRET: env.SECRET ?? null,
          EXTRA: env.EXTRA ?? null,
          ONLY_STAGING: env.ONLY_STAGING ?? null,
          bindings: Object.keys(env).sort(),
        });
      case "/back-vars":
        return answer(() => env.BACK.vars());
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
          const value = await env.BACK.later({ a: [1, "two"], n: null });
          return {
            echoed: value.echoed,
            date: value.date instanceof Date ? value.date.getTime() : null,
            list: value.list,
            map: value.map instanceof Map ? [...value.map] : null,
          };
        });
      case "/rpc-named":
        return answer(() => env.ADMIN.whoami());
      case "/self":
        return answer(() => env.SELF.greet("you"));
      case "/rpc-error":
        return answer(() => env.BACK.fail("too big"));
      case "/rpc-error-class":
        return answer(async () => {
          try {
            await env.BACK.fail("again");
          } catch (error) {
            return { range: error instanceof RangeError, error: error instanceof Error };
          }
        });
      case "/rpc-error-async":
        return answer(() => env.BACK.failLater());
      case "/rpc-missing-method":
        return answer(() => env.BACK.nothing());
      case "/do":
        return answer(() => env.COUNTER.get(env.COUNTER.idFromName(param("name"))).add(Number(param("n") ?? "1")));
      case "/do-id":
        return answer(() => env.COUNTER.idFromName(param("name")).toString());
      case "/wf-create":
        return answer(async () => (await env.FLOW.create({ id: param("id"), params: { n: Number(param("n")) } })).id);
      case "/wf-status":
        return answer(async () => {
          const status = await (await env.FLOW.get(param("id"))).status();
          return { status: status.status, output: status.output ?? null, error: status.error ?? null };
        });
      case "/gone-rpc":
        return answer(() => env.GONE.anything());
      case "/gone-fetch":
        return answer(async () => {
          const response = await env.GONE.fetch("http://x/");
          return [response.status, await response.text()];
        });
      default:
        return new Response("not found", { status: 404 });
    }
  },
};
