import { Hono } from "hono";
import { z } from "zod";
import { customAlphabet, nanoid } from "nanoid";
import { AutoRouter } from "itty-router";
import * as cookie from "cookie";
import { WorkflowEntrypoint, WorkflowEvent, WorkflowStep } from "cloudflare:workers";
import { D1Database, ExecutionContext } from "@cloudflare/workers-types";
import { defaults, Flag, Rect, Role, Units } from "./model";
import ms = require("ms");
import { Buffer } from "node:buffer";
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { EventEmitter, once } from "node:events";
import path from "node:path";
import { promisify, inspect } from "node:util";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";

interface Env {
  GREETING: string;
  GREETER: Workflow;
  DB?: D1Database;
}

type Params = { name: string };

export class Greeter extends WorkflowEntrypoint<Env, Params> {
  async run(event: WorkflowEvent<Params>, step: WorkflowStep): Promise<string> {
    const upper = await step.do("upper", async () => event.payload.name.toUpperCase());
    return `${this.env.GREETING}, ${upper}`;
  }
}

const User = z.object({
  name: z.string().min(2),
  age: z.number().int().nonnegative(),
  email: z.string().email().optional(),
});
type User = z.infer<typeof User>;

const app = new Hono<{ Bindings: Env }>();

app.get("/hello", (c) => c.json({ hello: "npm", greeting: c.env.GREETING }));

app.post("/users", async (c) => {
  const body = await c.req.json<unknown>();
  const parsed = User.safeParse(body);
  if (!parsed.success) {
    return c.json({ errors: parsed.error.issues.map((i) => [i.path.join("."), i.code]) }, 400);
  }
  const user: User = parsed.data;
  return c.json({ created: user }, 201);
});

app.get("/strict", (c) => c.json(User.parse({ name: 1 }))); // hono catches the ZodError

app.get("/ids", (c) => {
  const id = nanoid();
  return c.json({
    length: id.length,
    urlSafe: /^[A-Za-z0-9_-]+$/.test(id),
    custom: customAlphabet("ab", 6)().replace(/[ab]/g, "x"),
  });
});

app.get("/cookies", (c) => {
  const jar = cookie.parse(c.req.header("cookie") ?? "");
  c.header("set-cookie", cookie.serialize("seen", "yes", { httpOnly: true, maxAge: 60 }));
  return c.json({ jar });
});

app.get("/ms/:value", (c) => c.json({ ms: ms(c.req.param("value")), text: ms(90_000) }));

app.get("/ts", (c) => {
  const rect = new Rect(3, 4);
  return c.json({
    roles: [Role.Reader, Role.Writer, Role.Admin, Role.Owner, Role[6]],
    flags: [Flag.Read, Flag.Write, Flag.All],
    rect: [rect.describe(), rect.width, rect.label, Object.keys(rect).sort()],
    units: [Units.times(2), Units.Nested.tag],
    defaults,
  });
});

app.get("/node", async (c) => {
  const bus = new EventEmitter();
  const fired = once(bus, "ready");
  bus.emit("ready", "go");
  const later = promisify((value: number, done: (e: Error | null, v?: number) => void) =>
    done(null, value * 2),
  );
  const digest = createHash("sha256").update("celld").digest("hex");
  const mac = createHmac("sha1", "key").update("data").digest("base64");
  const streamed: string[] = [];
  await pipeline(
    Readable.from(["x", "y"]),
    new Transform({
      transform(chunk, _encoding, done) {
        streamed.push(String(chunk).toUpperCase());
        done(null, chunk);
      },
    }),
  );
  return c.json({
    buffer: [Buffer.from("héllo").toString("base64"), Buffer.from("68690a", "hex").toString()],
    digest,
    mac,
    same: timingSafeEqual(Buffer.from("ab"), Buffer.from("ab")),
    events: await fired,
    promisified: await later(21),
    inspect: inspect({ a: [1, { b: 2 }] }),
    path: [path.join("/a/b", "../c.txt"), path.extname("x.tar.gz")],
    env: process.env.GREETING,
    streamed,
  });
});

app.post("/form", async (c) => {
  const form = await c.req.raw.formData();
  const file = form.get("upload");
  return c.json({
    name: form.get("name"),
    tags: form.getAll("tag"),
    file: file instanceof File ? [file.name, file.type, await file.text()] : null,
  });
});

app.get("/signed/:message", async (c) => {
  const encoder = new TextEncoder();
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode("top secret"),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign", "verify"],
  );
  const data = encoder.encode(c.req.param("message"));
  const signature = await crypto.subtle.sign("HMAC", key, data);
  return c.json({
    signature: Buffer.from(signature).toString("hex"),
    verified: await crypto.subtle.verify("HMAC", key, signature, data),
  });
});

app.get("/moved", () => Response.redirect(new URL("/hello?from=moved", "https://example.com/x"), 307));

const router = AutoRouter({ base: "/itty" });
router.get("/items/:id", ({ id }) => ({ id, via: "itty-router" }));
app.all("/itty/*", (c) => router.fetch(c.req.raw));

app.post("/greet/:name", async (c) => {
  const instance = await c.env.GREETER.create({ params: { name: c.req.param("name") } });
  return c.json({ id: instance.id });
});

app.get("/greet/:id", async (c) => {
  const instance = await c.env.GREETER.get(c.req.param("id"));
  return c.json(await instance.status());
});

app.notFound((c) => c.json({ error: "not found", path: new URL(c.req.url).pathname }, 404));

export default {
  fetch(request: Request, env: Env, ctx: ExecutionContext) {
    if (new URL(request.url).pathname === "/boom") {
      // an error thrown inside a CommonJS package, not caught by anything
      ms(undefined as unknown as string);
    }
    return app.fetch(request, env, ctx);
  },
};
