// Retrying an outbound fetch() with a workflow step: the step throws on a non-2xx answer,
// and the engine runs it again with exponential backoff until it succeeds or gives up.
//
//   POST /fetch        {"fail": 2} or {"url": "..."}  -> {"id", "url"}
//   GET  /fetch/:id                                   -> {"id", "status", "output", "error"?}
//   GET  /flaky?key=K&fail=N   answers 503 to the first N requests for K, then 200
import { WorkflowEntrypoint } from "cloudflare:workers";

export class FetchWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { url, retries = 3, delay = "1 second", timeout = "10 seconds" } = event.payload;

    const result = await step.do(
      "fetch url",
      // `limit` counts retries after the first attempt; with "exponential" the waits are
      // delay, 2*delay, 4*delay, ... `timeout` bounds each attempt, not the whole step.
      { retries: { limit: retries, delay, backoff: "exponential" }, timeout },
      async (ctx) => {
        // ctx.attempt is 1-based and kept by the engine, so it survives restarts.
        const response = await fetch(url);
        const body = await response.text();
        if (!response.ok) {
          // fetch() resolves on any HTTP answer; throwing is what makes the engine retry.
          throw new Error(`attempt ${ctx.attempt}: ${url} answered ${response.status} ${body}`);
        }
        return { attempts: ctx.attempt, status: response.status, body: JSON.parse(body) };
      },
    );
    return { url, ...result };
  }
}

// Requests seen per key. Module-level state lives as long as the isolate that serves the
// request: fine for a demo endpoint, never a place for data you need to keep.
const calls = new Map();

function flaky(url) {
  const key = url.searchParams.get("key") ?? "default";
  const fail = Number(url.searchParams.get("fail") ?? 2);
  const call = (calls.get(key) ?? 0) + 1;
  calls.set(key, call);
  if (call <= fail) {
    return Response.json({ key, call, error: `failing ${call} of ${fail}` }, { status: 503 });
  }
  return Response.json({ key, call, ok: true });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const [, root, id] = url.pathname.split("/");
    try {
      if (request.method === "GET" && root === "flaky") return flaky(url);

      if (request.method === "POST" && root === "fetch" && id === undefined) {
        const body = await request.json().catch(() => ({}));
        const { fail = 2, retries, delay, timeout } = body;
        // Choose the id up front so the flaky endpoint can count per instance. Its URL is
        // built from this request's origin, so the example works on any host and port.
        const instanceId = crypto.randomUUID();
        const target = body.url ?? `${url.origin}/flaky?key=${instanceId}&fail=${fail}`;
        const params = { url: target, retries, delay, timeout };
        await env.FETCHER.create({ id: instanceId, params });
        return Response.json({ id: instanceId, url: target });
      }

      if (request.method === "GET" && root === "fetch" && id) {
        // The documented fields only (wrangler dev adds a local-only one); output null until done.
        const { status, output = null, error } = await (await env.FETCHER.get(id)).status();
        return Response.json({ id, status, output, error });
      }
      return Response.json({ error: "not found" }, { status: 404 });
    } catch (e) {
      const status = String(e.message).includes("not_found") ? 404 : 500;
      return Response.json({ error: e.message }, { status });
    }
  },
};
