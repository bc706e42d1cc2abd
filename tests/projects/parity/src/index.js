import { WorkflowEntrypoint } from "cloudflare:workers";

// Every step names its retries: the default retry delay is one of the declared differences
// (production's 10 s under celld, 1 s under wrangler dev), and it shows in --json output.
const RETRIES = { retries: { limit: 2, delay: "1 second", backoff: "constant" } };

// Look an order up, charge it (the first attempt fails; retried after 1 s), keep a secret,
// sleep a second, wait for approval, ship.
export class OrderWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const params = event.payload || {};
    const order = await step.do("look up", RETRIES, async () => ({ order: params.order ?? 0 }));
    const charge = await step.do("charge", RETRIES, async (ctx) => {
      if (ctx.attempt === 1) throw new Error("card declined");
      return { charged: true, attempt: ctx.attempt };
    });
    await step.do("secret", { ...RETRIES, sensitive: "output" }, async () => "s3cr3t");
    await step.sleep("cool down", "1 second");
    const approval = await step.waitForEvent("approval", { type: "approve", timeout: "1 hour" });
    const shipped = await step.do("ship", RETRIES, async () => ({ shipped: order.order }));
    return { order, charge, approval: approval.payload, shipped };
  }
}

// Fails for good on its second step (no retries).
export class BrokenWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    await step.do("fine", RETRIES, async () => "fine");
    await step.do("fails", { retries: { limit: 0, delay: "1 second" } }, async () => {
      throw new TypeError("nothing to do");
    });
    return "never";
  }
}

// Its step's first attempt fails and waits an hour to retry; a second step runs long.
export class SlowWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const params = event.payload || {};
    if (params.busy) {
      await step.do("busy", { ...RETRIES, timeout: "1 hour" }, async () => {
        await new Promise((resolve) => setTimeout(resolve, params.busy));
        return "rested";
      });
    }
    return await step.do(
      "retry later",
      { retries: { limit: 1, delay: "1 hour", backoff: "constant" } },
      async (ctx) => {
        if (ctx.attempt === 1) throw new RangeError("not yet");
        return "now";
      },
    );
  }
}

export default {
  async fetch() {
    return new Response("parity test worker\n");
  },
};
