import { WorkflowEntrypoint } from "cloudflare:workers";

/**
 * Send one effect to the test's recorder. Its body is a list of claims, each a value JS
 * holds and the step whose result it is: `{instance, step, value}`. Once every instance
 * has finished, the journal must record that same result for each claim.
 */
async function effect(recorder, instanceId, claims) {
  const url = `${recorder}/effect?instance=${encodeURIComponent(instanceId)}`;
  await fetch(url, { method: "POST", body: JSON.stringify({ claims }) });
}

/**
 * Two steps that draw a random value each, a log line between them (when `log`), and
 * an effect that carries both values. The second step starts on its own in the turn
 * after the first's result; the effect must not leave before that result is durable.
 */
export class BetweenStepsWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { recorder, log } = event.payload;
    const a = await step.do("a", async () => crypto.randomUUID());
    if (log) console.log("between");
    const b = await step.do("b", async () => crypto.randomUUID());
    const id = event.instanceId;
    await effect(recorder, id, [
      { instance: id, step: "a", value: a },
      { instance: id, step: "b", value: b },
    ]);
    return { a, b };
  }
}

/** Module state: the claim of the last writer's secret, seen by whatever runs next on
 * this isolate. */
let lastSecret = null;

/**
 * A writer draws a secret in its last step and leaves it in module state; a reader
 * sends out the secret of its `writer` as its first act if it finds it there (it does
 * when it runs on the isolate the writer left). The reader must not send the secret
 * before the writer's result is durable. The writer's step takes `hold` ms, so that a
 * reader created right after the writer commits its create before the writer's result
 * (and starts as soon as that lands, while the result's commit is under way).
 */
export class SecretWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { recorder, role, writer, hold } = event.payload;
    if (role === "reader") {
      const claim = lastSecret !== null && lastSecret.instance === writer ? lastSecret : null;
      if (claim !== null) await effect(recorder, event.instanceId, [claim]);
      return { saw: claim };
    }
    const secret = await step.do("secret", async () => {
      if (hold) await new Promise((resolve) => setTimeout(resolve, hold));
      return crypto.randomUUID();
    });
    lastSecret = { instance: event.instanceId, step: "secret", value: secret };
    return { secret };
  }
}

export default {
  /**
   * `GET /warm?recorder=URL`: one fetch to the recorder's `/warm`, so that celld's HTTP
   * client exists before a trial (its first fetch sets it up, which takes longer than a
   * slow commit and would hide what the trial looks for). Instances are driven through
   * the operator API.
   */
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/warm") {
      const answer = await fetch(`${url.searchParams.get("recorder")}/warm`);
      return new Response(`recorder answered ${answer.status}\n`, { status: answer.status });
    }
    return new Response("celld recorder project: drive it through the operator API\n", { status: 404 });
  },
};
