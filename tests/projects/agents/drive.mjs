// Drives the agent with the Agents SDK's own client (AgentClient from agents/client) under
// Node, and prints one JSON transcript of what a client sees. The same transcript is
// expected from celld and from wrangler dev. Usage: node drive.mjs HOST:PORT NAME
// Time is real: the delay is two seconds and the cron (the SDK's cron-schedule takes a
// seconds field) fires every second.
import { AgentClient } from "agents/client";

const [host, name] = process.argv.slice(2);
const WAIT_MS = 30_000;
const out = new Proxy({}, {
  set(target, key, value) {
    if (process.env.DEBUG) console.error(key, JSON.stringify(value));
    target[key] = value;
    return true;
  },
});
const states = [];

const client = new AgentClient({
  agent: "Counter",
  name,
  host,
  onStateUpdate: (state, source) => states.push({ state, source }),
});

async function until(check, what) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const found = states.find((s) => check(s.state));
    if (found) return found.state;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(states.at(-1))}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

await client.ready;
out.initial = await until(() => true, "the first state");
out.increment = await client.call("increment", [5]);
out.afterIncrement = (await until((s) => s.count === 5, "the count")).count;
client.setState({ ...client.state, count: 100 });
out.clientSet = (await client.call("increment", [1]));
out.notes = await client.call("addNote", ["first"]);
out.notes2 = await client.call("addNote", ["second"]);
out.later = await client.call("later", [2, "two seconds"]);
out.schedules = await client.call("schedules");
out.every = await client.call("every", ["* * * * * *"]);
out.delayed = (await until((s) => s.delayed.length > 0, "the delayed schedule")).delayed;
out.ticked = (await until((s) => s.ticks >= 2, "the cron twice")).ticks >= 2;
out.stopped = await client.call("stopTicking");
out.schedulesAfter = await client.call("schedules");
out.started = await client.call("startReport", [21]);
const done = await until((s) => s.workflow && s.workflow.status === "complete", "the workflow");
out.workflow = done.workflow;
out.steps = done.steps;
out.finalNotes = await client.call("notes");
try {
  await client.call("record", ["not callable"]);
  out.notCallable = "called";
} catch (error) {
  out.notCallable = String(error.message || error);
}
client.close();
console.log(JSON.stringify(out));
process.exit(0);
