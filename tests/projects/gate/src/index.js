import { WorkflowEntrypoint } from "cloudflare:workers";

async function send(upstream, body) {
  const response = await fetch(`${upstream}/effect`, { method: "POST", body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`recorder answered ${response.status}`);
}

/** Two steps with a log line between them, then their results sent out. */
export class BetweenLog extends WorkflowEntrypoint {
  async run(event, step) {
    const { upstream, log } = event.payload;
    const a = await step.do("a", async () => crypto.randomUUID());
    if (log) console.log("between the steps");
    const b = await step.do("b", async () => crypto.randomUUID());
    await send(upstream, { id: event.instanceId, steps: { a, b } });
    return { a, b };
  }
}

/** Module state shared by every run of an isolate, as in production. */
let lastSecret = null;

/** Sends what an earlier run of its isolate left in module state, then draws its own. */
export class SecretKeeper extends WorkflowEntrypoint {
  async run(event, step) {
    const { upstream } = event.payload;
    if (lastSecret !== null) await send(upstream, { id: event.instanceId, seen: lastSecret });
    const secret = await step.do("secret", async () => crypto.randomUUID());
    lastSecret = { id: event.instanceId, secret };
    return secret;
  }
}

export default {
  async fetch() {
    return new Response("celld gate test project");
  },
};
