// One route per node: module, each answering JSON that must be the same on every target.
import os from "node:os";
import * as osNamed from "node:os";
import { StringDecoder } from "node:string_decoder";
import querystring from "node:querystring";
import punycode from "node:punycode";
import * as timers from "node:timers";
import * as timersPromises from "node:timers/promises";
import diagnostics_channel from "node:diagnostics_channel";
import { performance, PerformanceObserver, monitorEventLoopDelay, createHistogram } from "node:perf_hooks";
import qsBare from "querystring";
import { AsyncLocalStorage, AsyncResource, createHook } from "node:async_hooks";
import { WorkflowEntrypoint } from "cloudflare:workers";
import { createMimeMessage } from "mimetext";
import zlib from "node:zlib";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import fs from "node:fs";
import * as fsp from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import dns from "node:dns";
import { createRequire, isBuiltin, builtinModules } from "node:module";
import * as child_process from "node:child_process";
import * as worker_threads from "node:worker_threads";
import * as net from "node:net";
import * as v8 from "node:v8";

const als = new AsyncLocalStorage();
const tick = () => new Promise((resolve) => setTimeout(resolve, 1));

/** The store seen at each kind of continuation inside one als.run(). */
async function contexts(id, origin) {
  return als.run(id, async () => {
    const seen = { sync: als.getStore() };
    await tick();
    seen.await = als.getStore();
    const response = await fetch(`${origin}/ping`);
    seen.fetch = [als.getStore(), await response.text()];
    seen.timer = await new Promise((resolve) => setTimeout(() => resolve(als.getStore()), 2));
    seen.immediate = await new Promise((resolve) => setImmediate(() => resolve(als.getStore())));
    seen.then = await Promise.resolve().then(() => als.getStore());
    seen.microtask = await new Promise((resolve) => queueMicrotask(() => resolve(als.getStore())));
    try {
      await Promise.reject(new Error("no"));
    } catch {
      seen.catch = als.getStore();
    }
    seen.nested = await als.run(`${id}-inner`, async () => { await tick(); return als.getStore(); });
    seen.after = als.getStore();
    return seen;
  });
}

export class StoreWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    return als.run(`wf-${event.payload.id}`, async () => {
      const first = await step.do("first", async () => als.getStore() ?? null);
      await step.sleep("nap", "1 second");
      const second = await step.do("second", async () => als.getStore() ?? null);
      return { first, second, run: als.getStore() ?? null };
    });
  }
}

const json = (value, status = 200) => new Response(JSON.stringify(value), {
  status, headers: { "content-type": "application/json" },
});

function attempt(fn) {
  try {
    return { value: fn() };
  } catch (error) {
    return { error: error.name, code: error.code };
  }
}

const routes = {
  ping() {
    return "pong";
  },
  async zlib() {
    const text = "hello hello hello hello, celld and workerd! ".repeat(20);
    const hex = (b) => Buffer.from(b).toString("hex");
    const gz = zlib.gzipSync(text);
    const out = {
      gzip: hex(gz),
      gzip1: hex(zlib.gzipSync(text, { level: 1 })),
      deflate: hex(zlib.deflateSync(text)),
      deflate9: hex(zlib.deflateSync(text, { level: 9 })),
      raw: hex(zlib.deflateRawSync(text)),
      stored: hex(zlib.deflateSync("abc", { level: 0 })),
      back: [zlib.gunzipSync(gz).toString() === text, zlib.inflateSync(zlib.deflateSync(text)).toString() === text,
        zlib.inflateRawSync(zlib.deflateRawSync(text)).toString() === text,
        zlib.unzipSync(gz).toString() === text, zlib.unzipSync(zlib.deflateSync(text)).toString() === text],
      empty: hex(zlib.gzipSync(Buffer.alloc(0))),
      bad: attempt(() => zlib.inflateSync(Buffer.from("not zlib data"))),
      badMessage: (() => { try { zlib.gunzipSync(Buffer.from("nope")); } catch (e) { return [e.message, e.errno, e.code]; } })(),
      constants: [zlib.constants.Z_BEST_COMPRESSION, zlib.constants.Z_SYNC_FLUSH, zlib.Z_DEFAULT_COMPRESSION ?? null,
        zlib.constants.BROTLI_PARAM_QUALITY],
      callback: await new Promise((resolve, reject) => zlib.deflate(text, (e, r) => e ? reject(e) : resolve(hex(r)))),
      promisified: hex(await promisify(zlib.gunzip)(gz)) === hex(Buffer.from(text)),
    };
    const chunks = [];
    await pipeline(Readable.from([text.slice(0, 100), text.slice(100)]), zlib.createGzip(),
      new Writable({ write(chunk, _e, done) { chunks.push(chunk); done(); } }));
    out.stream = zlib.gunzipSync(Buffer.concat(chunks)).toString() === text;
    out.streamBytes = hex(Buffer.concat(chunks)) === out.gzip;
    const inflated = [];
    await pipeline(Readable.from([gz.subarray(0, 10), gz.subarray(10)]), zlib.createGunzip(),
      new Writable({ write(chunk, _e, done) { inflated.push(chunk); done(); } }));
    out.gunzipStream = Buffer.concat(inflated).toString() === text;
    out.crc32 = attempt(() => zlib.crc32("hello"));
    return out;
  },
  mimetext() {
    // mimetext imports node:os (for EOL) and mime-types (node:path).
    const message = createMimeMessage();
    message.setSender({ name: "Ada", addr: "ada@example.com" });
    message.setRecipient("bob@example.com");
    message.setSubject("hello");
    message.addMessage({ contentType: "text/plain", data: "hi there" });
    message.addAttachment({ filename: "a.csv", contentType: "text/csv", data: "YSxi" });
    return message.asRaw().split("\n").filter((line) => /^(From|To|Subject|Content-Type|MIME)/.test(line))
      .map((line) => line.replace(/boundary=\w+/, "boundary=*"));
  },
  async async_hooks(request) {
    const url = new URL(request.url);
    const id = url.searchParams.get("id") ?? "solo";
    const seen = await contexts(id, url.origin);
    const resource = als.run("R", () => new AsyncResource("celld"));
    const snapshot = als.run("S", () => AsyncLocalStorage.snapshot());
    return { seen, outside: als.getStore() ?? null, resource: resource.runInAsyncScope(() => als.getStore()),
      snapshot: snapshot(() => als.getStore()), exit: als.run("E", () => als.exit(() => als.getStore() ?? null)),
      createHook: attempt(() => createHook({})) };
  },
  async workflow(request, env) {
    const url = new URL(request.url);
    const id = url.searchParams.get("id");
    if (request.method === "POST") {
      await env.STORES.create({ id, params: { id } });
      return { created: id };
    }
    const status = await (await env.STORES.get(id)).status();
    return { status: status.status, output: status.output ?? null };
  },
  os() {
    return {
      keys: Object.keys(osNamed).sort(),
      defaultKeys: Object.keys(os).sort(),
      platform: os.platform(), type: os.type(), arch: os.arch(), release: os.release(),
      version: attempt(() => os.version()), machine: attempt(() => os.machine()),
      endianness: os.endianness(), EOL: os.EOL, devNull: os.devNull,
      tmpdir: os.tmpdir(), homedir: os.homedir(), hostname: os.hostname(),
      cpus: attempt(() => os.cpus().length), totalmem: attempt(() => os.totalmem()),
      freemem: attempt(() => os.freemem()), uptime: attempt(() => os.uptime()),
      loadavg: attempt(() => os.loadavg()), availableParallelism: attempt(() => os.availableParallelism()),
      networkInterfaces: attempt(() => os.networkInterfaces()),
      userInfo: attempt(() => os.userInfo()),
      getPriority: attempt(() => os.getPriority()),
      setPriority: attempt(() => os.setPriority(0)),
      signals: typeof os.constants?.signals?.SIGINT, errno: typeof os.constants?.errno?.ENOENT,
      sigint: os.constants?.signals?.SIGINT,
    };
  },
  string_decoder() {
    const utf8 = new StringDecoder("utf8");
    const euro = new Uint8Array([0xe2, 0x82, 0xac]);
    const parts = [utf8.write(euro.subarray(0, 1)), utf8.write(euro.subarray(1, 2)), utf8.write(euro.subarray(2)), utf8.end()];
    const cut = new StringDecoder("utf-8");
    const cutParts = [cut.write(new Uint8Array([0x61, 0xf0, 0x9f])), cut.end()];
    const b64 = new StringDecoder("base64");
    const b64Parts = [b64.write(new Uint8Array([104, 105])), b64.write(new Uint8Array([33])), b64.write(new Uint8Array([63])), b64.end()];
    const hex = new StringDecoder("hex");
    const u16 = new StringDecoder("utf16le");
    const u16Parts = [u16.write(new Uint8Array([0x61, 0x00, 0x3d])), u16.write(new Uint8Array([0xd8, 0x00, 0xde])), u16.end()];
    const latin = new StringDecoder("latin1");
    return {
      parts, cutParts, b64Parts, hex: hex.write(new Uint8Array([1, 255])), u16Parts,
      latin: latin.write(new Uint8Array([0xe9, 0x41])), encoding: utf8.encoding, b64Encoding: b64.encoding,
      bad: attempt(() => new StringDecoder("nope")),
      endWith: new StringDecoder("utf8").end(new Uint8Array([0x68, 0x69])),
    };
  },
  querystring() {
    return {
      parse: querystring.parse("a=1&b=2&a=3&c=%20x+y&d&=e&f=%E2%82%AC"),
      stringify: querystring.stringify({ a: [1, 2], b: "x y", c: true, d: null, e: undefined, f: "€&=" }),
      sep: querystring.stringify({ a: 1, b: 2 }, ";", ":"),
      parseSep: querystring.parse("a:1;b:2", ";", ":"),
      max: Object.keys(querystring.parse("a=1&b=2&c=3", null, null, { maxKeys: 2 })),
      escape: querystring.escape("a b&c/é"), unescape: querystring.unescape("a%20b%zz"),
      decode: querystring.decode === querystring.parse, encode: querystring.encode === querystring.stringify,
      bare: qsBare === querystring,
    };
  },
  punycode() {
    return {
      encode: punycode.encode("mañana"), decode: punycode.decode("maana-pta"),
      toASCII: punycode.toASCII("mañana.com"), toUnicode: punycode.toUnicode("xn--maana-pta.com"),
      emoji: punycode.toASCII("☃-⌘.com"), ucs2: punycode.ucs2.decode("𝌆"), back: punycode.ucs2.encode([0x1d306]),
      version: typeof punycode.version,
    };
  },
  async timers() {
    const order = [];
    const t = timers.setTimeout(() => order.push("timeout"), 1);
    const shape = { hasRef: typeof t.hasRef, ref: typeof t.ref, unref: typeof t.unref, refresh: typeof t.refresh,
      primitive: typeof t[Symbol.toPrimitive], same: t.ref() === t, hasRefValue: t.hasRef() };
    timers.setImmediate(() => order.push("immediate"));
    const cleared = timers.setTimeout(() => order.push("cleared"), 1);
    timers.clearTimeout(cleared);
    let ticks = 0;
    await new Promise((resolve) => {
      const i = timers.setInterval(() => { ticks++; if (ticks === 3) { timers.clearInterval(i); resolve(); } }, 1);
    });
    await timersPromises.setTimeout(5);
    const value = await timersPromises.setTimeout(1, "v");
    const immediate = await timersPromises.setImmediate("i");
    const controller = new AbortController();
    const aborted = timersPromises.setTimeout(10000, null, { signal: controller.signal }).catch((e) => [e.name, e.code]);
    controller.abort();
    const iterated = [];
    for await (const v of timersPromises.setInterval(1, "tick")) { iterated.push(v); if (iterated.length === 2) break; }
    await timersPromises.scheduler.wait(1);
    return { order, shape, ticks, value, immediate, aborted: await aborted, iterated,
      promisesKeys: Object.keys(timersPromises).sort(), keys: Object.keys(timers).sort(),
      globalSame: timers.setTimeout === globalThis.setTimeout,
      globalReturns: typeof globalThis.setTimeout(() => {}, 0), immediateGlobal: typeof setImmediate };
  },
  diagnostics_channel() {
    const seen = [];
    const channel = diagnostics_channel.channel("celld:test");
    const before = [channel.hasSubscribers, diagnostics_channel.hasSubscribers("celld:test")];
    const listener = (message, name) => seen.push([message, name]);
    diagnostics_channel.subscribe("celld:test", listener);
    channel.publish({ n: 1 });
    const during = channel.hasSubscribers;
    diagnostics_channel.unsubscribe("celld:test", listener);
    channel.publish({ n: 2 });
    const tracing = diagnostics_channel.tracingChannel("celld:trace");
    const events = [];
    tracing.subscribe({
      start: (m) => events.push(["start", m.x]), end: (m) => events.push(["end", m.x]),
      asyncStart: () => events.push(["asyncStart"]), asyncEnd: () => events.push(["asyncEnd"]),
      error: (m) => events.push(["error", m.error.message]),
    });
    const result = tracing.traceSync((a) => a * 2, { x: 1 }, null, 21);
    attempt(() => tracing.traceSync(() => { throw new Error("boom"); }, { x: 2 }));
    return { seen, before, during, after: channel.hasSubscribers, same: diagnostics_channel.channel("celld:test") === channel,
      result, events };
  },

  async fs() {
    const E = (e) => [e.code ?? null, e.message, e.syscall ?? null];
    const tryit = async (f) => { try { return { value: await f() }; } catch (e) { return { error: E(e) }; } };
    const out = {};
    out.root = fs.readdirSync("/");
    out.dev = fs.readdirSync("/dev");
    out.bundleHasEntry = fs.readdirSync("/bundle").includes("index.js");
    out.tmpEmpty = fs.readdirSync("/tmp");
    out.write = await tryit(() => { fs.writeFileSync("/tmp/a.txt", "hello"); fs.appendFileSync("/tmp/a.txt", " world"); return fs.readFileSync("/tmp/a.txt", "utf8"); });
    out.stat = await tryit(() => { const s = fs.statSync("/tmp/a.txt"); return [s.size, s.isFile(), s.mode, s.nlink, s.mtimeMs, String(s.birthtime.getTime())]; });
    out.modes = [fs.statSync("/tmp").mode, fs.statSync("/bundle").mode, fs.statSync("/bundle/index.js").mode, fs.statSync("/dev/null").mode];
    out.missing = await tryit(() => fs.readFileSync("/tmp/nope"));
    out.readOnly = await tryit(() => fs.writeFileSync("/bundle/x.txt", "a"));
    out.mkdir = await tryit(() => [fs.mkdirSync("/tmp/d/e", { recursive: true }), fs.mkdirSync("/tmp/d") ?? null]);
    out.mkdirNoParent = await tryit(() => fs.mkdirSync("/tmp/x/y"));
    out.types = fs.readdirSync("/tmp", { withFileTypes: true }).map((d) => [d.name, d.isFile(), d.isDirectory(), d.parentPath]);
    out.rename = await tryit(() => { fs.renameSync("/tmp/a.txt", "/tmp/d/b.txt"); return fs.readdirSync("/tmp/d"); });
    out.notEmpty = await tryit(() => fs.rmdirSync("/tmp/d"));
    out.unlinkDir = await tryit(() => fs.unlinkSync("/tmp/d"));
    out.readDir = await tryit(() => fs.readFileSync("/tmp/d"));
    out.symlink = await tryit(() => { fs.symlinkSync("/tmp/d/b.txt", "/tmp/link"); return [fs.readlinkSync("/tmp/link"), fs.readFileSync("/tmp/link", "utf8"), fs.lstatSync("/tmp/link").isSymbolicLink(), fs.realpathSync("/tmp/link")]; });
    out.fd = await tryit(() => { const fd = fs.openSync("/tmp/f.bin", "w+"); const w = fs.writeSync(fd, "abcdef"); const b = Buffer.alloc(3); const r = fs.readSync(fd, b, 0, 3, 1); fs.ftruncateSync(fd, 4); const size = fs.fstatSync(fd).size; fs.closeSync(fd); return [fd >= 3, w, r, b.toString(), size]; });
    out.badFd = await tryit(() => fs.writeSync(100, "x"));
    out.devices = await tryit(() => { const fd = fs.openSync("/dev/zero"); const b = Buffer.alloc(4, 1); fs.readSync(fd, b); fs.closeSync(fd); return [fs.readFileSync("/dev/null").length, [...b]]; });
    out.devFull = await tryit(() => fs.writeFileSync("/dev/full", "x"));
    out.flags = await tryit(() => fs.openSync("/tmp/d/b.txt", "zz"));
    out.exclusive = await tryit(() => fs.writeFileSync("/tmp/d/b.txt", "x", { flag: "wx" }));
    out.rootWrite = await tryit(() => fs.writeFileSync("/x.txt", "x"));
    out.watch = await tryit(() => fs.watch("/tmp"));
    out.glob = fs.globSync("/tmp/*");
    out.rmMissing = await tryit(() => fs.rmSync("/tmp/zzz") ?? null);
    out.relative = await tryit(() => fs.readFileSync("nope.txt"));
    out.cwd = process.cwd();
    out.promises = await tryit(async () => { await fsp.writeFile("/tmp/p.txt", "P"); const h = await fsp.open("/tmp/p.txt"); const t = await h.readFile("utf8"); await h.close(); return t; });
    out.promisesError = await tryit(() => fsp.readFile("/nope/x"));
    out.callback = await new Promise((resolve) => fs.readFile("/nope", (error) => resolve(E(error))));
    out.stream = await tryit(() => new Promise((resolve, reject) => { const chunks = []; fs.createReadStream("/tmp/d/b.txt").on("data", (c) => chunks.push(String(c))).on("end", () => resolve(chunks)).on("error", reject); }));
    out.rm = await tryit(() => { fs.rmSync("/tmp/d", { recursive: true }); return fs.readdirSync("/tmp").sort(); });
    return out;
  },
  fs_fresh() {
    // Each request has a /tmp of its own: what /fs wrote is gone.
    return fs.readdirSync("/tmp");
  },
  module() {
    const require = createRequire("/bundle/index.js");
    const attempt2 = (f) => { try { return { value: f() }; } catch (e) { return { error: [e.name, e.code ?? null, e.message] }; } };
    return {
      fs: require("fs") === fs, events: typeof require("node:events"),
      missing: attempt2(() => require("./nope.js")),
      isBuiltin: [isBuiltin("fs"), isBuiltin("node:fs"), isBuiltin("node:test"), isBuiltin("test"), isBuiltin("nope"), isBuiltin("fs/promises"), isBuiltin("cloudflare:workers")],
      builtinModules,
      bad: attempt2(() => createRequire("relative")),
    };
  },
  async brotli() {
    const input = "hello hello hello brotli ".repeat(20);
    const compress = promisify(zlib.brotliCompress);
    const decompress = promisify(zlib.brotliDecompress);
    const packed = await compress(input);
    const quick = await compress(input, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } });
    const streamed = await new Promise((resolve, reject) => {
      const c = zlib.createBrotliCompress(); const chunks = [];
      c.on("data", (d) => chunks.push(d)); c.on("error", reject);
      c.on("end", () => decompress(Buffer.concat(chunks)).then((b) => resolve(b.toString() === input), reject));
      c.write(input.slice(0, 100)); c.end(input.slice(100));
    });
    let bad;
    try { await decompress(Buffer.from("xx")); } catch (e) { bad = e.constructor.name; }
    return { packed: packed.toString("base64"), quick: quick.toString("base64"), back: (await decompress(packed)).toString() === input, streamed, bad };
  },
  async dns() {
    const attempt2 = (f) => { try { return { value: f() }; } catch (e) { return { error: e.message }; } };
    return {
      order: dns.getDefaultResultOrder(), setServers: attempt2(() => dns.setServers(["8.8.8.8"])),
      promises: typeof dns.promises.lookup, resolver: typeof new dns.Resolver().resolve4,
      codes: [dns.NOTFOUND, dns.NODATA, dns.SERVFAIL],
    };
  },
  async http(request) {
    const origin = new URL(request.url).origin;
    const get = await new Promise((resolve, reject) => {
      http.get(`${origin}/echo?x=1`, (res) => {
        let body = ""; res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve([res.statusCode, res.statusMessage, res.headers["content-type"], body]));
      }).on("error", reject);
    });
    const u = new URL(origin);
    const post = await new Promise((resolve, reject) => {
      const req = http.request({ hostname: u.hostname, port: u.port, path: "/echo", method: "POST", headers: { "x-a": "b" } }, (res) => {
        let body = ""; res.on("data", (d) => (body += d)); res.on("end", () => resolve([res.statusCode, body]));
      });
      req.on("error", reject); req.write("abc"); req.end("def");
    });
    let wrong;
    try { https.get(`${origin}/`); } catch (e) { wrong = [e.code, e.message]; }
    let token;
    try { http.validateHeaderName("bad name"); } catch (e) { token = [e.code, e.message]; }
    return { get, post, wrong, token, status: [http.STATUS_CODES[404], http.METHODS.length], server: typeof http.createServer(() => {}) };
  },
  async echo(request) {
    return { method: request.method, body: await request.text(), xa: request.headers.get("x-a"), q: new URL(request.url).search };
  },
  unsupported() {
    const attempt2 = (f) => { try { return { value: f() }; } catch (e) { return { error: [e.code ?? null, e.message] }; } };
    return {
      spawn: attempt2(() => child_process.spawn("ls")), exec: attempt2(() => child_process.execSync("ls")),
      worker: attempt2(() => new worker_threads.Worker("x")), isMainThread: worker_threads.isMainThread,
      serialize: attempt2(() => v8.serialize(1)), isIP: [net.isIP("1.2.3.4"), net.isIP("::1"), net.isIP("x")],
    };
  },
  perf_hooks() {
    const now = performance.now();
    performance.mark("a");
    performance.mark("b");
    const measure = performance.measure("a-b", "a", "b");
    return {
      now: typeof now, origin: typeof performance.timeOrigin, same: performance === globalThis.performance,
      marks: performance.getEntriesByType("mark").map((e) => e.name), measure: [measure.name, measure.entryType],
      observer: typeof PerformanceObserver, monitor: attempt(() => typeof monitorEventLoopDelay),
      histogram: attempt(() => typeof createHistogram),
      toJSON: typeof performance.toJSON,
    };
  },
};

export default {
  async fetch(request, env) {
    const name = new URL(request.url).pathname.slice(1);
    const route = routes[name];
    if (!route) return json({ error: "not found" }, 404);
    try {
      const value = await route(request, env);
      return typeof value === "string" ? new Response(value) : json(value);
    } catch (error) {
      return json({ error: { name: error.name, message: error.message, stack: error.stack } }, 500);
    }
  },
};
