import { WorkflowEntrypoint } from "cloudflare:workers";

// An order: look it up, charge (fails `params.fail` times, retried every 5 s), keep a
// secret (sensitive output), sleep an hour, wait a day for approval, then ship.
export class OrderWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const params = event.payload || {};
    const order = await step.do("look up order", async () => ({ order: params.order ?? 0 }));
    const charge = await step.do(
      "charge card",
      { retries: { limit: 5, delay: "5 seconds", backoff: "constant" } },
      async (ctx) => {
        if (ctx.attempt <= (params.fail ?? 0)) throw new Error(`card declined on attempt ${ctx.attempt}`);
        return { charged: true, attempt: ctx.attempt };
      },
    );
    await step.do("issue secret", { sensitive: "output" }, async () => "s3cr3t-token");
    await step.sleep("cool down", "1 hour");
    const approval = await step.waitForEvent("approval", { type: "approve", timeout: "1 day" });
    const shipped = await step.do("ship", async () => ({ shipped: order.order }));
    return { order, charge, approval: approval.payload, shipped };
  }
}

// Finishes at once: for listing and paging tests.
export class QuickWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    return await step.do("only", async () => event.payload);
  }
}

export default {
  async fetch(request, env) {
    return new Response("operator test worker\n");
  },
};
