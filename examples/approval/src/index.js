// A purchase request that needs a manager's approval before it is fulfilled.
//
//   POST /requests                  {"item", "amount", "requestedBy"}  -> {"id"}
//   GET  /requests/:id                                 -> {"id", "status", "output", "error"?}
//   POST /requests/:id/approval     {"approved": true|false, "by", "reason"?}
//   POST /requests/:id/pause | /resume | /terminate
import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

export class ApprovalWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { item, amount, requestedBy, approvalTimeout = "7 days" } = event.payload;

    const request = await step.do("file request", async () => ({
      ticket: `REQ-${crypto.randomUUID().slice(0, 8)}`,
      item,
      amount,
      requestedBy,
      filedAt: new Date().toISOString(),
    }));

    // The instance sleeps here, holding no memory, until an "approval" event arrives.
    // An event sent while the instance is paused is kept and delivered after resume().
    const decision = await step.waitForEvent("manager approval", {
      type: "approval",
      timeout: approvalTimeout,
    });
    const { approved, by, reason } = decision.payload;

    await step.do("check decision", async () => {
      if (!approved) {
        // NonRetryableError skips the step's retries and ends the instance as "errored"
        // with this message: a rejection is final, trying again would not change it.
        const why = reason ?? "no reason given";
        throw new NonRetryableError(`${request.ticket} rejected by ${by}: ${why}`);
      }
      return { approvedBy: by };
    });

    const order = await step.do("fulfil", async () => ({
      order: `PO-${crypto.randomUUID().slice(0, 8)}`,
      item,
      amount,
    }));

    return { ticket: request.ticket, approvedBy: by, ...order };
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const [, root, id, action] = url.pathname.split("/");
    if (root !== "requests") return Response.json({ error: "not found" }, { status: 404 });
    try {
      if (request.method === "POST" && id === undefined) {
        const body = await request.json().catch(() => ({}));
        const { item, amount, requestedBy, approvalTimeout } = body;
        const params = { item, amount, requestedBy, approvalTimeout };
        const instance = await env.APPROVAL.create({ params });
        return Response.json({ id: instance.id });
      }
      if (!id) return Response.json({ error: "not found" }, { status: 404 });
      const instance = await env.APPROVAL.get(id);

      if (request.method === "GET" && action === undefined) {
        // The documented fields only (wrangler dev adds a local-only one); output null until done.
        const { status, output = null, error } = await instance.status();
        return Response.json({ id, status, output, error });
      }
      if (request.method === "POST" && action === "approval") {
        // Anything but an explicit {"approved": true} counts as a rejection.
        const body = await request.json().catch(() => ({}));
        const { approved = false, by = "manager", reason } = body;
        await instance.sendEvent({ type: "approval", payload: { approved, by, reason } });
        return Response.json({ id, sent: "approval" });
      }
      if (request.method === "POST" && ["pause", "resume", "terminate"].includes(action)) {
        await instance[action]();
        // status() right after the call shows its effect (or "waitingForPause" briefly).
        return Response.json({ id, [action]: true, status: (await instance.status()).status });
      }
      return Response.json({ error: "not found" }, { status: 404 });
    } catch (e) {
      const status = String(e.message).includes("not_found") ? 404 : 500;
      return Response.json({ error: e.message }, { status });
    }
  },
};
