// node:module as workerd's nodejs_compat answers it: `createRequire` gives a require() for
// Node's built-in modules and for the Worker's own modules (by their path under /bundle, the
// names node:fs shows), `isBuiltin` and `builtinModules` are workerd's lists, and the loader
// hooks of Node (register, wrap, source maps) throw ERR_METHOD_NOT_IMPLEMENTED as workerd's do.
// A required module comes from the bundle celld built ahead of time: require() here never
// reads a file that was not part of it.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const paths = globalThis.__celld_bundle_paths || {};
  delete globalThis.__celld_bundle_paths;

  /** workerd's builtinModules (wrangler dev, compatibility date 2026-11-01). */
  const builtinModules = Object.freeze(["_http_agent", "_http_client", "_http_common", "_http_incoming", "_http_outgoing", "_http_server", "_stream_duplex", "_stream_passthrough", "_stream_readable", "_stream_transform", "_stream_wrap", "_stream_writable", "_tls_common", "_tls_wrap", "assert", "assert/strict", "async_hooks", "buffer", "child_process", "cluster", "console", "constants", "crypto", "dgram", "diagnostics_channel", "dns", "dns/promises", "domain", "events", "fs", "fs/promises", "http", "http2", "https", "inspector", "inspector/promises", "module", "net", "os", "path", "path/posix", "path/win32", "perf_hooks", "process", "punycode", "querystring", "readline", "readline/promises", "repl", "stream", "stream/consumers", "stream/promises", "stream/web", "string_decoder", "sys", "timers", "timers/promises", "tls", "trace_events", "tty", "url", "util", "util/types", "v8", "vm", "wasi", "worker_threads", "zlib"]);
  const builtinSet = new Set(builtinModules);

  /** Node's rule: a bare name or its node: form; a few (node:test, node:sqlite) only prefixed. */
  function isBuiltin(name) {
    if (typeof name !== "string") return false;
    if (name.startsWith("node:")) return builtinSet.has(name.slice(5)) || name === "node:test" || name === "node:sqlite";
    return builtinSet.has(name);
  }

  function notImplemented(name) {
    return function () {
      const error = new Error(`The module.${name} method is not implemented`);
      error.code = "ERR_METHOD_NOT_IMPLEMENTED";
      throw error;
    };
  }
  function badPath(value) {
    const error = new TypeError(`The argument 'path' The argument must be a file URL object, a file URL string, or an absolute path string.. Received '${value}'`);
    error.code = "ERR_INVALID_ARG_VALUE";
    return error;
  }

  /** The absolute path `from` names (a file: URL or an absolute path). */
  function fromPath(from) {
    if (from instanceof URL) from = from.href;
    if (typeof from !== "string") throw badPath(from);
    if (from.startsWith("file:")) return decodeURIComponent(new URL(from).pathname);
    if (!from.startsWith("/")) throw badPath(from);
    return from;
  }
  function normalise(path) {
    const parts = [];
    for (const part of path.split("/")) {
      if (part === "" || part === ".") continue;
      if (part === "..") parts.pop();
      else parts.push(part);
    }
    return parts.join("/");
  }
  const SUFFIXES = ["", ".js", ".cjs", ".mjs", ".json", ".ts", "/index.js", "/index.cjs", "/index.json"];

  function createRequire(from) {
    const filename = fromPath(from);
    // A path under /bundle names a module by its place in the bundle; any other absolute
    // path (import.meta.url gives the project file's own) by the module's file path.
    const dir = filename.slice(0, filename.lastIndexOf("/") + 1);
    const require = function require(specifier) {
      if (typeof specifier !== "string") {
        const error = new TypeError(`The "id" argument must be of type string. Received ${typeof specifier}`);
        error.code = "ERR_INVALID_ARG_TYPE";
        throw error;
      }
      if (isBuiltin(specifier)) {
        const key = specifier.startsWith("node:") ? specifier : `node:${specifier}`;
        const ns = modules[key];
        if (ns === undefined) {
          const error = new Error(`celld does not provide the Node.js module '${key}' (see the README's table of node: modules)`);
          error.code = "ERR_UNKNOWN_BUILTIN_MODULE";
          throw error;
        }
        return ns.default !== undefined ? ns.default : ns;
      }
      const base = specifier.startsWith("/") ? specifier : dir + specifier;
      const wanted = normalise(base);
      if (specifier.startsWith(".") || specifier.startsWith("/")) {
        for (const suffix of SUFFIXES) {
          const index = paths[wanted + suffix];
          if (index !== undefined) return globalThis.__celld_node.required(index);
        }
      }
      const shown = normalise(specifier.startsWith(".") || specifier.startsWith("/") ? base : `bundle/${specifier}`);
      throw new Error(`No such module "${shown}".`);  // (workerd's words, no code)
    };
    return require;
  }

  class Module {
    constructor(id = "", parent) {
      this.id = id;
      this.parent = parent;
      this.exports = {};
      this.filename = null;
      this.loaded = false;
      this.children = [];
      this.paths = [];
    }
  }
  const module = {
    Module, builtinModules, createRequire, isBuiltin, constants: Object.freeze({ compileCacheStatus: Object.freeze({ FAILED: 0, ENABLED: 1, ALREADY_ENABLED: 2, DISABLED: 3 }) }),
    enableCompileCache: () => undefined, flushCompileCache: () => undefined, getCompileCacheDir: () => undefined,
    getSourceMapsSupport: () => ({ enabled: false, nodeModules: false, generatedCode: false }),
    _cache: Object.create(null), _pathCache: Object.create(null), _extensions: Object.create(null),
    globalPaths: [],
  };
  for (const name of ["register", "registerHooks", "findSourceMap", "findPackageJSON", "wrap", "syncBuiltinESMExports",
    "setSourceMapsSupport", "stripTypeScriptTypes", "runMain", "_load", "_resolveFilename", "_findPath",
    "_initPaths", "_nodeModulePaths", "_preloadModules", "_resolveLookupPaths", "_debug", "SourceMap"]) {
    module[name] = notImplemented(name);
  }
  Object.assign(Module, module);
  modules["node:module"] = Object.freeze(Object.assign(Object.create(null), module, { default: module }));
})();
