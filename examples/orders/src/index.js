// A Worker with a Workflow and a Durable Object that call each other.
//
// POST /orders {"item"} creates a Fulfil instance. Each step reports to the Board (one
// Durable Object for the whole shop, SQLite-backed) over RPC. The Board keeps a row per
// order, and an alarm: half an hour after an order starts waiting for payment it writes
// a reminder for every order still unpaid. POST /orders/:id/pay sends the Workflow its
// payment event; GET /board shows every order.
import { DurableObject, WorkflowEntrypoint } from "cloudflare:workers";

const REMIND_AFTER_MS = 30 * 60 * 1000;

export class Board extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS orders (
      id TEXT PRIMARY KEY, item TEXT NOT NULL, state TEXT NOT NULL,
      updated INTEGER NOT NULL, reminders INTEGER NOT NULL DEFAULT 0)`);
  }

  /** Called by the Workflow's steps: record where an order is. */
  async record(id, item, state) {
    this.ctx.storage.sql.exec(
      `INSERT INTO orders (id, item, state, updated) VALUES (?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated = excluded.updated`,
      id, item, state, Date.now(),
    );
    if (state === "awaiting payment" && (await this.ctx.storage.getAlarm()) === null) {
      await this.ctx.storage.setAlarm(Date.now() + REMIND_AFTER_MS);
    }
    return this.order(id);
  }

  order(id) {
    const rows = this.ctx.storage.sql.exec("SELECT * FROM orders WHERE id = ?", id).toArray();
    return rows[0] ?? null;
  }

  list() {
    return this.ctx.storage.sql.exec("SELECT * FROM orders ORDER BY updated, id").toArray();
  }

  /** The reminder round: every unpaid order gets one more reminder. */
  async alarm() {
    const cursor = this.ctx.storage.sql.exec(
      "UPDATE orders SET reminders = reminders + 1 WHERE state = 'awaiting payment'",
    );
    console.log(`reminded ${cursor.rowsWritten} unpaid order(s)`);
  }

  /** Start an order from inside the Object: the Object drives the Workflow too. */
  async start(item) {
    const instance = await this.env.FULFIL.create({ params: { item } });
    await this.record(instance.id, item, "created");
    return instance.id;
  }
}

export class Fulfil extends WorkflowEntrypoint {
  async run(event, step) {
    const board = this.env.BOARD.getByName("shop");
    const { item } = event.payload;
    const id = event.instanceId;
    await step.do("reserve stock", () => board.record(id, item, "reserved"));
    await step.do("ask for payment", () => board.record(id, item, "awaiting payment"));
    const payment = await step.waitForEvent("payment", { type: "paid", timeout: "1 day" });
    await step.do("ship", () => board.record(id, item, "shipped"));
    return { item, paidBy: payment.payload.by };
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const board = env.BOARD.getByName("shop");
    const parts = url.pathname.split("/").filter(Boolean);
    if (request.method === "POST" && url.pathname === "/orders") {
      const { item } = await request.json();
      return Response.json({ id: await board.start(String(item)) });
    }
    if (parts[0] === "orders" && parts[1]) {
      const instance = await env.FULFIL.get(parts[1]);
      if (request.method === "POST" && parts[2] === "pay") {
        await instance.sendEvent({ type: "paid", payload: await request.json() });
      }
      const { status, output } = await instance.status();
      return Response.json({ id: parts[1], status, output: output ?? null, board: await board.order(parts[1]) });
    }
    if (url.pathname === "/board") return Response.json(await board.list());
    return new Response("POST /orders, GET /orders/:id, POST /orders/:id/pay, GET /board\n", { status: 404 });
  },
};
