// `env.MY_WORKFLOW`: the Workflow binding and the instance handles it returns.
//
// Every method is a request to the engine; errors come back as the Error the
// engine names, so a Worker can catch and inspect them as on Cloudflare.
"use strict";
(() => {
  const { ArrayPrototypeMap, ObjectAssign, ObjectFreeze } = globalThis.__celld_primordials;
  const host = globalThis.__celld_host;
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

  class WorkflowInstance {
    #workflow;
    constructor(workflow, id) {
      this.#workflow = workflow;
      Object.defineProperty(this, "id", { value: id, enumerable: true });
    }
    async status() {
      const view = await call(this.#workflow, "status", { id: this.id });
      const result = { status: view.status };
      if (view.error) result.error = view.error;
      if (view.rollback) result.rollback = view.rollback;
      if (view.output !== undefined && view.output !== null) result.output = deserialize(view.output);
      else if (view.status === "complete") result.output = undefined;
      return result;
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
          throw new TypeError("createBatch({count}) takes a whole number of instances >= 1");
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
      const found = await call(this.#name, "get", { id });
      return new WorkflowInstance(this.#name, found.id);
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
