// A guestbook whose entries are moderated by a Workflow.
//
//   POST /entries {"name", "message"}   store the entry as pending, start its moderation
//   GET  /entries                       published entries, newest first
//   GET  /entries/:id                   one entry and its moderation status
//   GET  /stats                         the published count kept in KV
import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

const HELD_WORDS = ["spam", "casino"];

export class Moderate extends WorkflowEntrypoint {
  async run(event, step) {
    const { entryId } = event.payload;
    const entry = await step.do("load entry", async () => {
      const row = await this.env.DB.prepare("SELECT id, name, message FROM entries WHERE id = ?")
        .bind(entryId)
        .first();
      if (row === null) throw new NonRetryableError(`entry ${entryId} does not exist`);
      return row;
    });
    const verdict = await step.do("check words", async () => {
      const word = HELD_WORDS.find((w) => entry.message.toLowerCase().includes(w));
      return word ? { status: "held", reason: `contains "${word}"` } : { status: "published", reason: null };
    });
    const changes = await step.do("record verdict", async () => {
      const result = await this.env.DB.prepare("UPDATE entries SET status = ?, reason = ? WHERE id = ?")
        .bind(verdict.status, verdict.reason, entryId)
        .run();
      return result.meta.changes;
    });
    const published = await step.do("update count", async () => {
      const count = await this.env.DB.prepare("SELECT count(*) AS n FROM entries WHERE status = 'published'")
        .first("n");
      await this.env.STATS.put("published", String(count), { metadata: { lastEntry: entryId } });
      return count;
    });
    return { entryId, ...verdict, changes, published };
  }
}

function json(body, status = 200) {
  return new Response(JSON.stringify(body, null, 2), {
    status,
    headers: { "content-type": "application/json" },
  });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const [, resource, id] = url.pathname.split("/");
    try {
      if (resource === "entries" && !id && request.method === "POST") {
        const { name, message } = await request.json();
        if (typeof name !== "string" || typeof message !== "string") {
          return json({ error: "name and message must be strings" }, 400);
        }
        const row = await env.DB.prepare("INSERT INTO entries (name, message) VALUES (?, ?) RETURNING id")
          .bind(name, message)
          .first();
        const instance = await env.MODERATE.create({ id: `entry-${row.id}`, params: { entryId: row.id } });
        return json({ id: row.id, moderation: instance.id }, 201);
      }
      if (resource === "entries" && !id) {
        const { results } = await env.DB.prepare(
          "SELECT id, name, message, created_at FROM entries WHERE status = 'published' ORDER BY id DESC",
        ).all();
        return json(results);
      }
      if (resource === "entries") {
        const entry = await env.DB.prepare("SELECT * FROM entries WHERE id = ?").bind(Number(id)).first();
        if (entry === null) return json({ error: "no such entry" }, 404);
        const moderation = await (await env.MODERATE.get(`entry-${id}`)).status();
        return json({ entry, moderation });
      }
      if (resource === "stats") {
        const { value, metadata } = await env.STATS.getWithMetadata("published");
        return json({ published: Number(value ?? 0), lastEntry: metadata?.lastEntry ?? null });
      }
      return json({ error: "not found" }, 404);
    } catch (e) {
      return json({ error: `${e.name}: ${e.message}` }, 500);
    }
  },
};
