// `env.MY_WORKFLOW`: the Workflow binding and the instance handles it returns.
//
// Every method is a request to the engine; errors come back as the Error the
// engine names, so a Worker can catch and inspect them as on Cloudflare.
"use strict";
(() => {
  const {
    ArrayPrototypeMap, JSONStringify, ObjectAssign, ObjectFreeze, PromiseReject, SafeWeakMap,
    StringPrototypeSlice,
  } = globalThis.__celld_primordials;
  const host = globalThis.__celld_host;
  // (js/host.js: the runtime's own calls, taken here before js/workflows/step.js removes it)
  const hostText = globalThis.__celld_host_text;
  const serialize = (value) => globalThis.__celld_serialize(value);
  const deserialize = (text) => globalThis.__celld_deserialize(text);

  function call(workflow, method, fields) {
    return host.request("wf.binding", ObjectAssign({ workflow, method }, fields));
  }

  function wireOptions(options) {
    const opts = options === undefined || options === null ? {} : options;
    if (typeof opts !== "object") throw new TypeError("Workflow options must be an object");
    const wire = {};
    if (opts.id !== undefined) wire.id = opts.id;
    if (opts.params !== undefined) wire.params = serialize(opts.params);
    if (opts.retention !== undefined) wire.retention = opts.retention;
    return wire;
  }

  const EVENT_TYPES = new Set([
    "workflow_queued", "workflow_started", "workflow_running", "workflow_paused",
    "workflow_waiting_for_pause", "workflow_waiting", "workflow_completed",
    "workflow_errored", "workflow_terminated", "step_started", "step_completed",
    "step_errored", "attempt_started", "attempt_completed", "attempt_errored",
    "sleep_started", "sleep_completed", "wait_started", "wait_completed", "wait_timed_out",
    "rollback_started", "rollback_step_started", "rollback_step_completed",
    "rollback_step_errored", "rollback_attempt_started", "rollback_attempt_completed",
    "rollback_attempt_errored", "rollback_completed", "rollback_errored",
  ]);
  const TERMINAL = new Set(["workflow_completed", "workflow_errored", "workflow_terminated"]);

  // {cursor?: integer >= 0, filter?: [event type]} and nothing else, as Cloudflare's
  // binding checks them (same message as wrangler dev).
  function subscriptionOptions(options) {
    if (options === undefined) return { cursor: 0, filter: null };
    const bad = () => new Error("Invalid Workflow subscription options");
    if (options === null || typeof options !== "object" || Array.isArray(options)) throw bad();
    for (const key of Object.keys(options)) {
      if (key !== "cursor" && key !== "filter") throw bad();
    }
    const { cursor, filter } = options;
    if (cursor !== undefined && !(Number.isInteger(cursor) && cursor >= 0)) throw bad();
    if (filter !== undefined) {
      if (!Array.isArray(filter) || !filter.every((t) => EVENT_TYPES.has(t))) throw bad();
    }
    return { cursor: cursor === undefined ? 0 : cursor, filter: filter === undefined ? null : [...filter] };
  }

  // Logged values travel as the serializer's text ($params, $output).
  function eventValue(raw) {
    const value = {};
    for (const key of Object.keys(raw)) {
      if (key === "$params") value.params = deserialize(raw.$params);
      else if (key === "$output") value.output = deserialize(raw.$output);
      else value[key] = raw[key];
    }
    return value;
  }

  const DISPOSE = Symbol.dispose || Symbol.for("Symbol.dispose");

  // The status `get()` was answered with (an instance in memory), kept by its handle only
  // until the delivery that brought it is over: a `status()` called before then, with
  // nothing else heard from outside since, is answered with it (the read is as fresh as
  // any the isolate could see), without a second host call. Used once.
  const viewFromGet = new SafeWeakMap();

  function statusOf(view) {
    const result = { status: view.status };
    if (view.error) result.error = view.error;
    if (view.rollback) result.rollback = view.rollback;
    if (view.output !== undefined && view.output !== null) result.output = deserialize(view.output);
    else if (view.status === "complete") result.output = undefined;
    return result;
  }

  /** `get`'s host call, its answer stamped with the delivery it came in (`delivery` of
   * js/host.js's runtime calls). */
  function lookUp(workflow, id) {
    let body;
    try {
      body = StringPrototypeSlice(JSONStringify({ workflow, method: "get", id }), 1, -1);
    } catch (error) {
      return PromiseReject(error);
    }
    return new Promise((resolve, reject) => {
      hostText.call("wf.binding", body, (found) => resolve({ found, delivery: hostText.delivery() }), reject);
    });
  }

  class WorkflowSubscription {
    #workflow;
    #id;
    #cursor;
    #filter;
    #closed = false;
    #queue = Promise.resolve();
    constructor(workflow, id, cursor, filter) {
      this.#workflow = workflow;
      this.#id = id;
      this.#cursor = cursor;
      this.#filter = filter;
    }
    /** The next event; calls made before the last one settled wait their turn. */
    next() {
      const turn = this.#queue.then(() => this.#read());
      this.#queue = turn.then(() => undefined, () => undefined);
      return turn;
    }
    async #read() {
      while (!this.#closed) {
        const answer = await call(this.#workflow, "subscribeNext", {
          id: this.#id, cursor: this.#cursor, filter: this.#filter,
        });
        if (this.#closed) break;
        this.#cursor = answer.cursor;
        if (answer.retry) continue;
        if (answer.done) break;
        if (TERMINAL.has(answer.value.type)) this.#closed = true;
        return { done: false, value: eventValue(answer.value) };
      }
      this.#closed = true;
      return { done: true, value: undefined };
    }
    [DISPOSE]() {
      this.#closed = true;
    }
  }

  class WorkflowInstance {
    #workflow;
    constructor(workflow, id) {
      this.#workflow = workflow;
      Object.defineProperty(this, "id", { value: id, enumerable: true });
    }
    async status() {
      const kept = viewFromGet.get(this);
      if (kept !== undefined) {
        viewFromGet.delete(this);
        if (kept.delivery !== 0 && kept.delivery === hostText.delivery()) return statusOf(kept.view);
      }
      return statusOf(await call(this.#workflow, "status", { id: this.id }));
    }
    async pause() {
      await call(this.#workflow, "pause", { id: this.id });
    }
    async resume() {
      await call(this.#workflow, "resume", { id: this.id });
    }
    async terminate(options) {
      const rollback = Boolean(options && typeof options === "object" && options.rollback === true);
      await call(this.#workflow, "terminate", { id: this.id, rollback });
    }
    async delete() {
      await call(this.#workflow, "delete", { id: this.id });
    }
    async restart(options) {
      const from = options && options.from;
      await call(this.#workflow, "restart", { id: this.id, from: from === undefined ? null : from });
    }
    /** A subscription to the instance's logged events: `next()` gives each one as it is
     * committed (history first), `{done: true}` after the final one. */
    async subscribe(options) {
      const { cursor, filter } = subscriptionOptions(options);
      await call(this.#workflow, "subscribe", { id: this.id });
      return new WorkflowSubscription(this.#workflow, this.id, cursor, filter);
    }
    async sendEvent(event) {
      const { type, payload } = event || {};
      await call(this.#workflow, "sendEvent", {
        id: this.id,
        type,
        payload: serialize(payload),
      });
    }
  }

  class Workflow {
    #name;
    constructor(name) {
      this.#name = name;
    }
    async create(options) {
      const { id } = await call(this.#name, "create", wireOptions(options));
      return new WorkflowInstance(this.#name, id);
    }
    async createBatch(batch) {
      if (Array.isArray(batch)) {
        const { ids } = await call(this.#name, "createBatch", { instances: ArrayPrototypeMap(batch, wireOptions) });
        return ArrayPrototypeMap(ids, (id) => new WorkflowInstance(this.#name, id));
      }
      if (batch && typeof batch === "object" && batch.instances === undefined && "count" in batch) {
        const { count, ...each } = batch;
        if (!Number.isInteger(count) || count < 1) {
          // Cloudflare's local engine's words for this (production's are not documented)
          throw new Error("WorkflowError: (body) count must be a positive integer");
        }
        if (each.id !== undefined) throw new TypeError("createBatch({count}) creates instances with ids of their own: give no id");
        batch = { instances: Array.from({ length: count }, () => Object.assign({}, each)) };
      }
      if (batch && typeof batch === "object" && Array.isArray(batch.instances)) {
        const { created, errors } = await call(this.#name, "createBatch", {
          instances: ArrayPrototypeMap(batch.instances, wireOptions),
          report: true,
        });
        return { created: ArrayPrototypeMap(created, (id) => new WorkflowInstance(this.#name, id)), errors };
      }
      throw new TypeError("createBatch() takes an array of instance options, {instances: [...]} or {count, params}");
    }
    async deleteBatch(ids) {
      if (!Array.isArray(ids)) throw new TypeError("deleteBatch() takes an array of instance ids");
      return call(this.#name, "deleteBatch", { ids });
    }
    async get(id) {
      const { found, delivery } = await lookUp(this.#name, id);
      const instance = new WorkflowInstance(this.#name, found.id);
      if (found.view !== undefined) viewFromGet.set(instance, { view: found.view, delivery });
      return instance;
    }
  }

  globalThis.__celld_cloudflare.onEnv((message, env) => {
    for (const binding of message.workflows || []) {
      env[binding.binding] = new Workflow(binding.name);
    }
  });

  Object.defineProperty(globalThis, "__celld_workflows", {
    value: ObjectFreeze({ Workflow, WorkflowInstance }),
  });
})();
