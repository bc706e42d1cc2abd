// A small interpreter over the KV, D1 and R2 bindings, so compat scenarios drive them over
// HTTP and compare what a Worker sees. POST /storage with a JSON array of operations:
//
//   {"b": "KV"|"DB"|"BUCKET", "m": "<method>", "args": [...], "read": "text"|"json"|...}
//   {"b": "DB", "prepare": SQL, "bind": [...], "m": "first"|"all"|"raw"|"run", "args": [...]}
//   {"b": "DB", "m": "batch", "statements": [{"prepare": SQL, "bind": [...]}]}
//   {"b": "BUCKET", "m": "multipart", "key": K, "parts": [...], "options": {...}}
//
// Arguments may hold {"$bytes": [..]}, {"$stream": "text"}, {"$headers": [[k, v]]},
// {"$date": ms} and {"$repeat": [text, n]} (text repeated n times, built in the Worker). Each result is described as JSON ({"error": {name, message}} if it threw).
import { WorkflowEntrypoint } from "cloudflare:workers";

function decodeArg(value) {
  if (Array.isArray(value)) return value.map(decodeArg);
  if (value && typeof value === "object") {
    if ("$bytes" in value) return new Uint8Array(value.$bytes).buffer;
    if ("$view" in value) return new Uint8Array(value.$view);
    if ("$stream" in value) {
      const bytes = new TextEncoder().encode(value.$stream);
      return new ReadableStream({
        start(controller) {
          controller.enqueue(bytes);
          controller.close();
        },
      });
    }
    if ("$headers" in value) return new Headers(value.$headers);
    if ("$date" in value) return new Date(value.$date);
    if ("$repeat" in value) return value.$repeat[0].repeat(value.$repeat[1]);
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = decodeArg(v);
    return out;
  }
  return value;
}

async function describe(value, read) {
  if (value === undefined) return { undefined: true };
  if (value === null || typeof value !== "object") return value;
  if (value instanceof ArrayBuffer) return { arrayBuffer: Array.from(new Uint8Array(value)) };
  if (ArrayBuffer.isView(value)) return { view: Array.from(new Uint8Array(value.buffer, value.byteOffset, value.byteLength)) };
  if (value instanceof Date) return { date: value.toISOString() };
  if (value instanceof ReadableStream) return { stream: await new Response(value).text() };
  if (value instanceof Map) {
    const out = [];
    for (const [k, v] of value) out.push([k, await describe(v)]);
    return { map: out };
  }
  if (value instanceof Headers) return { headers: [...value] };
  if (typeof value.writeHttpMetadata === "function") return describeObject(value, read);
  if (Array.isArray(value)) return Promise.all(value.map((v) => describe(v, read)));
  const out = {};
  for (const [k, v] of Object.entries(value)) out[k] = await describe(v, read);
  return out;
}

async function describeObject(o, read) {
  const headers = new Headers();
  o.writeHttpMetadata(headers);
  const out = {
    class: "body" in o ? "R2ObjectBody" : "R2Object",
    key: o.key,
    size: o.size,
    etag: o.etag,
    httpEtag: o.httpEtag,
    version: typeof o.version,
    uploaded: o.uploaded instanceof Date ? "Date" : typeof o.uploaded,
    httpMetadata: await describe(o.httpMetadata),
    customMetadata: o.customMetadata,
    range: o.range,
    checksums: o.checksums ? o.checksums.toJSON() : null,
    storageClass: o.storageClass,
    written: [...headers],
  };
  if ("body" in o) {
    out.bodyUsed = o.bodyUsed;
    if (read === "stream") out.body = await new Response(o.body).text();
    else if (read === "arrayBuffer") out.body = Array.from(new Uint8Array(await o.arrayBuffer()));
    else if (read === "json") out.body = await o.json();
    else if (read === "length") out.body = (await o.text()).length;
    else if (read) out.body = await o.text();
  }
  return out;
}

function statement(db, op) {
  let s = db.prepare(op.prepare);
  if (op.bind) s = s.bind(...decodeArg(op.bind));
  return s;
}

async function runOp(env, op) {
  const binding = env[op.b];
  if (op.b === "DB") {
    const db = op.session ? binding.withSession(op.session) : binding;
    if (op.m === "batch") return db.batch(op.statements.map((s) => statement(db, s)));
    if (op.m === "exec") return db.exec(...decodeArg(op.args || []));
    if (op.m === "bookmark") return typeof db.getBookmark;
    return statement(db, op)[op.m](...decodeArg(op.args || []));
  }
  if (op.b === "BUCKET" && op.m === "multipart") {
    const upload = await binding.createMultipartUpload(op.key, decodeArg(op.options));
    const resumed = binding.resumeMultipartUpload(op.key, upload.uploadId);
    const parts = [];
    for (let i = 0; i < op.parts.length; i++) {
      parts.push(await resumed.uploadPart(i + 1, decodeArg(op.parts[i])));
    }
    if (op.abort) return resumed.abort();
    return resumed.complete(op.order ? op.order.map((n) => parts[n]) : parts);
  }
  return binding[op.m](...decodeArg(op.args || []));
}

/** Run the operations in order; each result described as JSON. */
export async function runStorageOps(env, ops) {
  const out = [];
  for (const op of ops) {
    try {
      out.push(await describe(await runOp(env, op), op.read));
    } catch (e) {
      out.push({ error: { name: e && e.name, message: e && e.message } });
    }
  }
  return out;
}

/** A workflow whose steps each run one storage operation (params: {ops}). */
export class StorageWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const results = [];
    for (const [index, op] of event.payload.ops.entries()) {
      results.push(await step.do(`op ${index}`, async () => (await runStorageOps(this.env, [op]))[0]));
    }
    return { results };
  }
}
