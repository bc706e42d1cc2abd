// node:dns and node:dns/promises: names resolve through the host's own resolver
// (celld/isolate/nodeops.py: getaddrinfo, so /etc/hosts and the machine's DNS settings
// apply), where workerd asks Cloudflare's DNS-over-HTTPS service. lookup, resolve, resolve4,
// resolve6 and reverse are provided; the other record types (TXT, MX, SRV, ...) throw a
// clear error; setServers and lookupService throw "Not implemented" as workerd's do.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const host = globalThis.__celld_host;

  const CODES = ["NODATA", "FORMERR", "SERVFAIL", "NOTFOUND", "NOTIMP", "REFUSED", "BADQUERY", "BADNAME", "BADFAMILY", "BADRESP", "CONNREFUSED", "TIMEOUT", "EOF", "FILE", "NOMEM", "DESTRUCTION", "BADSTR", "BADFLAGS", "NONAME", "BADHINTS", "NOTINITIALIZED", "LOADIPHLPAPI", "ADDRGETNETWORKPARAMS", "CANCELLED"];
  const constants = { ADDRCONFIG: 1024, ALL: 256, V4MAPPED: 2048 };
  for (const code of CODES) constants[code] = `E${code}`;

  function notImplemented() {
    throw new Error("Not implemented");
  }
  function noRecordType(name) {
    return async () => {
      const error = new Error(`celld: dns.${name} is not provided: celld resolves names with the host's resolver, which answers addresses only`);
      error.code = "ENOTIMP";
      throw error;
    };
  }
  async function ask(method, hostname, family = 0) {
    if (typeof hostname !== "string") {
      const error = new TypeError(`The "hostname" argument must be of type string. Received ${typeof hostname}`);
      error.code = "ERR_INVALID_ARG_TYPE";
      throw error;
    }
    const answer = await host.request("nodedns", { method, host: hostname, family });
    if (answer.error) {
      const error = new Error(answer.error.message);
      error.code = answer.error.code;
      error.syscall = answer.error.syscall;
      error.hostname = hostname;
      throw error;
    }
    return answer.value;
  }

  const promises = {
    ...constants,
    async lookup(hostname, options = {}) {
      if (typeof options === "number") options = { family: options };
      const found = await ask("lookup", hostname, Number(options.family) || 0);
      const all = found.map(([address, family]) => ({ address, family }));
      if (options.all) return all;
      if (all.length === 0) {
        const error = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        error.code = "ENOTFOUND";
        throw error;
      }
      return all[0];
    },
    resolve4: (hostname) => ask("resolve4", hostname),
    resolve6: (hostname) => ask("resolve6", hostname),
    async resolve(hostname, type = "A") {
      if (type === "A") return ask("resolve4", hostname);
      if (type === "AAAA") return ask("resolve6", hostname);
      return noRecordType(`resolve(..., "${type}")`)();
    },
    reverse: (ip) => ask("reverse", ip),
    resolveAny: noRecordType("resolveAny"), resolveCaa: noRecordType("resolveCaa"),
    resolveCname: noRecordType("resolveCname"), resolveMx: noRecordType("resolveMx"),
    resolveNaptr: noRecordType("resolveNaptr"), resolveNs: noRecordType("resolveNs"),
    resolvePtr: noRecordType("resolvePtr"), resolveSoa: noRecordType("resolveSoa"),
    resolveSrv: noRecordType("resolveSrv"), resolveTxt: noRecordType("resolveTxt"),
    lookupService: async () => notImplemented(),
    getServers: () => [],
    setServers: notImplemented,
    getDefaultResultOrder: () => "verbatim",
    setDefaultResultOrder: notImplemented,
  };
  class PromisesResolver {
    cancel() {}
    getServers() { return []; }
    setServers() { notImplemented(); }
    setLocalAddress() {}
  }
  for (const name of Object.keys(promises)) {
    if (name.startsWith("resolve") || name === "reverse") PromisesResolver.prototype[name] = promises[name];
  }
  promises.Resolver = PromisesResolver;

  /** The callback form of a promise function; the callback runs in the caller's context. */
  function callbackOf(fn, spread = null) {
    return (...args) => {
      const callback = host.bindContext(args.pop());
      fn(...args).then((value) => (spread ? callback(null, ...spread(value, args)) : callback(null, value)), (error) => callback(error));
    };
  }
  const dns = { ...constants, promises };
  for (const [name, value] of Object.entries(promises)) {
    if (typeof value === "function" && name !== "Resolver" && !name.startsWith("get") && !name.startsWith("set")) {
      dns[name] = callbackOf(value);
    } else if (name !== "Resolver") {
      dns[name] = value;
    }
  }
  dns.lookup = callbackOf(promises.lookup, (value, args) => {
    const options = typeof args[1] === "object" ? args[1] : {};
    return options.all ? [value] : [value.address, value.family];
  });
  class Resolver extends PromisesResolver {}
  for (const name of Object.getOwnPropertyNames(PromisesResolver.prototype)) {
    if (name.startsWith("resolve") || name === "reverse") Resolver.prototype[name] = dns[name];
  }
  dns.Resolver = Resolver;

  const namespace = (object) => Object.freeze(Object.assign(Object.create(null), object, { default: object }));
  modules["node:dns"] = namespace(dns);
  modules["node:dns/promises"] = namespace(promises);
})();
