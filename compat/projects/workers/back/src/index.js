import { DurableObject, WorkerEntrypoint, WorkflowEntrypoint } from "cloudflare:workers";

export class Counter extends DurableObject {
  async add(n) {
    const total = ((await this.ctx.storage.get("total")) ?? 0) + n;
    await this.ctx.storage.put("total", total);
    return { total, who: this.env.WHO };
  }
}

export class BackFlow extends WorkflowEntrypoint {
  async run(event, step) {
    const doubled = await step.do("double", async () => event.payload.n * 2);
    return { doubled, who: this.env.WHO };
  }
}

export class Admin extends WorkerEntrypoint {
  async fetch(request) {
    return new Response(`admin of ${this.env.WHO} at ${new URL(request.url).pathname}`);
  }
  whoami() {
    return this.env.WHO;
  }
}

export default class extends WorkerEntrypoint {
  async fetch(request) {
    const url = new URL(request.url);
    const body = request.method === "POST" ? await request.text() : "";
    return new Response(`${this.env.WHO} got ${request.method} ${url.pathname}${url.search} ${body}`, {
      status: 201,
      headers: { "x-from": this.env.WHO },
    });
  }
  vars() {
    const { WHO, SECRET, EXTRA } = this.env;
    return { WHO, SECRET: SECRET ?? null, EXTRA: EXTRA ?? null };
  }
  add(a, b) {
    return a + b;
  }
  async later(value) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { echoed: value, date: new Date(0), list: [1, 2, 3], map: new Map([["k", "v"]]) };
  }
  fail(message) {
    throw new RangeError(message);
  }
  async failLater() {
    throw new Error("failed later");
  }
}
