// Sends to a queue another Worker consumes, and reads back (through a service binding)
// what that Worker's queue() handler recorded.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const tag = url.searchParams.get("tag") ?? "";
    if (url.pathname === "/send") {
      await env.OUT.send({ tag, from: "q-sender" });
      return Response.json({ sent: tag });
    }
    if (url.pathname === "/seen") {
      return env.RECEIVER.fetch(`http://receiver/seen?tag=${encodeURIComponent(tag)}`);
    }
    return new Response("not found", { status: 404 });
  },
};
