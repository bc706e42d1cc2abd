import type { Shape } from "./shapes";
import { area } from "./shapes.js";

type Env = Record<string, unknown>;

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const shapes: Shape[] = [{ kind: "square", size: 3 }, { kind: "circle", size: 2 }];
    const areas = shapes.map((s) => area(s)) as number[];
    return Response.json({ areas });
  },
} satisfies ExportedHandler<Env>;
