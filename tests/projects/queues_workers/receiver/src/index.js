// Records every message of "handoff" under its tag; fetch() reads a record back.
export default {
  async queue(batch, env) {
    for (const message of batch.messages) {
      const record = { queue: batch.queue, body: message.body, attempts: message.attempts };
      await env.SEEN.put(message.body.tag, JSON.stringify(record));
      message.ack();
    }
  },
  async fetch(request, env) {
    const tag = new URL(request.url).searchParams.get("tag") ?? "";
    return Response.json(JSON.parse((await env.SEEN.get(tag)) ?? "null"));
  },
};
