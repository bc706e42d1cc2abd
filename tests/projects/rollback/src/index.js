// params: {audit: URL, steps: [names], failAt?: name, wait?: true, undoConfig?: rollbackConfig}
// Each step returns "<name>-ok" (failAt throws a NonRetryableError instead). Its rollback
// handler POSTs {output, error, ctx, stepName} to `${audit}?step=undo-<name>` and obeys the
// answer: "ok", "fail" (throws Error), "never" (throws NonRetryableError).
import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

export class SagaWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { audit, steps, failAt, wait, undoConfig } = event.payload;
    const results = [];
    for (const name of steps) {
      const undo = async ({ ctx, error, output, stepName }) => {
        const body = JSON.stringify({ output: output === undefined ? "undefined" : output, error: `${error.name}: ${error.message}`, ctx, stepName });
        const answer = await (await fetch(`${audit}?step=undo-${name}`, { method: "POST", body })).text();
        if (answer === "fail") throw new Error(`undo ${name} failed`);
        if (answer === "never") throw new NonRetryableError(`undo ${name} refused`);
      };
      results.push(
        await step.do(
          name,
          async () => {
            if (name === failAt) throw new NonRetryableError(`${name} broke`);
            return `${name}-ok`;
          },
          undoConfig === undefined ? { rollback: undo } : { rollback: undo, rollbackConfig: undoConfig },
        ),
      );
      if (wait && results.length === 1) await step.waitForEvent("go", { type: "go", timeout: "1 day" });
    }
    return results;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const id = url.searchParams.get("id");
    if (url.pathname === "/create") {
      await env.SAGA.create({ id, params: await request.json() });
      return Response.json({ id });
    }
    const instance = await env.SAGA.get(id);
    if (url.pathname === "/terminate") {
      await instance.terminate({ rollback: url.searchParams.get("rollback") === "1" });
    }
    return Response.json(await instance.status());
  },
};
