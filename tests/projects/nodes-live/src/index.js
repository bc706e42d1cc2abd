import core from "../../../../compat/projects/core/src/index.js";

export { CronWorkflow, ScriptWorkflow } from "../../../../compat/projects/core/src/workflows.js";

/** `/watch?id=`: subscribe() to a SCRIPT instance and stream each event as a JSON line the
 * moment next() gives it (type, stepName, the logged timestamp), then `{"done": true}`. */
function watch(env, id) {
  const encoder = new TextEncoder();
  const { readable, writable } = new TransformStream();
  const writer = writable.getWriter();
  (async () => {
    try {
      const subscription = await (await env.SCRIPT.get(id)).subscribe();
      for (;;) {
        const { done, value } = await subscription.next();
        if (done) break;
        const line = { type: value.type, stepName: value.stepName, timestamp: value.timestamp };
        await writer.write(encoder.encode(`${JSON.stringify(line)}\n`));
      }
      await writer.write(encoder.encode(`${JSON.stringify({ done: true })}\n`));
    } catch (error) {
      await writer.write(encoder.encode(`${JSON.stringify({ error: String(error) })}\n`));
    }
    await writer.close();
  })();
  return new Response(readable, { headers: { "content-type": "application/x-ndjson" } });
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/watch") return watch(env, url.searchParams.get("id"));
    return core.fetch(request, env, ctx);
  },
};
