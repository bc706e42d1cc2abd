export default {
  async fetch(req, env) {
    return Response.json({
      hello: env.NAME,
      path: new URL(req.url).pathname,
      ua: req.headers.get("user-agent"),
    });
  },
};
