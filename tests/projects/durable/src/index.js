import { WorkflowEntrypoint } from "cloudflare:workers";
import core from "../../../../compat/projects/core/src/index.js";

export { ScriptWorkflow } from "../../../../compat/projects/core/src/workflows.js";

/** Tell the test's counter server that a step callback ran (and with what value). */
async function report(upstream, step, value) {
  const url = `${upstream}/hit?step=${encodeURIComponent(step)}&value=${encodeURIComponent(value)}`;
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
