import { DurableObject, WorkflowEntrypoint, exports } from "cloudflare:workers";

/** Which build of the object answers: a wake from hibernation builds a new one. */
let constructed = null;

/** One per workflow instance: its clients' sockets hibernate with it. */
export class WorkflowStatus extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    constructed = crypto.randomUUID();
    this.ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
  }

  async fetch(request) {
    const url = new URL(request.url);
    const [client, server] = Object.values(new WebSocketPair());
    const name = url.searchParams.get("name") || "anonymous";
    this.ctx.acceptWebSocket(server, [name, "all"]);
    server.serializeAttachment({ name, joined: this.ctx.getWebSockets().length });
    server.send(JSON.stringify({ type: "hello", name, constructed }));
    return new Response(null, { status: 101, webSocket: client });
  }

  /** Called by the workflow's steps: every client hears of it. */
  async updateStep(step, status) {
    this.broadcast(JSON.stringify({ type: "step", step, status }));
    return this.ctx.getWebSockets().length;
  }

  broadcast(text) {
    for (const ws of this.ctx.getWebSockets()) ws.send(text);
  }

  async webSocketMessage(ws, message) {
    if (typeof message !== "string" && !(message instanceof ArrayBuffer)) {
      ws.send(`not an ArrayBuffer: ${Object.prototype.toString.call(message)}`);
      return;
    }
    if (message instanceof ArrayBuffer) {
      ws.send(new Uint8Array(message).reverse());
      return;
    }
    const [command, argument] = message.split(" ");
    if (command === "who") ws.send(JSON.stringify(ws.deserializeAttachment()));
    else if (command === "count") ws.send(String(this.ctx.getWebSockets(argument).length));
    else if (command === "constructed") ws.send(String(constructed));
    else if (command === "timeout") {
      // "timeout N" sets the event timeout (answers the error if refused); "timeout" reads it
      try {
        if (argument !== undefined) this.ctx.setHibernatableWebSocketEventTimeout(Number(argument));
        ws.send(`timeout ${this.ctx.getHibernatableWebSocketEventTimeout()}`);
      } catch (error) {
        ws.send(`${error.name}: ${error.message}`);
      }
    } else if (command === "slow") {
      // a handler that waits `argument` ms of the clock, then answers (unless it was reset)
      this.slow = (this.slow || 0) + 1;
      ws.send(`slow started ${this.slow}`);
      await new Promise((resolve) => setTimeout(resolve, Number(argument)));
      ws.send(`slow done ${this.slow}`);
    } else if (command === "slows") ws.send(`slows ${this.slow || 0}`);
    else if (command === "tags") ws.send(JSON.stringify(this.ctx.getTags(ws)));
    else if (command === "ts") {
      const ts = this.ctx.getWebSocketAutoResponseTimestamp(ws);
      ws.send(ts === null ? "null" : String(ts.getTime()));
    } else if (command === "big-attachment") {
      try {
        ws.serializeAttachment("x".repeat(4000));
        ws.send("stored");
      } catch (error) {
        ws.send(`${error.name}: ${error.message}`);
      }
    } else if (command === "rename") {
      ws.serializeAttachment({ ...ws.deserializeAttachment(), name: argument });
      ws.send("renamed");
    } else if (command === "close") ws.close(4000 + Number(argument), "closed by the object");
    else this.broadcast(`${ws.deserializeAttachment().name}: ${message}`);
  }

  async webSocketClose(ws, code, reason, wasClean) {
    const { name } = ws.deserializeAttachment();
    await this.env.LOG.getByName("log").record(`close ${name} ${code} ${reason} ${wasClean}`);
    this.broadcast(`left: ${name}`);
    ws.close(code === 1005 ? 1000 : code, "bye");
  }
}

/** A record of what the handlers saw (closes arrive after the client has gone). */
export class Log extends DurableObject {
  async record(line) {
    const lines = (await this.ctx.storage.get("lines")) || [];
    lines.push(line);
    await this.ctx.storage.put("lines", lines);
  }
  async lines() {
    return (await this.ctx.storage.get("lines")) || [];
  }
}

export class StatusWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const status = this.env.STATUS.getByName(event.instanceId);
    for (const name of ["fetch data", "process", "store"]) {
      await step.do(name, async () => status.updateStep(name, "done"));
    }
    return "finished";
  }
}

/** A page whose script talks to the object over a browser WebSocket (the Chromium test). */
const PAGE = `<!doctype html><meta charset="utf-8"><title>sockets</title><script type="module">
const seen = [];
const ws = new WebSocket(\`ws://\${location.host}/ws?instanceId=browser&name=chromium\`);
ws.binaryType = "arraybuffer";
const next = () => new Promise((resolve) => ws.addEventListener("message", (e) => resolve(e.data), { once: true }));
ws.addEventListener("close", (e) => { seen.push(["close", e.code, e.reason, e.wasClean]); window.result = seen; });
await new Promise((resolve) => ws.addEventListener("open", resolve, { once: true }));
seen.push(["hello", JSON.parse(await next()).name]);
ws.send("who");
seen.push(["who", JSON.parse(await next())]);
ws.send(new Uint8Array([1, 2, 250]));
const bytes = await next();
seen.push(["binary", bytes instanceof ArrayBuffer, [...new Uint8Array(bytes)]]);
ws.send("close 9");
</script>`;

function echo(request) {
  const pair = new WebSocketPair();
  const [client, server] = [pair[0], pair[1]];
  server.accept();
  server.addEventListener("message", (event) => {
    if (event.data instanceof Blob) {
      // binaryType "blob", the default from 2026-03-17: say so, then echo the bytes
      server.send(`Blob ${event.data.size} type=${JSON.stringify(event.data.type)}`);
      event.data.arrayBuffer().then((bytes) => server.send(new Uint8Array(bytes).map((b) => 255 - b)));
      return;
    }
    if (typeof event.data !== "string") {
      server.send(new Uint8Array(event.data).map((b) => 255 - b));
      return;
    }
    if (event.data.startsWith("binaryType")) {
      // "binaryType X" sets it (an unknown X is ignored); either way the type is answered
      const type = event.data.split(" ")[1];
      if (type !== undefined) server.binaryType = type;
      server.send(`binaryType ${server.binaryType}`);
    } else if (event.data === "state") server.send(`readyState ${server.readyState}`);
    else if (event.data.startsWith("close ")) server.close(Number(event.data.slice(6)), "server closed");
    else if (event.data === "bad-close") {
      try {
        server.close(1005);
      } catch (error) {
        server.send(`${error.name}: ${error.message}`);
      }
    } else server.send(`echo: ${event.data}`);
  });
  server.addEventListener("close", (event) => {
    request.ctx.waitUntil(
      request.env.LOG.getByName("log").record(`worker close ${event.code} ${event.reason} ${event.wasClean}`),
    );
  });
  return new Response(null, { status: 101, webSocket: client, headers: { "x-echo": "yes" } });
}

async function outbound(url, useFetch) {
  let ws;
  if (useFetch) {
    const response = await fetch(url.replace(/^ws/, "http"), { headers: { Upgrade: "websocket" } });
    ws = response.webSocket;
    if (response.status !== 101 || ws === null) return new Response(`no socket: ${response.status}`, { status: 502 });
    ws.accept();
  } else {
    ws = new WebSocket(url);
    await new Promise((resolve, reject) => {
      ws.addEventListener("open", resolve);
      ws.addEventListener("error", (event) => reject(event.error));
    });
  }
  const replies = [];
  const closed = new Promise((resolve) => {
    ws.addEventListener("message", (event) => {
      replies.push(typeof event.data === "string" ? event.data : `bytes ${event.data.byteLength}`);
      if (replies.length === 2) ws.close(1000, "done");
    });
    ws.addEventListener("close", (event) => resolve(`${event.code} ${event.reason}`));
  });
  ws.send("hello");
  ws.send(new Uint8Array([1, 2, 3]));
  const close = await closed;
  return Response.json({ replies, close });
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const upgrade = request.headers.get("Upgrade");
    if (url.pathname === "/echo") {
      if (upgrade !== "websocket") return new Response("Expected Upgrade: websocket", { status: 426 });
      request.ctx = ctx;
      request.env = env;
      return echo(request);
    }
    if (url.pathname === "/ws") {
      if (upgrade !== "websocket") return new Response("Expected Upgrade: websocket", { status: 426 });
      const id = url.searchParams.get("instanceId") || "default";
      return env.STATUS.getByName(id).fetch(request);
    }
    if (url.pathname === "/workflow") {
      const instance = await env.WORKFLOW.create({ id: url.searchParams.get("id") });
      return Response.json({ id: instance.id });
    }
    if (url.pathname === "/page") return new Response(PAGE, { headers: { "content-type": "text/html" } });
    if (url.pathname === "/outbound") return outbound(url.searchParams.get("url"), false);
    if (url.pathname === "/outbound-fetch") return outbound(url.searchParams.get("url"), true);
    if (url.pathname === "/log") return Response.json(await env.LOG.getByName("log").lines());
    if (url.pathname === "/exports") {
      // the Worker's own Durable Object classes, by class name (the Agents SDK looks here)
      const lines = await exports.Log.getByName("log").lines();
      return Response.json({ names: Object.keys(exports).sort(), same: exports.WorkflowStatus === env.STATUS, lines: Array.isArray(lines) });
    }
    if (url.pathname === "/errors") {
      const out = [];
      try {
        new Response(null, { status: 101 });
      } catch (error) {
        out.push(`${error.name}: ${error.message}`);
      }
      const pair = new WebSocketPair();
      try {
        pair[1].send("x");
      } catch (error) {
        out.push(`${error.name}: ${error.message}`);
      }
      pair[1].accept();
      try {
        pair[1].close(999);
      } catch (error) {
        out.push(`${error.name}: ${error.message}`);
      }
      out.push(`readyState ${pair[1].readyState}`);
      pair[1].close(1000);
      out.push(`readyState ${pair[1].readyState}`);
      try {
        pair[1].send("after");
      } catch (error) {
        out.push(`${error.name}: ${error.message}`);
      }
      return Response.json(out);
    }
    return new Response("not found", { status: 404 });
  },
};
