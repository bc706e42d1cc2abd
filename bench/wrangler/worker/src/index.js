// A Workflows Worker that celld and `wrangler dev` (miniflare + workerd, fully local) both
// run unchanged: the benchmarks drive it with bench_drive.py.
//
// Three Workflow classes:
//   DemoWorkflow   (binding WF)     - exercises step.do, retries, sleep, waitForEvent
//   BenchWorkflow  (binding BENCH)  - K trivial step.do calls (K = params.steps)
//   BinaryWorkflow (binding BINARY) - params.count steps each returning an ArrayBuffer of
//                                     params.size bytes (bench/project has the same class)
//
// The default export's fetch handler is a small HTTP API so that a test
// driver (e.g. Python) can do everything over HTTP. Every endpoint takes
// ?wf=WF|BENCH|BINARY (default WF) to select the binding. See bench/wrangler/README.md.

import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

class CustomError extends Error {
  constructor(message) {
    super(message);
    this.name = "CustomError";
  }
}

// params.throw injects a failure into the flaky step on every attempt:
//   "nonretryable" | "type" | "custom" | "string"; params.throw_in_run=true throws from run() itself
function injected(kind, attempt) {
  switch (kind) {
    case "nonretryable": return new NonRetryableError(`non-retryable failure on attempt ${attempt}`);
    case "type": return new TypeError(`type error on attempt ${attempt}`);
    case "custom": return new CustomError(`custom error on attempt ${attempt}`);
    case "string": return `thrown string on attempt ${attempt}`;
    default: return null;
  }
}

export class DemoWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const params = event.payload || {};
    const failTimes = Number.isInteger(params.fail_times) ? params.fail_times : 2;

    // 1. step.do with a result
    const first = await step.do("first step", async () => {
      return { value: 42, input: params.input ?? null };
    });

    // 2. a step that fails `failTimes` times, then succeeds.
    //    The engine passes a step context {step:{name,count}, attempt, config}
    //    to the callback; `attempt` is 1-based and survives replays.
    //    Fallback (older engines without ctx.attempt): throw until
    //    Date.now() > params.deadline (ms epoch).
    const flaky = await step.do(
      "flaky step",
      { retries: { limit: 3, delay: "1 second", backoff: "constant" }, timeout: "30 seconds" },
      async (ctx) => {
        const attempt = ctx && typeof ctx.attempt === "number" ? ctx.attempt : null;
        const inj = injected(params.throw, attempt);
        if (inj !== null) throw inj;
        if (attempt !== null) {
          if (attempt <= failTimes) throw new Error(`flaky failure on attempt ${attempt}`);
        } else if (typeof params.deadline === "number" && Date.now() < params.deadline) {
          throw new Error(`flaky failure before deadline ${params.deadline}`);
        }
        return { ok: true, attempt };
      },
    );

    if (params.throw_in_run) throw new CustomError("thrown from run() outside any step");

    // 3. durable sleep
    await step.sleep("nap", params.sleep || "1 second");
    const woke = await step.do("after nap", async () => "woke");

    // 4. wait for an external event (a 4th step output "woke" shows the sleep ended)
    const approval = await step.waitForEvent("wait for approval", {
      type: "approve",
      timeout: params.event_timeout || "30 seconds",
    });

    // 5. output
    return { first, flaky, woke, approval, done: true };
  }
}

export class BenchWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const k = (event.payload && event.payload.steps) || 10;
    let acc = 0;
    for (let i = 0; i < k; i++) {
      acc += await step.do(`s${i}`, async () => i);
    }
    // finished_at: engine-side wall clock (ms epoch) when the last step returned;
    // lets a driver compute create->complete latency without poll granularity.
    return { steps: k, sum: acc, finished_at: Date.now() };
  }
}

/** params.count steps (1) each returning an ArrayBuffer of params.size bytes (950,000):
 * binary step results, create -> complete. */
export class BinaryWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const p = event.payload || {};
    const size = Number.isInteger(p.size) ? p.size : 950000;
    const count = Number.isInteger(p.count) ? p.count : 1;
    let total = 0;
    for (let i = 0; i < count; i++) {
      const value = await step.do(`b${i}`, async () => {
        const bytes = new Uint8Array(size);
        bytes.fill(i & 255);
        return bytes.buffer;
      });
      total += value.byteLength;
    }
    return { steps: count, bytes: total, finished_at: Date.now() };
  }
}

function json(body, status = 200) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function errorBody(e) {
  const err = { name: e && e.name, message: e && e.message };
  if (e && e.code !== undefined) err.code = e.code;
  if (e && e.remote !== undefined) err.remote = e.remote;
  err.string = String(e);
  return { error: err };
}

async function readJson(request, fallback) {
  const text = await request.text();
  if (text === "") return fallback;
  return JSON.parse(text);
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    const wfName = q.get("wf") || "WF";
    const wf = env[wfName];
    const method = request.method;
    try {
      if (!wf || typeof wf.create !== "function") {
        return json({ error: { name: "BadRequest", message: `no workflow binding ${wfName}` } }, 400);
      }
      const id = q.has("id") ? q.get("id") : undefined;
      switch (url.pathname) {
        case "/health":
          return json({ ok: true });

        case "/create": {
          if (method !== "POST") break;
          const params = await readJson(request, {});
          const opts = { params };
          if (id !== undefined) opts.id = id;
          const inst = await wf.create(opts);
          // ?then_status=1: also return status() taken right after create()
          if (q.get("then_status")) return json({ id: inst.id, status: await inst.status() });
          return json({ id: inst.id });
        }

        case "/create-batch": {
          // body: [{id?, params?}, ...] (legacy array form, returns ids)
          //   or {instances:[...]} / {count, params} (object form, returns {created, errors})
          if (method !== "POST") break;
          const body = await readJson(request, []);
          const res = await wf.createBatch(body);
          if (Array.isArray(res)) return json({ ids: res.map((i) => i.id) });
          return json({ created: res.created.map((i) => i.id), errors: res.errors });
        }

        case "/get": {
          const inst = await wf.get(id);
          return json({ id: inst.id });
        }

        case "/status": {
          const inst = await wf.get(id);
          return json(await inst.status());
        }

        case "/statuses": {
          // POST body: ["id1","id2",...] -> {id: {status, output, error?} | {error:{name,message}}}
          // (status() minus __LOCAL_DEV_STEP_OUTPUTS, for cheap bulk polling)
          if (method !== "POST") break;
          const ids = await readJson(request, []);
          const out = {};
          await Promise.all(
            ids.map(async (i) => {
              try {
                const s = await (await wf.get(i)).status();
                out[i] = { status: s.status, output: s.output ?? null };
                if (s.error !== undefined) out[i].error = s.error;
              } catch (e) {
                out[i] = errorBody(e);
              }
            }),
          );
          return json(out);
        }

        case "/event": {
          if (method !== "POST") break;
          const payload = await readJson(request, null);
          const inst = await wf.get(id);
          const type = q.has("type") ? q.get("type") : undefined;
          await inst.sendEvent({ type, payload });
          return json({ ok: true });
        }

        case "/pause":
        case "/resume":
        case "/terminate":
        case "/restart":
        case "/delete": {
          if (method !== "POST") break;
          const inst = await wf.get(id);
          const op = url.pathname.slice(1);
          const r = await inst[op]();
          return json({ ok: true, result: r === undefined ? null : r });
        }
      }
      return json({ error: { name: "NotFound", message: `${method} ${url.pathname}` } }, 404);
    } catch (e) {
      return json(errorBody(e), 500);
    }
  },
};
