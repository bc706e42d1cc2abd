// The node: modules a Worker has no use for (processes, threads, a terminal, UDP, an
// inspector, a REPL, V8's internals) and the socket modules celld does not provide yet (net,
// tls), answered as workerd answers them: the module imports with workerd's export names, and
// its functions throw ERR_METHOD_NOT_IMPLEMENTED with workerd's wording (recorded from
// wrangler dev, compat/projects/node). A few plain answers are workerd's own values
// (isMainThread, isPrimary, isatty, net.isIP).
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  /** module -> [workerd's message prefix, export names]. */
  const TABLE = {"child_process":["child_process.",["ChildProcess","_forkChild","exec","execFile","execFileSync","execSync","fork","spawn","spawnSync"]],"cluster":["cluster.",["Cluster","SCHED_NONE","SCHED_RR","Worker","_events","_eventsCount","_maxListeners","disconnect","fork","isMaster","isPrimary","isWorker","schedulingPolicy","settings","setupMaster","setupPrimary","workers"]],"dgram":["dgram.",["Socket","createSocket"]],"domain":["domain.",["Domain","active","create","createDomain"]],"http2":["http2.",["Http2ServerRequest","Http2ServerResponse","connect","constants","createSecureServer","createServer","getDefaultSettings","getPackedSettings","getUnpackedSettings","performServerHandshake","sensitiveHeaders"]],"inspector":["inspector.",["Network","Session","close","console","open","url","waitForDebugger"]],"readline":["readline.",["Interface","clearLine","clearScreenDown","createInterface","cursorTo","emitKeypressEvents","moveCursor","promises"]],"repl":["",["REPLServer","REPL_MODE_SLOPPY","REPL_MODE_STRICT","Recoverable","_builtinLibs","builtinModules","start","writer"]],"trace_events":["trace_events.",["createTracing","getEnabledCategories"]],"tty":["tty.",["ReadStream","WriteStream","isatty"]],"v8":["",["DefaultDeserializer","DefaultSerializer","Deserializer","GCProfiler","Serializer","cachedDataVersionTag","deserialize","getCppHeapStatistics","getHeapCodeStatistics","getHeapSnapshot","getHeapSpaceStatistics","getHeapStatistics","isStringOneByteRepresentation","promiseHooks","queryObjects","serialize","setFlagsFromString","setHeapSnapshotNearHeapLimit","startupSnapshot","stopCoverage","takeCoverage","writeHeapSnapshot"]],"vm":["",["Script","compileFunction","constants","createContext","createScript","isContext","measureMemory","runInContext","runInNewContext","runInThisContext"]],"wasi":["wasi.",["WASI"]],"worker_threads":["",["BroadcastChannel","MessageChannel","MessagePort","SHARE_ENV","Worker","getEnvironmentData","isInternalThread","isMainThread","isMarkedAsUntransferable","markAsUncloneable","markAsUntransferable","moveMessagePortToContext","parentPort","postMessageToThread","receiveMessageOnPort","resourceLimits","setEnvironmentData","threadId","workerData"]],"net":["net.",["BlockList","BoundSocket","Server","Socket","SocketAddress","Stream","_normalizeArgs","connect","createConnection","createServer","getDefaultAutoSelectFamily","getDefaultAutoSelectFamilyAttemptTimeout","isIP","isIPv4","isIPv6","setDefaultAutoSelectFamily","setDefaultAutoSelectFamilyAttemptTimeout"]],"tls":["tls.",["CLIENT_RENEG_LIMIT","CLIENT_RENEG_WINDOW","DEFAULT_CIPHERS","DEFAULT_ECDH_CURVE","DEFAULT_MAX_VERSION","DEFAULT_MIN_VERSION","SecureContext","Server","TLSSocket","checkServerIdentity","connect","convertALPNProtocols","createSecureContext","createSecurePair","createServer","getCiphers","rootCertificates"]]};
  const VALUES = {
    cluster: { isMaster: true, isPrimary: true, isWorker: false, workers: {}, settings: {}, SCHED_NONE: 1, SCHED_RR: 2, schedulingPolicy: 2 },
    tty: { isatty: () => false },
    worker_threads: { isMainThread: true, isInternalThread: false, parentPort: null, threadId: 0, workerData: null, resourceLimits: {}, SHARE_ENV: Symbol.for("nodejs.worker_threads.SHARE_ENV") },
    net: {},
    tls: { DEFAULT_MIN_VERSION: "TLSv1.2", DEFAULT_MAX_VERSION: "TLSv1.3", DEFAULT_ECDH_CURVE: "auto", CLIENT_RENEG_LIMIT: 3, CLIENT_RENEG_WINDOW: 600, rootCertificates: [] },
    repl: { REPL_MODE_SLOPPY: Symbol.for("repl-sloppy"), REPL_MODE_STRICT: Symbol.for("repl-strict"), builtinModules: [] },
  };
  const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
  const isIPv4 = (input) => IPV4.test(String(input));
  const isIPv6 = (input) => {
    const text = String(input);
    if (!text.includes(":")) return false;
    try { return new URL(`http://[${text}]/`).hostname.length > 2; } catch { return false; }
  };
  Object.assign(VALUES.net, { isIPv4, isIPv6, isIP: (input) => (isIPv4(input) ? 4 : isIPv6(input) ? 6 : 0) });

  function notImplemented(what) {
    return function () {
      const error = new Error(`The ${what} method is not implemented`);
      error.code = "ERR_METHOD_NOT_IMPLEMENTED";
      throw error;
    };
  }
  for (const [name, [prefix, exports]] of Object.entries(TABLE)) {
    const module = {};
    for (const key of exports) {
      const fixed = VALUES[name]?.[key];
      if (fixed !== undefined) module[key] = fixed;
      else if (/^[A-Z_0-9]+$/.test(key)) module[key] = undefined;
      else module[key] = notImplemented(prefix + key);
    }
    modules[`node:${name}`] = Object.freeze(Object.assign(Object.create(null), module, { default: module }));
  }
})();
