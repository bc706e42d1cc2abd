// Workflows and a small HTTP API for bench/run.py. Every endpoint takes
// ?wf=BENCH|WAITER|SLEEPER|BINARY
// (GET /ping takes nothing: it answers without touching a workflow).
// The API is bench/wrangler/worker's for the parts they share, so bench/wrangler/bench_drive.py
// can drive BENCH here too.
import { WorkflowEntrypoint } from "cloudflare:workers";

/** K trivial steps (params.steps), then the engine's own clock: the end of the last step. */
export class BenchWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const k = event.payload && Number.isInteger(event.payload.steps) ? event.payload.steps : 10;
    let sum = 0;
    for (let i = 0; i < k; i++) {
      sum += await step.do(`s${i}`, async () => i);
    }
    return { steps: k, sum, finished_at: Date.now() };
  }
}

/** K steps, then wait for an event "go"; the step after it records when it ran.
 *  Used for event latency (K = 0) and replay cost (K = 1,000 / 5,000 recorded steps), and as a
 *  cheap long-waiting instance for the memory workloads. */
export class WaiterWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const p = event.payload || {};
    const k = Number.isInteger(p.steps) ? p.steps : 0;
    for (let i = 0; i < k; i++) {
      await step.do(`s${i}`, async () => i);
    }
    const got = await step.waitForEvent("go", { type: "go", timeout: p.timeout || "1 day" });
    const ranAt = await step.do("after event", async () => Date.now());
    return { steps: k, sent_at: got.payload && got.payload.sent_at, ran_at: ranAt, finished_at: Date.now() };
  }
}

/** params.count steps (1) each returning an ArrayBuffer of params.size bytes (950,000):
 * binary step results (bench/run.py's binary_values, bench/binary_values.py; the same class
 * is in bench/wrangler/worker). */
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

/** A step that notes the time, a sleep of params.sleep_ms (or until params.until_ms, a
 * timestamp), a step that notes the time again. */
export class SleeperWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const p = event.payload || {};
    const sleepMs = Number.isInteger(p.sleep_ms) ? p.sleep_ms : 2000;
    const before = await step.do("before", async () => Date.now());
    if (Number.isInteger(p.until_ms)) {
      // one absolute moment for many instances: they come due at once
      await step.sleepUntil("nap", new Date(p.until_ms));
      const after = await step.do("after", async () => Date.now());
      return { before, after, until_ms: p.until_ms, late_ms: after - p.until_ms, finished_at: Date.now() };
    }
    await step.sleep("nap", sleepMs);
    const after = await step.do("after", async () => Date.now());
    return { before, after, sleep_ms: sleepMs, late_ms: after - before - sleepMs, finished_at: Date.now() };
  }
}

function json(body, status = 200) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

async function readJson(request, fallback) {
  const text = await request.text();
  return text === "" ? fallback : JSON.parse(text);
}

async function statusOf(instance) {
  const s = await instance.status();
  const out = { status: s.status, output: s.output === undefined ? null : s.output };
  if (s.error !== undefined) out.error = s.error;
  // wrangler dev never reports "waiting"; how many step outputs it has recorded tells the
  // driver when an instance has reached its wait (celld has no such field: it says "waiting")
  if (Array.isArray(s.__LOCAL_DEV_STEP_OUTPUTS)) out.recorded = s.__LOCAL_DEV_STEP_OUTPUTS.length;
  return out;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    const wf = env[q.get("wf") || "BENCH"];
    const id = q.get("id") || undefined;
    try {
      switch (url.pathname) {
        case "/health":
          return json({ ok: true });
        case "/ping":
          // a plain request that touches no workflow: bench/run.py's http_under_load times it
          return new Response("pong");
        case "/create": {
          const params = await readJson(request, undefined);
          const instance = await wf.create({ id, params });
          return json({ id: instance.id });
        }
        case "/create-batch": {
          // body: [{id?, params?}, ...] (at most 100)
          const created = await wf.createBatch(await readJson(request, []));
          return json({ ids: created.map((i) => i.id) });
        }
        case "/status":
          return json(await statusOf(await wf.get(id)));
        case "/statuses": {
          const out = {};
          await Promise.all((await readJson(request, [])).map(async (i) => {
            try {
              out[i] = await statusOf(await wf.get(i));
            } catch (e) {
              out[i] = { status: "error", error: { name: e && e.name, message: e && e.message } };
            }
          }));
          return json(out);
        }
        case "/event": {
          const payload = await readJson(request, undefined);
          await (await wf.get(id)).sendEvent({ type: q.get("type") || "go", payload });
          return json({ ok: true });
        }
      }
      return json({ error: { name: "NotFound", message: url.pathname } }, 404);
    } catch (e) {
      return json({ error: { name: e && e.name, message: e && e.message } }, 500);
    }
  },
};
