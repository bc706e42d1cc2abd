import { Agent, callable, routeAgentRequest } from "agents";
import { AgentWorkflow } from "agents/workflows";

/** One counter per name: its state goes to every client, its notes live in its SQL. */
export class Counter extends Agent {
  initialState = { count: 0, ticks: 0, delayed: [], steps: [], workflow: null };

  onStart() {
    this.sql`CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL)`;
  }

  @callable()
  increment(by = 1) {
    this.setState({ ...this.state, count: this.state.count + by });
    return this.state.count;
  }

  @callable()
  addNote(text) {
    this.sql`INSERT INTO notes (text) VALUES (${text})`;
    return this.notes();
  }

  @callable()
  notes() {
    return this.sql`SELECT id, text FROM notes ORDER BY id`;
  }

  @callable()
  async later(seconds, label) {
    const schedule = await this.schedule(seconds, "delayed", { label });
    return { type: schedule.type, callback: schedule.callback, inSeconds: schedule.delayInSeconds };
  }

  @callable()
  async every(cron) {
    const schedule = await this.schedule(cron, "tick", { cron });
    return { type: schedule.type, callback: schedule.callback, cron: schedule.cron };
  }

  @callable()
  schedules() {
    return this.getSchedules()
      .map((s) => ({ type: s.type, callback: s.callback }))
      .sort((a, b) => a.callback.localeCompare(b.callback));
  }

  @callable()
  async stopTicking() {
    const ticking = this.getSchedules({ type: "cron" });
    for (const s of ticking) await this.cancelSchedule(s.id);
    return ticking.length;
  }

  async delayed({ label }) {
    this.setState({ ...this.state, delayed: [...this.state.delayed, label] });
  }

  async tick() {
    this.setState({ ...this.state, ticks: this.state.ticks + 1 });
  }

  @callable()
  async startReport(input) {
    const id = await this.runWorkflow("REPORT_WORKFLOW", { input });
    this.setState({ ...this.state, workflow: { status: "running" } });
    return typeof id === "string" && id.length > 0;
  }

  /** Called by the workflow over RPC (this.agent in AgentWorkflow). */
  async record(value) {
    this.sql`INSERT INTO notes (text) VALUES (${`report: ${value}`})`;
    return this.notes().length;
  }

  async onWorkflowProgress(_name, _id, progress) {
    this.setState({ ...this.state, steps: [...this.state.steps, progress.step] });
  }

  async onWorkflowComplete(_name, _id, result) {
    this.setState({ ...this.state, workflow: { status: "complete", result } });
  }
}

/** Started by the agent; reports its progress and its result back to it. */
export class ReportWorkflow extends AgentWorkflow {
  async run(event, step) {
    const doubled = await step.do("double", async () => event.payload.input * 2);
    await this.reportProgress({ step: "double" });
    const notes = await step.do("record", async () => this.agent.record(doubled));
    await this.reportProgress({ step: "record" });
    await step.reportComplete({ doubled, notes });
    return { doubled, notes };
  }
}

export default {
  async fetch(request, env) {
    return (await routeAgentRequest(request, env)) || new Response("not found", { status: 404 });
  },
};
