// A digest built on a schedule. Each tick of `schedules` starts one instance whose
// `event.schedule` says which expression fired and for which minute (epoch ms, UTC).
import { WorkflowEntrypoint } from "cloudflare:workers";

export class DigestWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const window = await step.do("window", async () => {
      // the half hour (or day) this digest covers ends at the scheduled minute
      const end = event.schedule ? event.schedule.scheduledTime : event.timestamp.getTime();
      return { from: end - 30 * 60 * 1000, to: end };
    });
    await step.sleep("let late events arrive", "1 minute");
    const digest = await step.do("compose", async () => ({
      cron: event.schedule ? event.schedule.cron : null,
      covers: `${new Date(window.from).toISOString()} .. ${new Date(window.to).toISOString()}`,
    }));
    return digest;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    // GET /digest?id=<instance id>: the status (and digest) of one run
    if (url.pathname === "/digest" && request.method === "GET") {
      const id = url.searchParams.get("id");
      let instance;
      try {
        instance = await env.DIGEST.get(id);
      } catch (error) {
        // no such run (yet): a tick's instance exists only once its minute has come
        return Response.json({ id, error: String(error.message ?? error) }, { status: 404 });
      }
      return Response.json(await instance.status());
    }
    // POST /digest: a digest now, outside the schedule
    if (url.pathname === "/digest" && request.method === "POST") {
      const instance = await env.DIGEST.create();
      return Response.json({ id: instance.id });
    }
    return new Response("digest: runs on a schedule; see README.md\n");
  },
};
