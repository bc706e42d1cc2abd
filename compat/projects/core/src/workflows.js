// Workflow classes driven by their params, so one deployment covers many scenarios.
import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

class CustomError extends Error {
  constructor(message) {
    super(message);
    this.name = "CustomError";
  }
}

function makeError(kind, message) {
  switch (kind) {
    case "nonretryable": return new NonRetryableError(message);
    case "type": return new TypeError(message);
    case "range": return new RangeError(message);
    case "custom": return new CustomError(message);
    case "string": return message;
    default: return new Error(message);
  }
}

/** A JSON-friendly description of a value, so typed results survive the trip to the driver. */
export function describe(value) {
  if (value === undefined) return { type: "undefined" };
  if (value === null || typeof value !== "object") {
    if (typeof value === "bigint") return { type: "bigint", value: value.toString() };
    return value;
  }
  if (value instanceof Date) return { type: "Date", value: value.toISOString() };
  if (value instanceof Map) return { type: "Map", value: [...value].map(([k, v]) => [describe(k), describe(v)]) };
  if (value instanceof Set) return { type: "Set", value: [...value].map(describe) };
  if (value instanceof RegExp) return { type: "RegExp", value: String(value) };
  if (ArrayBuffer.isView(value)) return { type: value.constructor.name, value: Array.from(value) };
  if (value instanceof ArrayBuffer) return { type: "ArrayBuffer", value: Array.from(new Uint8Array(value)) };
  if (value instanceof Error) return { type: "Error", name: value.name, message: value.message };
  if (Array.isArray(value)) return value.map(describe);
  const out = {};
  for (const [k, v] of Object.entries(value)) out[k] = describe(v);
  return out;
}

function produce(kind, size) {
  switch (kind) {
    case "date": return new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
    case "map": return new Map([["a", 1], ["b", new Date(0)]]);
    case "set": return new Set([1, "two", 3n]);
    case "bigint": return 12345678901234567890n;
    case "u8": return new Uint8Array([1, 2, 255]);
    case "f64": return new Float64Array([0.5, -1]);
    case "undefined": return undefined;
    case "nested": return { when: new Date(0), tags: new Set(["x"]), list: [1, undefined, null] };
    case "regexp": return /ab+c/gi;
    case "function": return () => 1;
    case "symbol": return Symbol("s");
    case "big": return "x".repeat(size || 1024 * 1024 + 16);
    default: return kind;
  }
}

// The Worker's env, for rollback handlers (they log to KV, which both targets share with the
// driver): `rb:<instanceId>` holds the list of handler calls in the order they ran.
let workflowEnv;

/** `{rollback, rollbackConfig}` for a `do` op with `rollback: true`. The handler logs
 * {step, output, error, ctx, stepName}; with `rollbackThrows` it throws a NonRetryableError. */
function rollbackOptions(op, event) {
  const rollback = async ({ ctx, error, output, stepName }) => {
    const key = `rb:${event.instanceId}`;
    const log = JSON.parse((await workflowEnv.KV.get(key)) || "[]");
    log.push({
      step: op.do,
      output: describe(output),
      error: error && `${error.name}: ${error.message}`,
      ctx: { step: ctx.step, attempt: ctx.attempt },
      stepName,
    });
    await workflowEnv.KV.put(key, JSON.stringify(log));
    if (op.rollbackThrows) throw new NonRetryableError(`undo ${op.do} refused`);
  };
  return op.rollbackConfig ? { rollback, rollbackConfig: op.rollbackConfig } : { rollback };
}

/** A fresh ReadableStream of the bytes of `text` (or of `size` bytes "s"), in `chunks` parts. */
function byteStream(text, size, chunks = 1) {
  const bytes = new TextEncoder().encode(size !== undefined ? "s".repeat(size) : text);
  const step = Math.ceil(bytes.byteLength / chunks) || 1;
  return new ReadableStream({
    start(controller) {
      for (let at = 0; at < bytes.byteLength; at += step) controller.enqueue(bytes.slice(at, at + step));
      controller.close();
    },
  });
}

/** What a step's ReadableStream holds: its text (or only its length when `lengthOnly`). */
async function readStream(stream, lengthOnly) {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!(value instanceof Uint8Array)) return { isStream: true, chunk: describe(value) };
    length += value.byteLength;
    if (!lengthOnly) text += decoder.decode(value, { stream: true });
  }
  return lengthOnly ? { isStream: true, length } : { isStream: true, text: text + decoder.decode() };
}

/** `selfDelete` op: the instance deletes itself through `binding`, logging to KV
 * (`del:<instanceId>`) what it reached: "before" the call and "after" it (never, if it stops). */
async function deleteSelf(binding, event) {
  const key = `del:${event.instanceId}`;
  const log = async (mark) => {
    const seen = JSON.parse((await workflowEnv.KV.get(key)) || "[]");
    seen.push(mark);
    await workflowEnv.KV.put(key, JSON.stringify(seen));
  };
  await log("before");
  await (await workflowEnv[binding].get(event.instanceId)).delete();
  await log("after");
}

// Step callbacks this isolate has run, by instance and step: a replayed run must not run a
// finished step's callback again (`once` ops check it).
const executed = new Set();

async function runOp(op, step, event, results) {
  if (op.race) {
    const winner = await Promise.race(op.race.map(async (inner) => {
      const out = [];
      await runOp(inner, step, event, out);
      return out[0];
    }));
    results.push(winner);
    return;
  }
  if (op.parallel) {
    const branch = await Promise.all(op.parallel.map(async (inner) => {
      const out = [];
      await runOp(inner, step, event, out);
      return out[0];
    }));
    results.push(branch);
    return;
  }
  if (op.throw !== undefined) throw makeError(op.error, op.throw);
  try {
    if (op.do !== undefined) {
      const callback = async (ctx) => {
        if (op.once) {
          const key = `${event.instanceId}:${op.do}:${ctx.step.count}`;
          if (executed.has(key)) throw new NonRetryableError(`${op.do} ran again after it finished`);
          if (!op.fail || ctx.attempt > op.fail) executed.add(key);
        }
        if (op.echo) return event.payload.data;
        if (op.nonretryableFrom) {
          const kind = ctx.attempt >= op.nonretryableFrom ? "nonretryable" : op.error;
          throw makeError(kind, `${op.do} failed on attempt ${ctx.attempt}`);
        }
        if (op.fail && ctx.attempt <= op.fail) {
          throw makeError(op.error, `${op.do} failed on attempt ${ctx.attempt}`);
        }
        if (op.always) throw makeError(op.error, `${op.do} failed on attempt ${ctx.attempt}`);
        if (op.hang && ctx.attempt <= (op.hang === true ? Infinity : op.hang)) {
          await new Promise(() => {});
        }
        if (op.nested) {
          const inner = [];
          for (const nestedOp of op.nested) await runOp(nestedOp, step, event, inner);
          return { nested: inner };
        }
        if (op.ctx) return { ctx, attempt: ctx.attempt };
        if (op.returns === "stream") return byteStream(op.text, op.size, op.chunks);
        if (op.returns !== undefined) return produce(op.returns, op.size);
        return op.value === undefined ? { step: op.do, attempt: ctx.attempt } : op.value;
      };
      const undo = op.rollback ? [rollbackOptions(op, event)] : [];
      const value = op.noCallback
        ? await (op.config ? step.do(op.do, op.config) : step.do(op.do))
        : op.config
          ? await step.do(op.do, withDelay(op.config), callback, ...undo)
          : await step.do(op.do, callback, ...undo);
      if (value instanceof ReadableStream) results.push(await readStream(value, op.size !== undefined));
      else results.push(op.returns !== undefined ? describe(value) : value);
    } else if (op.sleep !== undefined) {
      await step.sleep(op.sleep, op.duration);
      results.push({ slept: op.sleep });
    } else if (op.sleepUntil !== undefined) {
      const at = op.at !== undefined ? op.at : event.timestamp.getTime() + op.after;
      await step.sleepUntil(op.sleepUntil, op.asDate ? new Date(at) : at);
      results.push({ slept: op.sleepUntil });
    } else if (op.wait !== undefined) {
      const options = { type: op.type };
      if (op.timeout !== undefined) options.timeout = op.timeout;
      const got = await step.waitForEvent(op.wait, options);
      results.push({
        type: got.type,
        payload: got.payload,
        timestampIsDate: got.timestamp instanceof Date,
      });
    } else if (op.selfDelete !== undefined) {
      await deleteSelf(op.selfDelete, event);
      results.push({ deleted: false });
    } else if (op.event) {
      results.push({
        instanceId: event.instanceId,
        workflowName: event.workflowName,
        timestampIsDate: event.timestamp instanceof Date,
        payloadKeys: Object.keys(event.payload || {}),
      });
    }
  } catch (error) {
    if (!op.catch) throw error;
    results.push({ caught: { name: error && error.name, message: error && error.message } });
  }
}

function withDelay(config) {
  if (!config.retries || config.retries.delayFn === undefined) return config;
  const { delayFn, ...retries } = config.retries;
  // delayFn: a list of delays, one per failed attempt
  return { ...config, retries: { ...retries, delay: ({ ctx }) => delayFn[ctx.attempt - 1] } };
}

export class ScriptWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const ops = (event.payload && event.payload.ops) || [];
    workflowEnv = this.env;
    const results = [];
    for (const op of ops) await runOp(op, step, event, results);
    const output = { results };
    if (event.payload && event.payload.returns !== undefined) {
      return produce(event.payload.returns);
    }
    return output;
  }
}

export class BenchWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const k = (event.payload && event.payload.steps) || 10;
    let acc = 0;
    for (let i = 0; i < k; i++) {
      acc += await step.do(`s${i}`, async () => i);
    }
    return { steps: k, sum: acc, finished_at: Date.now() };
  }
}

// Started by the `schedules` of "cron-workflow" (wrangler.jsonc): returns what it was told.
export class CronWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const schedule = event.schedule ? { ...event.schedule } : null;
    return step.do("record", async () => ({ schedule, id: event.instanceId }));
  }
}
