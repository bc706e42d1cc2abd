// The `cloudflare:workers` and `cloudflare:workflows` modules a Worker imports.
"use strict";
(() => {
  const { ArrayPrototypePush, ObjectAssign, ObjectCreate, ObjectFreeze } = globalThis.__celld_primordials;
  const modules = globalThis.__celld_builtin_modules;

  /** The `env` a Worker's handlers receive; filled in when the isolate is set up. */
  const env = {};
  /** `exports`: the Worker's own exported Durable Object classes as namespaces, by class
   * name (js/objects/namespace.js fills it); loopback WorkerEntrypoint stubs are not in it. */
  const exports = {};

  class WorkerEntrypoint {
    constructor(ctx, env) {
      this.ctx = ctx;
      this.env = env;
    }
  }

  class WorkflowEntrypoint {
    constructor(ctx, env) {
      this.ctx = ctx;
      this.env = env;
    }
  }

  class RpcTarget {}

  /** The base of Durable Object classes: RPC calls reach only classes that extend it
   * (js/objects/object.js builds them with the object's state and the env). */
  class DurableObject {
    constructor(ctx, env) {
      this.ctx = ctx;
      this.env = env;
    }
  }

  function unsupportedClass(name) {
    return class {
      constructor() {
        throw new TypeError(`celld does not support ${name} yet`);
      }
    };
  }

  let currentWaitUntil = null;
  const envHooks = [];

  // The host sends the env once, before any request or run: vars first, then each
  // hook adds the bindings it knows how to build.
  globalThis.__celld_host.on("env", (message) => {
    ObjectAssign(env, message.vars);
    for (const hook of envHooks) hook(message, env);
  });

  modules["cloudflare:workers"] = ObjectFreeze(ObjectAssign(ObjectCreate(null), {
    WorkerEntrypoint,
    WorkflowEntrypoint,
    RpcTarget,
    DurableObject,
    WebSocketPair: globalThis.__celld_web.WebSocketPair,
    env,
    exports,
    waitUntil(promise) {
      if (!currentWaitUntil) throw new TypeError("waitUntil() called outside a request");
      currentWaitUntil(promise);
    },
  }));

  class NonRetryableError extends Error {
    constructor(message, name = "NonRetryableError") {
      super(message);
      Object.defineProperty(this, "name", {
        value: name, writable: true, configurable: true, enumerable: false,
      });
    }
  }

  modules["cloudflare:workflows"] = ObjectFreeze(ObjectAssign(ObjectCreate(null), {
    NonRetryableError,
  }));

  // `cloudflare:email`: a message can be built (it only holds its fields); sending it
  // through a send_email binding needs Cloudflare's network (js/bindings/offline.js).
  class EmailMessage {
    constructor(from, to, raw) {
      Object.defineProperty(this, "from", { value: String(from), enumerable: true });
      Object.defineProperty(this, "to", { value: String(to), enumerable: true });
      Object.defineProperty(this, "raw", { value: raw, enumerable: false });
    }
  }

  modules["cloudflare:email"] = Object.freeze(Object.assign(Object.create(null), {
    EmailMessage,
  }));

  Object.defineProperty(globalThis, "__celld_cloudflare", {
    value: ObjectFreeze({
      env,
      exports,
      WorkerEntrypoint,
      WorkflowEntrypoint,
      DurableObject,
      NonRetryableError,
      setWaitUntil(fn) {
        currentWaitUntil = fn;
      },
      onEnv(hook) {
        ArrayPrototypePush(envHooks, hook);
      },
    }),
  });
})();
