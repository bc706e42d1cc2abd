import { WorkflowEntrypoint } from "cloudflare:workers";

const KINDS = [
  "ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array",
  "Uint16Array", "Int32Array", "Uint32Array", "Float32Array", "Float64Array",
  "BigInt64Array", "BigUint64Array",
];

/** `size` bytes of a pattern that depends on `seed` (every byte value occurs). */
function pattern(size, seed) {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + seed * 7 + (i >> 8)) & 255;
  return bytes;
}

function make(kind, size, seed) {
  const bytes = pattern(size, seed);
  if (kind === "ArrayBuffer") return bytes.buffer;
  const Type = globalThis[kind];
  return kind === "DataView" ? new DataView(bytes.buffer) : new Type(bytes.buffer);
}

/** What a value is, for the test to compare: its type and its bytes' digest. */
async function describe(value) {
  const type = value instanceof ArrayBuffer ? "ArrayBuffer" : value.constructor.name;
  const view = value instanceof ArrayBuffer ? new Uint8Array(value)
    : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", view));
  return { type, size: view.byteLength, own: (value.buffer || value).byteLength, sha: Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("") };
}

export class BinaryWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    if (event.payload instanceof ArrayBuffer) return this.bytesParams(event, step);
    const size = event.payload.size ?? 64;
    const kinds = event.payload.kinds ?? KINDS;
    const out = {};
    for (let i = 0; i < kinds.length; i++) {
      const value = await step.do(`kind ${kinds[i]}`, async () => make(kinds[i], size, i));
      out[kinds[i]] = await describe(value);
    }
    if (event.payload.nested) {
      // several views in one value, one of them a window into a larger buffer
      const nested = await step.do("nested", async () => {
        const big = pattern(1000, 9);
        return { a: new Uint16Array(big.buffer, 2, 10), b: [big.buffer.slice(0, 5), new Uint8Array(0)], s: "text" };
      });
      out.nested = { a: await describe(nested.a), b0: await describe(nested.b[0]), b1: await describe(nested.b[1]), s: nested.s };
    }
    if (event.payload.binary) out.param = await describe(event.payload.binary);
    if (event.payload.wait) {
      const got = await step.waitForEvent("bytes", { type: "bytes", timeout: "1 hour" });
      out.event = await describe(got.payload.data);
    }
    if (event.payload.fits) {
      const fits = await step.do("fits", async () => new ArrayBuffer(event.payload.fits));
      out.fits = fits.byteLength;
    }
    if (event.payload.tooLarge) {
      await step.do("too large", { retries: { limit: 0, delay: 0 } },
        async () => new ArrayBuffer(event.payload.tooLarge));
    }
    return out;
  }

  /** Params that are an ArrayBuffer (create({params: buffer})), an event whose payload is
   * a Uint8Array, sleeps between them (the test restarts celld in each). */
  async bytesParams(event, step) {
    const param = await describe(event.payload);
    await step.sleep("before the event", "1 hour");
    const got = await step.waitForEvent("bytes", { type: "bytes", timeout: "1 day" });
    await step.sleep("after the event", "1 hour");
    return { param, event: await describe(got.payload) };
  }
}

/** POST /create?id=&size= creates an instance whose params are an ArrayBuffer;
 * POST /event?id=&size= sends it an event whose payload is a Uint8Array;
 * POST /kinds?id=&size= creates one whose steps return every kind of binary value. */
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const id = url.searchParams.get("id");
    const size = Number(url.searchParams.get("size") || "64");
    if (url.pathname === "/create") {
      const instance = await env.BINARY.create({ id, params: pattern(size, 21).buffer });
      return Response.json({ id: instance.id });
    }
    if (url.pathname === "/kinds") {
      const instance = await env.BINARY.create({ id, params: { size } });
      return Response.json({ id: instance.id });
    }
    if (url.pathname === "/event") {
      const instance = await env.BINARY.get(id);
      await instance.sendEvent({ type: "bytes", payload: pattern(size, 22) });
      return Response.json({ sent: size });
    }
    return new Response("ok");
  },
};
