import { DurableObject } from "cloudflare:workers";

function describe(error) {
  return { name: error.name, message: error.message };
}

async function attempt(fn) {
  try {
    return { ok: true, value: (await fn()) ?? null };
  } catch (error) {
    return { ok: false, error: describe(error) };
  }
}

/** What the handlers saw after the client had gone (closes), by key. */
export class Log extends DurableObject {
  async record(key, line) {
    const lines = (await this.ctx.storage.get(key)) || [];
    lines.push(line);
    await this.ctx.storage.put(key, lines);
  }
  async lines(key) {
    return (await this.ctx.storage.get(key)) || [];
  }
}

/** A chat room whose sockets hibernate with it: attachments and tags carry each client. */
export class Room extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
  }

  async fetch(request) {
    const url = new URL(request.url);
    const name = url.searchParams.get("name") || "anonymous";
    const team = url.searchParams.get("team") || "none";
    const [client, server] = Object.values(new WebSocketPair());
    this.ctx.acceptWebSocket(server, [name, `team:${team}`]);
    server.serializeAttachment({ name, team, joined: this.ctx.getWebSockets().length });
    return new Response(null, { status: 101, webSocket: client });
  }

  async webSocketMessage(ws, message) {
    if (typeof message !== "string") {
      ws.send(new Uint8Array(message).reverse());
      return;
    }
    const [command, argument] = message.split(" ");
    if (command === "who") ws.send(JSON.stringify(ws.deserializeAttachment()));
    else if (command === "count") ws.send(String(this.ctx.getWebSockets(argument).length));
    else if (command === "names") {
      const names = this.ctx.getWebSockets(argument).map((s) => s.deserializeAttachment().name);
      ws.send(JSON.stringify(names.sort()));
    } else if (command === "tags") ws.send(JSON.stringify(this.ctx.getTags(ws)));
    else if (command === "rename") {
      ws.serializeAttachment({ ...ws.deserializeAttachment(), name: argument });
      ws.send("renamed");
    } else if (command === "ts") {
      const ts = this.ctx.getWebSocketAutoResponseTimestamp(ws);
      ws.send(ts === null ? "null" : typeof ts.getTime());
    } else ws.send(`room heard: ${message}`);
  }

  async webSocketClose(ws, code, reason, wasClean) {
    const { name } = ws.deserializeAttachment();
    await this.env.LOG.getByName("log").record(`room:${name}`, `${code} ${reason} ${wasClean}`);
    ws.close(code === 1005 ? 1000 : code, "bye");
  }
}

function echo(url, env, ctx) {
  const key = url.searchParams.get("key") || "echo";
  const [client, server] = Object.values(new WebSocketPair());
  server.accept();
  // workerd's default since 2026-03-17 is "blob" (the standard's); ask for ArrayBuffers
  const defaultType = server.binaryType;
  if (url.searchParams.get("binary") !== "default") server.binaryType = "arraybuffer";
  server.addEventListener("message", (event) => {
    if (event.data === "binaryType") {
      server.send(`${defaultType} ${server.binaryType}`);
    } else if (typeof event.data !== "string") {
      if (event.data instanceof ArrayBuffer) server.send(new Uint8Array(event.data).map((b) => 255 - b));
      else server.send(`not an ArrayBuffer: ${Object.prototype.toString.call(event.data)}`);
    } else if (event.data.startsWith("close ")) {
      const [, code, ...reason] = event.data.split(" ");
      server.close(Number(code), reason.join(" "));
    } else server.send(`echo: ${event.data}`);
  });
  server.addEventListener("close", (event) => {
    ctx.waitUntil(env.LOG.getByName("log").record(key, `${event.code} ${event.reason} ${event.wasClean}`));
    server.close(event.code === 1005 ? 1000 : event.code, "bye");
  });
  return new Response(null, { status: 101, webSocket: client, headers: { "x-echo": "yes" } });
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const q = url.searchParams;
    const upgrade = request.headers.get("Upgrade");
    if (url.pathname === "/echo" || url.pathname === "/room") {
      if (upgrade !== "websocket") return new Response("Expected Upgrade: websocket", { status: 426 });
      if (url.pathname === "/echo") return echo(url, env, ctx);
      return env.ROOM.getByName(q.get("room") || "lobby").fetch(request);
    }
    if (url.pathname === "/ws-errors") {
      const out = {};
      const caught = (fn) => {
        try {
          fn();
          return "no error";
        } catch (error) {
          return `${error.name}: ${error.message}`;
        }
      };
      out.response101 = caught(() => new Response(null, { status: 101 }));
      const [, server] = Object.values(new WebSocketPair());
      out.sendBeforeAccept = caught(() => server.send("x"));
      server.accept();
      out.readyState = server.readyState;
      out.close999 = caught(() => server.close(999));
      out.longReason = caught(() => server.close(1000, "r".repeat(124)));
      server.close(1000);
      out.closedState = server.readyState;
      out.sendAfterClose = caught(() => server.send("after"));
      return Response.json(out);
    }
    if (url.pathname === "/log") return Response.json(await env.LOG.getByName("log").lines(q.get("key")));
    if (url.pathname === "/send") {
      const body = { tag: q.get("tag"), mode: q.get("mode") || "ok", n: Number(q.get("n") || 0) };
      const result = await attempt(() => env.JOBS.send(body));
      return Response.json(result, { status: result.ok ? 200 : 500 });
    }
    if (url.pathname === "/send-batch") {
      const bodies = await request.json();
      const result = await attempt(() => env.JOBS.sendBatch(bodies.map((body) => ({ body }))));
      return Response.json(result, { status: result.ok ? 200 : 500 });
    }
    if (url.pathname === "/seen") return Response.json((await env.SEEN.get(`seen:${q.get("tag")}`, "json")) || []);
    if (url.pathname === "/errors") {
      return Response.json({
        big: await attempt(() => env.JOBS.send("x".repeat(128001), { contentType: "text" })),
        batchEmpty: await attempt(() => env.JOBS.sendBatch([])),
      });
    }
    return new Response("not found", { status: 404 });
  },

  /** Records every delivery under its tag; the body's mode says what to do with it. */
  async queue(batch, env) {
    for (const message of batch.messages) {
      const { tag, mode } = message.body;
      const key = `seen:${tag}`;
      const seen = (await env.SEEN.get(key, "json")) || [];
      seen.push({
        queue: batch.queue,
        batchSize: batch.messages.length,
        keys: Object.keys(message),
        id: typeof message.id,
        idLength: message.id.length,
        timestamp: message.timestamp instanceof Date,
        attempts: message.attempts,
        body: message.body,
      });
      await env.SEEN.put(key, JSON.stringify(seen));
      if (batch.queue === "rt-dead") message.ack();
      else if (mode === "retry-once" && message.attempts < 2) message.retry();
      else if (mode === "retry-always") message.retry();
      else message.ack();
    }
  },
};
