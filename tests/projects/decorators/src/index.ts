import { Api, routes } from "./routes";
import { standardReport } from "./standard.js";

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/experimental") {
      const api = new Api() as Api & { prefix: string };
      return Response.json({
        prefix: api.prefix,
        routes,
        hello: api.hello("ada"),
        echo: api.echo([1, 2]),
        name: Api.name,
      });
    }
    if (url.pathname === "/standard") return Response.json(standardReport());
    return new Response("not found", { status: 404 });
  },
};
