// A small HTTP API over the Workflow bindings, so a driver does everything over HTTP.
// Every endpoint takes ?wf=SCRIPT|BENCH|LIMITED (default SCRIPT). Success: JSON 200.
// Anything a binding throws: 500 {"error": {name, message}}.
export { ScriptWorkflow, BenchWorkflow, CronWorkflow } from "./workflows.js";
export { StorageWorkflow } from "./storage.js";
import { describe } from "./workflows.js";
import { runStorageOps } from "./storage.js";

function json(body, status = 200) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function errorBody(e) {
  return { error: { name: e && e.name, message: e && e.message, string: String(e) } };
}

async function readJson(request, fallback) {
  const text = await request.text();
  return text === "" ? fallback : JSON.parse(text);
}

async function statusOf(instance) {
  const s = await instance.status();
  const out = { status: s.status };
  if (s.error !== undefined) out.error = s.error;
  if (s.output !== undefined) out.output = describe(s.output);
  if (s.rollback !== undefined && s.rollback !== null) out.rollback = s.rollback;
  return out;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    const wf = env[q.get("wf") || "SCRIPT"];
    const id = q.has("id") ? q.get("id") : undefined;
    try {
      switch (url.pathname) {
        case "/health":
          return json({ ok: true });
        case "/storage":
          return json(await runStorageOps(env, await readJson(request, [])));
        case "/create": {
          const params = await readJson(request, undefined);
          const options = {};
          if (id !== undefined) options.id = id;
          if (params !== undefined) options.params = params;
          if (q.has("retention")) options.retention = JSON.parse(q.get("retention"));
          const instance = await wf.create(options);
          return json({ id: instance.id });
        }
        case "/create-raw": {
          // body: the whole options object given to create()
          const instance = await wf.create(await readJson(request, undefined));
          return json({ id: instance.id });
        }
        case "/create-batch": {
          const result = await wf.createBatch(await readJson(request, []));
          if (Array.isArray(result)) return json({ ids: result.map((i) => i.id) });
          return json({ created: result.created.map((i) => i.id), errors: result.errors });
        }
        case "/delete-batch":
          // body: the ids given to deleteBatch(); its {deleted, errors} as they come
          return json(await wf.deleteBatch(await readJson(request, [])));
        case "/get":
          return json({ id: (await wf.get(id)).id });
        case "/status":
          return json(await statusOf(await wf.get(id)));
        case "/statuses": {
          const ids = await readJson(request, []);
          const out = {};
          await Promise.all(ids.map(async (i) => {
            try {
              out[i] = await statusOf(await wf.get(i));
            } catch (e) {
              out[i] = errorBody(e);
            }
          }));
          return json(out);
        }
        case "/event": {
          const payload = await readJson(request, undefined);
          const instance = await wf.get(id);
          const event = {};
          if (q.has("type")) event.type = q.get("type");
          if (payload !== undefined) event.payload = payload;
          await instance.sendEvent(event);
          return json({ ok: true });
        }
        case "/subscribe": {
          // ?id=&filter=a,b&cursor=N&max=N: read events until done (or max), then report
          // them without the fields that vary (eventId, timestamp) and check those
          const instance = await wf.get(id);
          const options = {};
          if (q.has("filter")) options.filter = q.get("filter").split(",");
          if (q.has("cursor")) options.cursor = Number(q.get("cursor"));
          if (q.has("options")) Object.assign(options, JSON.parse(q.get("options")));
          const subscription = await instance.subscribe(options);
          const max = Number(q.get("max") || 1000);
          const events = [];
          const ids = [];
          let ordered = true;
          let fieldsOk = true;
          let ended = false;
          while (events.length < max) {
            const result = await subscription.next();
            if (result.done) {
              ended = true;
              break;
            }
            const { instanceId, eventId, timestamp, ...rest } = result.value;
            if (ids.length && eventId <= ids[ids.length - 1]) ordered = false;
            if (instanceId !== id || typeof timestamp !== "number") fieldsOk = false;
            ids.push(eventId);
            if (rest.output !== undefined) rest.output = describe(rest.output);
            events.push(rest);
          }
          const after = ended ? await subscription.next() : null;
          return json({ events, ended, ordered, fieldsOk, lastEventId: ids[ids.length - 1] ?? null,
            doneAfterEnd: after ? after.done === true : null });
        }
        case "/pause":
        case "/resume":
        case "/terminate":
        case "/restart":
        case "/delete": {
          const instance = await wf.get(id);
          const op = url.pathname.slice(1);
          const options = op === "restart" || op === "terminate" ? await readJson(request, undefined) : undefined;
          await instance[op](options);
          return json({ ok: true });
        }
      }
      return json({ error: { name: "NotFound", message: url.pathname } }, 404);
    } catch (e) {
      return json(errorBody(e), 500);
    }
  },
};
