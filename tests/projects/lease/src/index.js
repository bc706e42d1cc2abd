import { WorkflowEntrypoint } from "cloudflare:workers";

/** `steps` steps, each sending the recorder one effect (which node, which instance and
 * step, when its JS ran, a fresh nonce) and returning the nonce; `nap` between steps. The
 * output is every step's nonce, so a test can hold it against what the recorder saw. */
export class RecordedWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { recorder, steps, nap } = event.payload;
    const values = [];
    const retries = { retries: { limit: 20, delay: 200, backoff: "constant" } };
    for (let i = 0; i < steps; i++) {
      values.push(await step.do(`call ${i}`, retries, async () => {
        const effect = {
          node: this.env.NODE,
          instance: event.instanceId,
          step: i,
          at: Date.now(),
          nonce: crypto.randomUUID(),
        };
        const response = await fetch(`${recorder}/effect`, { method: "POST", body: JSON.stringify(effect) });
        if (!response.ok) throw new Error(`the recorder answered ${response.status}`);
        return effect.nonce;
      }));
      if (nap) await step.sleep(`nap ${i}`, nap);
    }
    return values;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/create-batch") {
      const created = await env.RECORDED.createBatch(await request.json());
      return Response.json(created.map((instance) => instance.id));
    }
    if (url.pathname === "/statuses") {
      const out = {};
      for (const id of await request.json()) out[id] = await (await env.RECORDED.get(id)).status();
      return Response.json(out);
    }
    return new Response("not found", { status: 404 });
  },
};
