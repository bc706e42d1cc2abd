// Signed, expiring tokens. Written the way a TypeScript Worker usually is: npm packages
// (hono, zod, nanoid, and ms, which is CommonJS), an enum, a class with parameter
// properties, and type-only names imported like values.
import { Hono } from "hono";
import { z } from "zod";
import { nanoid } from "nanoid";
import ms from "ms";
import { Buffer } from "node:buffer";

interface Env {
  SIGNING_KEY: string;
}

enum Scope {
  Read = "read",
  Write = "write",
}

const Claims = z.object({
  user: z.string().min(1).max(64),
  scope: z.nativeEnum(Scope).default(Scope.Read),
  ttl: z.string().default("1h"),
});

class Signer {
  constructor(private readonly secret: string) {}

  private async key(): Promise<CryptoKey> {
    return crypto.subtle.importKey(
      "raw",
      new TextEncoder().encode(this.secret),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign", "verify"],
    );
  }

  async sign(payload: object): Promise<string> {
    const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
    const mac = await crypto.subtle.sign("HMAC", await this.key(), new TextEncoder().encode(body));
    return `${body}.${Buffer.from(mac).toString("base64url")}`;
  }

  async verify(token: string): Promise<Record<string, unknown> | null> {
    const [body, mac] = token.split(".");
    if (!body || !mac) return null;
    const ok = await crypto.subtle.verify(
      "HMAC",
      await this.key(),
      Buffer.from(mac, "base64url"),
      new TextEncoder().encode(body),
    );
    return ok ? JSON.parse(Buffer.from(body, "base64url").toString()) : null;
  }
}

const app = new Hono<{ Bindings: Env }>();

app.post("/tokens", async (c) => {
  const parsed = Claims.safeParse(await c.req.json().catch(() => ({})));
  if (!parsed.success) {
    return c.json({ error: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`) }, 400);
  }
  const lifetime = ms(parsed.data.ttl);
  if (typeof lifetime !== "number" || lifetime <= 0) {
    return c.json({ error: [`ttl: cannot read ${JSON.stringify(parsed.data.ttl)}`] }, 400);
  }
  const claims = { ...parsed.data, id: nanoid(), expires: Date.now() + lifetime };
  return c.json({ token: await new Signer(c.env.SIGNING_KEY).sign(claims), claims }, 201);
});

app.get("/tokens/:token", async (c) => {
  const claims = await new Signer(c.env.SIGNING_KEY).verify(c.req.param("token"));
  if (claims === null) return c.json({ valid: false, reason: "bad signature" }, 401);
  if (Number(claims.expires) < Date.now()) {
    return c.json({ valid: false, reason: `expired ${ms(Date.now() - Number(claims.expires))} ago` }, 401);
  }
  return c.json({ valid: true, claims });
});

export default {
  fetch: (request: Request, env: Env, ctx: ExecutionContext) => app.fetch(request, env, ctx),
};
