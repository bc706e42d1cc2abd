// Uses a little of each package, so a test can check they load and work together.
import { SignJWT, jwtVerify } from "jose";
import { addDays, format } from "date-fns";
import { v4 as uuidv4, validate } from "uuid";
import { chunk } from "lodash-es";
import _ from "lodash";
import { Hono } from "hono";
import { zValidator } from "@hono/zod-validator";
import { z } from "zod";
import * as v from "valibot";
import superjson from "superjson";
import dayjs from "dayjs";
import qs from "qs";
import { sql } from "drizzle-orm";

export async function run() {
  const secret = new TextEncoder().encode("s3cret-s3cret-s3cret-s3cret-s3cret");
  const jwt = await new SignJWT({ sub: "ada" }).setProtectedHeader({ alg: "HS256" }).setIssuedAt(0).sign(secret);
  const verified = await jwtVerify(jwt, secret);
  const app = new Hono();
  app.post("/", zValidator("json", z.object({ a: z.number() })), (c) => c.json(c.req.valid("json")));
  const res = await app.request("/", { method: "POST", body: JSON.stringify({ a: 1 }), headers: { "content-type": "application/json" } });
  return {
    jwt: verified.payload.sub,
    date: format(addDays(new Date(0), 1), "yyyy-MM-dd"),
    uuid: validate(uuidv4()),
    chunk: chunk([1, 2, 3], 2),
    lodash: _.camelCase("hello world"),
    hono: await res.json(),
    valibot: v.safeParse(v.string(), 1).success,
    superjson: superjson.stringify({ d: new Date(0) }),
    dayjs: dayjs(0).add(1, "day").toISOString(),
    qs: qs.parse("a[b]=1"),
    drizzle: typeof sql,
  };
}
