// Routes that each make one write and answer only once it is acknowledged, and a
// Workflow whose steps write to every other kind and then tell an outside recorder.
//
// PUT /kv/KEY, PUT /r2/KEY: store the request body (R2 streamed); GET reads it back.
// PUT /d1/KEY: inserts KEY into the D1 table `items`; GET /d1-list: every key.
// POST /do/NAME/inc: one turn of the object NAME; GET /do/NAME/turns: all its turns.
// POST /do/NAME/hold?gate=URL: one turn that answers only once GET URL/hold answers (the
//   test holds it there, so that it is in flight when the object's process dies).
// GET /do/NAME/id: the object's id (the test works out which process owns it).
// POST /q/KEY: sends {id: KEY} to the queue; GET /q-list: [{id, n}], n deliveries of each.
// POST /wf/ID?recorder=URL: creates the instance ID; GET /wf/ID: its status.
import { DurableObject, WorkflowEntrypoint } from "cloudflare:workers";

// Each step writes one kind after a pause; the last sends the recorder the values the steps returned
// (the recorder's claims: after every kill the journal must agree with each of them).
export class Everything extends WorkflowEntrypoint {
  async run(event, step) {
    const { id, recorder } = event.payload;
    const draw = await step.do("draw", async () => crypto.randomUUID());
    // a timer, so that instances are mid-run (asleep or resuming) at every fault
    await step.sleep("pause", "1 second");
    await step.do("kv", async () => {
      await this.env.KV.put(`wf/${id}`, draw);
      return true;
    });
    await step.do("r2", async () => (await this.env.BUCKET.put(`wf/${id}`, draw)).size);
    await step.do("d1", async () => {
      await insert(this.env, `wf/${id}`);
      return true;
    });
    const turn = await step.do("object", async () => {
      const stub = this.env.COUNTER.get(this.env.COUNTER.idFromName(`wf-${id}`));
      return (await stub.inc(`wf/${id}`)).seq;
    });
    const claims = [
      { instance: id, step: "draw", value: draw },
      { instance: id, step: "object", value: turn },
    ];
    const sent = await fetch(`${recorder}/effect?instance=${encodeURIComponent(id)}`, {
      method: "POST",
      body: JSON.stringify({ claims }),
    });
    if (!sent.ok) throw new Error(`the recorder answered ${sent.status}`);
    return { id, draw, turn };
  }
}

// Each live copy of an object has its own `life` and counts its own calls: every turn
// records both, so two live copies of one object (two owners) would show as two lives
// whose turns interleave, and a copy that missed a turn as a gap in its count.
export class Counter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.life = crypto.randomUUID();
    this.calls = 0;
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS turns (seq INTEGER PRIMARY KEY, node TEXT NOT NULL, life TEXT NOT NULL, call INTEGER NOT NULL, kind TEXT NOT NULL)",
    );
  }

  inc(kind = "inc") {
    this.calls += 1;
    const last = this.ctx.storage.sql.exec("SELECT coalesce(max(seq), 0) AS n FROM turns").one().n;
    this.ctx.storage.sql.exec(
      "INSERT INTO turns (seq, node, life, call, kind) VALUES (?, ?, ?, ?, ?)",
      last + 1,
      this.env.NODE,
      this.life,
      this.calls,
      kind,
    );
    return { seq: last + 1, node: this.env.NODE, life: this.life, call: this.calls };
  }

  async hold(gate, key) {
    const turn = this.inc("hold");
    const answer = await fetch(`${gate}/hold?key=${encodeURIComponent(key)}`);
    if (!answer.ok) throw new Error(`the gate answered ${answer.status}`);
    return turn;
  }

  turns() {
    return this.ctx.storage.sql.exec("SELECT seq, node, life, call, kind FROM turns ORDER BY seq").toArray();
  }
}

// Idempotent, as a step's effects must be: a step runs at least once, and a node that
// dies (or loses its lease) after the insert but before the step's result is committed
// leaves the row for the step's next attempt to find.
async function insert(env, key) {
  await env.DB.prepare(
    "CREATE TABLE IF NOT EXISTS items (k TEXT PRIMARY KEY); " +
      "INSERT INTO items (k) VALUES (?) ON CONFLICT (k) DO NOTHING",
  ).bind(key).run();
}

const DELIVERIES =
  "CREATE TABLE IF NOT EXISTS deliveries (id TEXT PRIMARY KEY, n INTEGER NOT NULL); ";

// One row per message body id, counting its deliveries: a redelivery after a fault adds
// to n and never hides that the message arrived.
async function delivered(env, id) {
  await env.DB.prepare(
    `${DELIVERIES}INSERT INTO deliveries (id, n) VALUES (?, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1`,
  ).bind(id).run();
}

function json(body, status = 200) {
  return Response.json(body, { status });
}

async function route(request, env, url) {
  const [, kind, ...rest] = url.pathname.split("/");
  const key = decodeURIComponent(rest.join("/"));
  const put = request.method === "PUT" || request.method === "POST";
  if (kind === "kv") {
    if (put) {
      await env.KV.put(key, await request.arrayBuffer());
      return json({ ok: true });
    }
    const value = await env.KV.get(key, "arrayBuffer");
    return value === null ? json({ missing: key }, 404) : new Response(value);
  }
  if (kind === "r2") {
    if (put) {
      const object = await env.BUCKET.put(key, request.body);
      return json({ size: object.size });
    }
    const object = await env.BUCKET.get(key);
    return object === null ? json({ missing: key }, 404) : new Response(object.body);
  }
  if (kind === "d1") {
    await insert(env, key);
    return json({ ok: true });
  }
  if (kind === "d1-list") {
    const { results } = await env.DB.prepare("SELECT k FROM items ORDER BY k").all();
    return json(results.map((row) => row.k));
  }
  if (kind === "do") {
    const [name, what] = rest;
    const stub = env.COUNTER.get(env.COUNTER.idFromName(name));
    if (what === "inc") return json(await stub.inc());
    if (what === "hold") return json(await stub.hold(url.searchParams.get("gate"), name));
    if (what === "id") return json(env.COUNTER.idFromName(name).toString());
    return json(await stub.turns());
  }
  if (kind === "q") {
    await env.JOBS.send({ id: key });
    return json({ ok: true });
  }
  if (kind === "q-list") {
    await env.DB.prepare(DELIVERIES).run();
    const { results } = await env.DB.prepare("SELECT id, n FROM deliveries ORDER BY id").all();
    return json(results);
  }
  if (kind === "wf") {
    if (put) {
      const params = { id: key, recorder: url.searchParams.get("recorder") };
      await env.EVERYTHING.create({ id: key, params });
      return json({ id: key });
    }
    return json(await (await env.EVERYTHING.get(key)).status());
  }
  return json({ error: "no such route" }, 404);
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    return route(request, env, url).catch((e) => json({ error: { name: e.name, message: e.message } }, 500));
  },

  // Each message recorded, then acknowledged on its own: a batch cut short by a fault
  // delivers again only what was not recorded (or whose record was not acknowledged).
  async queue(batch, env) {
    for (const message of batch.messages) {
      await delivered(env, message.body.id);
      message.ack();
    }
  },
};
