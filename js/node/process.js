// node:process and the `process` global (nodejs_compat). `process.env` holds the Worker's
// vars, filled in when the host sends the env, as workerd does for nodejs_compat.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  // Internals the node: files share with each other (not visible to user code by name).
  Object.defineProperty(globalThis, "__celld_node", { value: {}, enumerable: false });
  const env = {};
  const tickQueue = [];
  const process = {
    env,
    argv: [],
    argv0: "node",
    execArgv: [],
    platform: "linux",
    arch: "x64",
    version: "v22.0.0",
    versions: { node: "22.0.0" },
    release: { name: "node" },
    pid: 1,
    ppid: 0,
    title: "workerd",
    exitCode: undefined,
    browser: false,
    cwd: () => "/bundle",  // (workerd: the folder node:fs shows the modules in)
    chdir() {
      throw new Error("process.chdir() is not supported in a Worker");
    },
    uptime: () => performance.now() / 1000,
    hrtime: Object.assign((previous) => {
      const now = performance.now();
      const seconds = Math.floor(now / 1000);
      const nanos = Math.floor((now % 1000) * 1e6);
      if (!previous) return [seconds, nanos];
      let s = seconds - previous[0], n = nanos - previous[1];
      if (n < 0) { s -= 1; n += 1e9; }
      return [s, n];
    }, { bigint: () => BigInt(Math.floor(performance.now() * 1e6)) }),
    memoryUsage: () => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }),
    nextTick(callback, ...args) {
      if (typeof callback !== "function") throw new TypeError("callback must be a function");
      tickQueue.push(() => callback(...args));
      if (tickQueue.length === 1) {
        queueMicrotask(() => {
          while (tickQueue.length > 0) tickQueue.shift()();
        });
      }
    },
    emitWarning: (warning) => console.warn(String(warning && warning.message || warning)),
    exit(code) {
      throw new Error(`process.exit(${code ?? ""}) is not supported in a Worker`);
    },
    abort() {
      throw new Error("process.abort() is not supported in a Worker");
    },
    on() { return process; },
    once() { return process; },
    off() { return process; },
    removeListener() { return process; },
    removeAllListeners() { return process; },
    emit: () => false,
    listeners: () => [],
    features: {},
    config: {},
  };
  Object.defineProperty(process, Symbol.toStringTag, { value: "process" });
  globalThis.__celld_cloudflare.onEnv((message) => {
    for (const [key, value] of Object.entries(message.vars || {})) {
      if (typeof value === "string") env[key] = value;
      else env[key] = JSON.stringify(value);
    }
  });
  Object.defineProperty(globalThis, "process", {
    value: process, writable: true, configurable: true, enumerable: false,
  });
  modules["node:process"] = Object.freeze(Object.assign(Object.create(null), process, {
    default: process,
  }));
})();
