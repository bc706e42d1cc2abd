import { WorkflowEntrypoint } from "cloudflare:workers";
import core from "../../../../compat/projects/core/src/index.js";

export { ScriptWorkflow } from "../../../../compat/projects/core/src/workflows.js";

/** Tell the test's counter server that a step callback ran (and with what value), and,
 * with `seen`, which step results the run had seen when it did. */
async function report(upstream, step, value, seen) {
  let url = `${upstream}/hit?step=${encodeURIComponent(step)}&value=${encodeURIComponent(value)}`;
  if (seen !== undefined) url += `&seen=${encodeURIComponent(JSON.stringify(seen))}`;
  const response = await fetch(url, { method: "POST" });
  if (!response.ok) throw new Error(`counter answered ${response.status}`);
}

/** An effect outside any step that carries step results the run has seen: the counter
 * keeps it as a witness (nothing counts it as a step execution). */
async function witness(upstream, from, seen) {
  const url = `${upstream}/seen?from=${encodeURIComponent(from)}&seen=${encodeURIComponent(JSON.stringify(seen))}`;
  const response = await fetch(url, { method: "POST" });
  if (!response.ok) throw new Error(`counter answered ${response.status}`);
}

export class OrderWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { upstream, hold } = event.payload;
    const reserved = await step.do("reserve", async () => {
      const token = crypto.randomUUID();
      await report(upstream, "reserve", `${event.instanceId}:${token}`);
      if (hold) await new Promise((resolve) => setTimeout(resolve, hold));
      return { token: `${event.instanceId}:${token}`, at: new Date() };
    });
    await step.sleep("cool off", "1 day");
    const payment = await step.waitForEvent("payment", { type: "paid", timeout: "2 days" });
    const shipped = await step.do("ship", { retries: { limit: 2, delay: "1 minute", backoff: "constant" } }, async (ctx) => {
      await report(upstream, "ship", `attempt-${ctx.attempt}`);
      if (ctx.attempt === 1) throw new Error("carrier busy");
      return `shipped ${reserved.token} on attempt ${ctx.attempt}`;
    });
    return { token: reserved.token, reservedAtIsDate: reserved.at instanceof Date, payment: payment.payload, shipped };
  }
}

export class StuckWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    await step.do("first", async () => 1);
    await new Promise(() => {}); // never settles, outside any step
  }
}

/** Reports each step to the counter, so a test can see the order instances ran in. */
export class OrderedWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { upstream, hold, sleep } = event.payload;
    const id = event.instanceId;
    await step.do("work", async () => {
      await report(upstream, "work", id);
      if (hold) await new Promise((resolve) => setTimeout(resolve, hold));
    });
    if (sleep) {
      await step.sleep("nap", sleep);
      await step.do("after nap", async () => report(upstream, "after nap", id));
    }
    return id;
  }
}

/** Runaway code, to show each limit fails only what it should. */
export class RunawayWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { where } = event.payload;
    if (where === "run") for (;;) {}
    const spin = await step.do("spin", { retries: { limit: 1, delay: 1000, backoff: "constant" } }, async (ctx) => {
      if (where === "step" && ctx.attempt === 1) for (;;) {}
      if (where === "memory" && ctx.attempt === 1) {
        const hoard = [];
        for (;;) hoard.push(new Array(1e6).fill(ctx.attempt));
      }
      if (where === "recursion") {
        const dive = (n) => dive(n + 1) + 1;
        return dive(0);
      }
      return `survived on attempt ${ctx.attempt}`;
    });
    return { spin };
  }
}

/** The crash harnesses' workflow (tests/crash_harness.py, tests/nodes_harness.py): steps, a
 * retry, a sleep, parallel steps and an event. Every
 * effect it sends carries the step results the run had seen when it left (`seen`): the
 * step callbacks' reports and a witness right after a step resolved, outside any step. A
 * result JS saw is durable before anything JS does next leaves the isolate, so no effect
 * may carry a result that the journal later contradicts (a result that was lost and ran
 * again with another value). */
export class HarnessWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { upstream } = event.payload;
    const id = event.instanceId;
    const seen = {};
    const once = (name) => async (ctx) => {
      const value = `${id}:${name}:${crypto.randomUUID()}`;
      await report(upstream, `${id}/${name}#${ctx.attempt}`, value, { ...seen });
      return value;
    };
    const out = {};
    out.a = seen.a = await step.do("a", once("a"));
    console.log(`${id}: a is ${seen.a}`);
    await witness(upstream, `${id}/after-a`, seen);
    out.b = seen.b = await step.do("b", { retries: { limit: 3, delay: "1 second", backoff: "constant" } }, async (ctx) => {
      const value = await once("b")(ctx);
      if (ctx.attempt === 1) throw new Error("first attempt always fails");
      return value;
    });
    await witness(upstream, `${id}/after-b`, seen);
    await step.sleep("rest", "2 seconds");
    out.c = await Promise.all([step.do("c1", once("c1")), step.do("c2", once("c2"))]);
    [seen.c1, seen.c2] = out.c;
    await witness(upstream, `${id}/after-c`, seen);
    const got = await step.waitForEvent("go", { type: "go", timeout: "1 hour" });
    out.event = got.payload;
    out.d = await step.do("d", once("d"));
    return out;
  }
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/order") {
      const params = await request.json();
      const instance = await env.ORDER.create({ id: url.searchParams.get("id"), params });
      return Response.json({ id: instance.id });
    }
    return core.fetch(request, env, ctx);
  },
};

/** A step's result reaches JS ahead of its commit while another write of the instance (an
 * event's) is in flight, and that write fails: nothing JS does next (a turn that takes a
 * while, then a fetch carrying the result) may leave celld, since the result is never
 * committed and runs again (tests/cells/test_effects_after_a_failed_write.py). */
export class FailedWriteWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { upstream, gate, spinMs } = event.payload;
    const id = event.instanceId;
    const a = await step.do("a", async () => {
      const value = `${id}:a:${crypto.randomUUID()}`;
      await report(upstream, `${id}/a`, value);
      await fetch(gate, { method: "POST" }); // held by the test while it sends the event
      return value;
    });
    const until = Date.now() + spinMs;
    while (Date.now() < until); // JS's next turn takes a while
    await witness(upstream, `${id}/after-a`, { a });
    const got = await step.waitForEvent("go", { type: "go", timeout: "1 hour" });
    return { a, event: got.payload };
  }
}

/** Many small steps whose results build on each other: long runs, store faults, benchmarks. */
export class LongWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { steps, sleepEvery, nap } = event.payload;
    let total = 0;
    for (let i = 1; i <= steps; i++) {
      total = await step.do("add", async () => total + i);
      if (sleepEvery && i % sleepEvery === 0) await step.sleep("nap", nap || "1 second");
    }
    return { total, steps };
  }
}

/** A step reached while a pause is pending, after its config has been seen: it must not
 * start on its own (no callback runs until the instance is resumed). */
export class PauseRaceWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { upstream } = event.payload;
    const slow = step.do("slow", async () => {
      await new Promise((resolve) => setTimeout(resolve, 800));
      return "slow";
    });
    await step.do("warm", async () => "warm");
    await new Promise((resolve) => setTimeout(resolve, 300)); // the pause arrives meanwhile
    const after = await step.do("after", async () => {
      await report(upstream, "after", event.instanceId);
      return "after";
    });
    return [await slow, after];
  }
}

/** Deletes itself from inside its run: the run stops inside the await. */
export class SelfDeleteWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { upstream } = event.payload;
    await step.do("before", async () => report(upstream, "before", event.instanceId));
    const me = await this.env.SELF_DELETE.get(event.instanceId);
    await me.delete();
    await step.do("after", async () => report(upstream, "after", event.instanceId));
    return "not reached";
  }
}

/** A step that burns CPU in short slices between timers: no single job runs long and the
 * job queue drains between them, yet the attempt's CPU adds up past limits.cpu_ms. */
export class CpuHogWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    return step.do("hog", { retries: { limit: 0, delay: 1000, backoff: "constant" } }, async () => {
      for (let i = 0; i < 100; i++) {
        const until = Date.now() + 50;
        while (Date.now() < until) {}
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      return "survived";
    });
  }
}

/** A step that computes for a while in one go (too long for the event loop, well inside
 * the CPU limit), between two quick ones. */
export class BusyStepWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const before = await step.do("before", async () => "quick");
    const spun = await step.do("spin", { retries: { limit: 0, delay: 1000 } }, async () => {
      // `ms` of the clock, and at least 20,000 iterations a millisecond asked for (60 ms:
      // ~35 ms of CPU on its own), so a thread the machine preempts still spends CPU on it
      let n = 0;
      const until = Date.now() + event.payload.ms;
      const least = event.payload.ms * 20000;
      while (Date.now() < until || n < least) n++;
      return n >= 0;
    });
    const after = await step.do("after", async () => "quick");
    return { before, spun, after };
  }
}

/** Step results that are ReadableStreams of bytes: recorded, and read back as streams. */
export class StreamWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const stream = await step.do("bytes", async () => {
      const encoder = new TextEncoder();
      return new ReadableStream({
        start(controller) {
          controller.enqueue(encoder.encode("hello "));
          controller.enqueue(encoder.encode("stream"));
          controller.close();
        },
      });
    });
    const isStream = stream instanceof ReadableStream;
    const text = await new Response(stream).text();
    const again = await step.do("after", async () => `${text}!`);
    return { isStream, text, again };
  }
}

/** Step calls that JS starts on its own (the engine answered their config before, in the
 * same isolate: js/workflows/step.js, `#begin`), with callbacks of every kind. */
export class StartedAtOnceWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const quick = { retries: { limit: 2, delay: 1, backoff: "constant" } };
    await step.do("learn", async () => 0);
    await step.do("learn quick", quick, async () => 0);
    let ran = false;
    const later = step.do("later", async () => {
      ran = true;
      return 1;
    });
    const ranInsideCall = ran;
    await later;
    const first = await step.do("ctx", async (ctx) => {
      const text = JSON.stringify(ctx);
      ctx.config.retries.limit = 99;
      ctx.step.name = "changed";
      return text;
    });
    const second = await step.do("ctx", async (ctx) => JSON.stringify(ctx));
    const attempts = [];
    const syncThrow = await step.do("sync throw", quick, (ctx) => {
      attempts.push(ctx.attempt);
      if (ctx.attempt < 2) throw new TypeError("not yet");
      return ctx.attempt;
    });
    const thenable = await step.do("thenable", () => ({ then(resolve) { resolve("from then"); } }));
    const plain = await step.do("plain", () => 7);
    const shared = { a: 1 };
    const structured = await step.do("structured", async () => ({ when: new Date(5), list: [shared, shared], n: -0 }));
    let exhausted;
    try {
      await step.do("always", quick, async (ctx) => {
        throw new RangeError(`attempt ${ctx.attempt}`);
      });
    } catch (error) {
      exhausted = `${error.name}: ${error.message}`;
    }
    return {
      bridgeTextHidden: !("__celld_host_text" in globalThis),
      ranInsideCall,
      first: JSON.parse(first),
      second: JSON.parse(second),
      attempts,
      syncThrow,
      thenable,
      plain,
      structured: {
        when: structured.when instanceof Date && structured.when.getTime(),
        same: structured.list[0] === structured.list[1],
        negativeZero: Object.is(structured.n, -0),
      },
      exhausted,
    };
  }
}
