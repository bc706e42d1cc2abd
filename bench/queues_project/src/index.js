// POST /send?n=N: N messages with send() one after another; POST /batch?n=N: one sendBatch()
// of N; GET /backlog: the queue's metrics(). The consumer acknowledges every batch.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") || "1");
    if (url.pathname === "/send") {
      for (let i = 0; i < n; i++) await env.Q.send({ i });
      return new Response("ok");
    }
    if (url.pathname === "/batch") {
      await env.Q.sendBatch(Array.from({ length: n }, (_, i) => ({ body: { i } })));
      return new Response("ok");
    }
    if (url.pathname === "/backlog") return Response.json(await env.Q.metrics());
    return new Response("not found", { status: 404 });
  },
  async queue(batch) {
    let sum = 0;
    for (const message of batch.messages) sum += message.body.i;
    return sum;
  },
};
