// celld's operator page. It speaks the local explorer API (the one wrangler's CLI uses)
// and renders three views from the URL hash:
//   #/                         workflows with per-status counts
//   #/w/NAME?status=S&q=ID&from=DATE&to=DATE&page=N
//                              a workflow's instances, filtered (by the server) and paged
//   #/w/NAME/i/ID              one instance: timeline of steps and attempts, events, actions
// Every value from the server is put into the page as text, never as HTML. Which actions an
// instance offers is the server's answer (its lifecycle decides), not the page's.
"use strict";
(() => {
  const API = "/cdn-cgi/local/explorer/api";
  const STATUSES = ["queued", "running", "paused", "waiting", "waitingForPause", "errored",
    "terminated", "complete"];
  const FINAL = new Set(["complete", "errored", "terminated"]);
  const view = document.getElementById("view");
  const crumbs = document.getElementById("crumbs");
  const notice = document.getElementById("notice");
  const live = document.getElementById("live");
  const dialog = document.getElementById("confirm");
  let timer = null;
  let generation = 0;

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "class") node.className = value;
      else if (key === "style") Object.assign(node.style, value); // CSSOM: allowed by the CSP
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  async function api(method, path, body) {
    // celld's fuller answers (step counts and kinds, deadlines, events), not wrangler dev's shape
    const init = { method, headers: { "x-celld-details": "1" }, credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(API + path, init);
    let data = null;
    try { data = await response.json(); } catch (e) { /* reported below */ }
    if (!response.ok || !data || !data.success) {
      const message = data && data.errors && data.errors[0] ? data.errors[0].message : `HTTP ${response.status}`;
      throw new Error(message);
    }
    return data;
  }

  function say(message, ok) {
    notice.textContent = message;
    notice.className = ok ? "notice ok" : "notice";
    notice.hidden = !message;
  }

  /** Ask in the page's modal dialog; resolves true only when the operator confirms
   * (Cancel and Escape resolve false). */
  function confirmed(message, label) {
    document.getElementById("confirm-text").textContent = message;
    document.getElementById("confirm-ok").textContent = label;
    dialog.returnValue = "";
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
      dialog.showModal();
    });
  }

  const badge = (status) => h("span", { class: `badge s-${status}`, "data-status": status }, status);
  const enc = encodeURIComponent;
  const when = (iso) => (iso ? new Date(iso).toLocaleString() : "—");

  function duration(startIso, endIso) {
    if (!startIso || !endIso) return "";
    let ms = Date.parse(endIso) - Date.parse(startIso);
    if (!(ms >= 0)) return "";
    if (ms < 1000) return `${ms} ms`;
    const parts = [];
    for (const [unit, size] of [["d", 86400000], ["h", 3600000], ["m", 60000], ["s", 1000]]) {
      if (ms >= size) { parts.push(`${Math.floor(ms / size)}${unit}`); ms %= size; }
    }
    return parts.slice(0, 2).join(" ");
  }

  function show(value) {
    return h("pre", {}, value === undefined ? "undefined" : JSON.stringify(value, null, 2));
  }

  function route() {
    const hash = location.hash.replace(/^#/, "") || "/";
    const [path, query] = hash.split("?");
    const params = new URLSearchParams(query || "");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    return { parts, params };
  }

  function setCrumbs(items) {
    crumbs.replaceChildren(...items.map(([label, href]) => (href ? h("a", { href }, label) : h("span", {}, label))));
  }

  // -- views ------------------------------------------------------------------------------

  async function workflowsView() {
    setCrumbs([["workflows"]]);
    const list = (await api("GET", "/workflows")).result;
    const details = await Promise.all(list.map((w) => api("GET", `/workflows/${enc(w.name)}`)));
    const rows = details.map(({ result: w }) => h("tr", { "data-workflow": w.name },
      h("td", {}, h("a", { href: `#/w/${enc(w.name)}` }, w.name)),
      h("td", {}, w.class_name), h("td", {}, w.binding || ""),
      h("td", {}, STATUSES.filter((s) => w.instances[s]).map((s) =>
        h("span", { class: "count" }, badge(s), " ", h("b", { "data-count": s }, w.instances[s])))),
      // cron schedules (UTC): the next tick and the instance the last one started
      h("td", {}, (w.schedules || []).map((s) => h("div", { class: "schedule", "data-schedule": s.cron },
        h("code", {}, s.cron), h("span", { class: "muted" }, ` next ${when(s.nextTick)}`),
        s.lastInstanceId ? [" · last ", h("a", { href: `#/w/${enc(w.name)}/i/${enc(s.lastInstanceId)}` }, "instance")] : [])))));
    return [h("h1", {}, "Workflows"),
      list.length ? h("table", {}, h("tr", {}, h("th", {}, "name"), h("th", {}, "class"),
        h("th", {}, "binding"), h("th", {}, "instances"), h("th", {}, "schedules (UTC)")), rows)
        : h("p", { class: "muted" }, "This project has no workflows.")];
  }

  async function instancesView(name, params) {
    setCrumbs([["workflows", "#/"], [name]]);
    const status = params.get("status") || "";
    const search = params.get("q") || "";
    const from = params.get("from") || "";
    const to = params.get("to") || "";
    const page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
    const perPage = Math.min(100, Math.max(1, parseInt(params.get("per_page") || "25", 10) || 25));
    const query = new URLSearchParams({ page, per_page: perPage });
    if (status) query.set("status", status);
    if (search) query.set("search", search);
    if (from) query.set("date_start", from); // bare dates: whole UTC days, the server says
    if (to) query.set("date_end", to);
    const data = await api("GET", `/workflows/${enc(name)}/instances?${query}`);
    const info = data.result_info;
    const go = (changes) => {
      const next = new URLSearchParams({ status, q: search, from, to, page, per_page: perPage, ...changes });
      for (const key of ["status", "q", "from", "to"]) if (!next.get(key)) next.delete(key);
      location.hash = `#/w/${enc(name)}?${next}`;
    };
    const filter = h("select", { id: "status-filter", onchange: (e) => go({ status: e.target.value, page: 1 }) },
      h("option", { value: "" }, "any status"),
      STATUSES.map((s) => h("option", { value: s, selected: s === status }, s)));
    const searchInput = h("input", { id: "search", type: "search", value: search, placeholder: "instance id contains…",
      "aria-label": "search by instance id", onchange: (e) => go({ q: e.target.value.trim(), page: 1 }) });
    const dateInput = (id, value, key, label) => h("input", { id, type: "date", value, "aria-label": label,
      onchange: (e) => go({ [key]: e.target.value, page: 1 }) });
    const idInput = h("input", { id: "trigger-id", placeholder: "instance id (optional)" });
    const paramsInput = h("textarea", { id: "trigger-params", placeholder: "params as JSON (optional)" });
    const trigger = h("button", { id: "trigger", onclick: async () => {
      let body = {};
      try {
        if (idInput.value.trim()) body.id = idInput.value.trim();
        if (paramsInput.value.trim()) body.params = JSON.parse(paramsInput.value);
        const created = await api("POST", `/workflows/${enc(name)}/instances`, body);
        say(`Created instance ${created.result.id}`, true);
        location.hash = `#/w/${enc(name)}/i/${enc(created.result.id)}`;
      } catch (error) { say(`Trigger failed: ${error.message}`); }
    } }, "Trigger");
    const rows = data.result.map((i) => {
      const began = i.started_on || i.created_on;
      const took = i.ended_on ? duration(began, i.ended_on) : i.started_on ? `${duration(began, info.now)} so far` : "";
      return h("tr", { "data-instance": i.id },
        h("td", {}, h("a", { href: `#/w/${enc(name)}/i/${enc(i.id)}` }, i.id)),
        h("td", {}, badge(i.status)), h("td", {}, when(i.created_on)),
        h("td", {}, when(i.ended_on)), h("td", { class: "duration" }, took || "—"));
    });
    return [
      h("h1", {}, name),
      h("div", { class: "toolbar" }, "Status ", filter, searchInput,
        h("span", {}, "created (UTC) from ", dateInput("created-from", from, "from", "created from (UTC)"),
          " to ", dateInput("created-to", to, "to", "created to (UTC)")),
        h("span", { class: "muted", id: "total" }, `${info.total_count} instance(s)`)),
      h("table", { id: "instances" }, h("tr", {}, h("th", {}, "id"), h("th", {}, "status"),
        h("th", {}, "created"), h("th", {}, "ended"), h("th", {}, "duration")), rows),
      h("div", { class: "pager" },
        h("button", { id: "prev", disabled: page <= 1, onclick: () => go({ page: page - 1 }) }, "‹ Prev"),
        h("span", { id: "page" }, `page ${page} of ${info.total_pages}`),
        h("button", { id: "next", disabled: page >= info.total_pages, onclick: () => go({ page: page + 1 }) }, "Next ›")),
      h("h2", {}, "Trigger a new instance"),
      h("div", { class: "toolbar" }, idInput), paramsInput, h("div", { class: "toolbar" }, trigger),
    ];
  }

  /** A rollback's progress: its state and each handler, newest step first. */
  function rollbackView(rb) {
    const why = rb.reason === "terminate" ? "terminate with rollback" : "the instance failed";
    const head = h("div", {}, badge(rb.state === "rolling_back" ? "running" : rb.state === "complete" ? "complete" : "errored"),
      ` ${rb.state} · after ${why}`,
      rb.error ? h("pre", { class: "error" }, `${rb.error.name}: ${rb.error.message}`) : null);
    const rows = rb.steps.map((s) => h("tr", {}, h("td", {}, `${s.name} (${s.count})`), h("td", {}, s.state),
      h("td", {}, String(s.failed_attempts)), h("td", {}, s.retry_at ? when(s.retry_at) : "—"),
      h("td", {}, s.error ? `${s.error.name}: ${s.error.message}` : "")));
    return [head, h("table", { class: "rollback" },
      h("tr", {}, h("th", {}, "step"), h("th", {}, "handler"), h("th", {}, "failed attempts"), h("th", {}, "next attempt"), h("th", {}, "error")),
      rows)];
  }

  /** Every attempt of a step.do: its outcome, start, end, duration and error. */
  function attemptsTable(attempts) {
    return h("table", { class: "attempts" },
      h("tr", {}, h("th", {}, "attempt"), h("th", {}, "state"), h("th", {}, "start"), h("th", {}, "end"),
        h("th", {}, "duration"), h("th", {}, "error")),
      attempts.map((a) => h("tr", { "data-attempt": a.attempt },
        h("td", {}, `#${a.attempt}`),
        h("td", {}, badge(a.success === true ? "done" : a.success === false ? "failed" : "running")),
        h("td", {}, when(a.start)), h("td", {}, when(a.end)),
        h("td", {}, duration(a.start, a.end) || "—"),
        h("td", { class: a.error ? "error" : "" }, a.error ? `${a.error.name}: ${a.error.message}` : ""))));
  }

  function timeline(instance) {
    const t0 = Date.parse(instance.queued);
    const marks = [t0, Date.parse(instance.end || instance.now)];
    for (const s of instance.steps) {
      for (const key of ["start", "end", "until", "timeout_at", "retry_at"]) if (s[key]) marks.push(Date.parse(s[key]));
    }
    const t1 = Math.max(...marks.filter((m) => !Number.isNaN(m)));
    const span = Math.max(1, t1 - t0);
    const pct = (ms) => `${(100 * (ms - t0)) / span}%`;
    const rows = instance.steps.map((s) => {
      const start = Date.parse(s.start);
      const endIso = s.end || s.until || s.timeout_at || s.retry_at || instance.now;
      const end = Math.max(start, Date.parse(endIso));
      const bar = h("div", { class: `bar ${s.state}`, style: { left: pct(start), width: pct(t0 + end - start) } });
      const facts = [h("span", {}, "start ", h("b", {}, when(s.start)))];
      if (s.end) facts.push(h("span", {}, " · end ", h("b", {}, when(s.end)), ` (${duration(s.start, s.end)})`));
      if (s.retry_at) facts.push(h("span", { class: "retry" }, " · next attempt ", h("b", {}, when(s.retry_at))));
      if (s.type === "sleep" && !s.finished) facts.push(h("span", {}, " · sleeps until ", h("b", {}, when(s.until))));
      if (s.type === "waitForEvent") {
        facts.push(h("span", {}, " · waits for ", h("b", {}, s.event_type || "?")));
        if (s.timeout_at) facts.push(h("span", {}, " · times out ", h("b", {}, when(s.timeout_at))));
      }
      const attempts = s.attempts && s.attempts.length ? attemptsTable(s.attempts) : null;
      const body = [];
      if (s.output !== undefined && s.output !== null) body.push(h("div", { class: "details" }, "output"), show(s.output));
      if (s.error) body.push(h("div", { class: "details" }, "error"), h("pre", { class: "error" }, `${s.error.name}: ${s.error.message}`));
      return h("div", { class: "step", "data-step": s.name, "data-kind": s.kind, "data-state": s.state },
        h("div", {}, h("div", { class: "name" }, s.name, s.count > 1 ? ` #${s.count}` : ""),
          h("div", { class: "details" }, s.kind, " ", badge(s.state))),
        h("div", {}, h("div", { class: "track" }, bar), h("div", { class: "details" }, facts), attempts, body));
    });
    return h("div", { id: "timeline" }, rows.length ? rows : h("p", { class: "muted" }, "No steps yet."));
  }

  async function instanceView(name, id) {
    setCrumbs([["workflows", "#/"], [name, `#/w/${enc(name)}`], [id]]);
    const base = `/workflows/${enc(name)}/instances/${enc(id)}`;
    const instance = (await api("GET", base)).result;
    const allowed = new Set(instance.actions || []);
    // Terminating and deleting cannot be undone: they ask first
    const act = (label, body, cls, ask) => h("button", { class: cls, "data-action": label, onclick: async () => {
      if (ask && !(await confirmed(ask, label))) return;
      try {
        const result = (await api("PATCH", `${base}/status`, body())).result;
        // Cloudflare answers an action that changes nothing as a success; `applied` says so
        if (result.applied === false) say(`${label} had no effect: the instance is ${result.status}`);
        else say(`${label}: instance is now ${result.status}`, true);
        refresh();
      } catch (error) { say(`${label} failed: ${error.message}`); }
    } }, label);
    const fromStep = h("select", { id: "restart-from" }, h("option", { value: "" }, "from the start"),
      instance.steps.map((s, index) => h("option", { value: String(index) }, `from ${s.kind} "${s.name}"${s.count > 1 ? ` #${s.count}` : ""}`)));
    const restartBody = () => {
      const step = instance.steps[parseInt(fromStep.value, 10)];
      return step ? { status: "restart", from: { name: step.name, count: step.count, type: step.kind } } : { status: "restart" };
    };
    const eventType = h("input", { id: "event-type", placeholder: "event type" });
    const eventPayload = h("textarea", { id: "event-payload", placeholder: "payload as JSON (optional)" });
    const sendEvent = h("button", { id: "send-event", onclick: async () => {
      try {
        const text = eventPayload.value.trim();
        if (text) JSON.parse(text);
        const response = await fetch(`${API}${base}/events/${enc(eventType.value.trim())}`, {
          method: "POST", headers: { "content-type": "application/json" }, body: text || undefined,
          credentials: "same-origin" });
        const data = await response.json();
        if (!data.success) throw new Error(data.errors[0].message);
        say(`Sent event ${eventType.value.trim()}`, true);
        refresh();
      } catch (error) { say(`Send event failed: ${error.message}`); }
    } }, "Send event");
    const remove = h("button", { class: "danger", "data-action": "delete", onclick: async () => {
      if (!(await confirmed(`Delete instance ${id}? Its state and history go for good.`, "Delete"))) return;
      try {
        await api("DELETE", base);
        say("Deleted", true);
        location.hash = `#/w/${enc(name)}`;
      } catch (error) { say(`Delete failed: ${error.message}`); }
    } }, "Delete");
    const facts = h("div", { class: "kv", id: "facts" },
      h("div", {}, "status"), h("div", {}, badge(instance.status),
        instance.running ? h("span", { class: "muted", id: "working" }, " · JS at work") : null),
      h("div", {}, "created"), h("div", {}, when(instance.queued)),
      h("div", {}, "started"), h("div", {}, when(instance.start)),
      h("div", {}, "ended"), h("div", {}, instance.end ? `${when(instance.end)} (${duration(instance.start || instance.queued, instance.end)})` : "—"),
      h("div", {}, "next deadline"), h("div", {}, when(instance.next_wake)),
      h("div", {}, "params"), h("div", {}, show(instance.params)),
      instance.status === "complete" ? [h("div", {}, "output"), h("div", { id: "output" }, show(instance.output))] : null,
      instance.error ? [h("div", {}, "error"), h("div", {}, h("pre", { class: "error" }, `${instance.error.name}: ${instance.error.message}`))] : null,
      instance.rollback ? [h("div", {}, "rollback"), h("div", { id: "rollback" }, rollbackView(instance.rollback))] : null);
    const events = instance.events.length
      ? h("table", { id: "events" }, h("tr", {}, h("th", {}, "type"), h("th", {}, "received"), h("th", {}, "consumed"), h("th", {}, "payload")),
        instance.events.map((e) => h("tr", {}, h("td", {}, e.type), h("td", {}, when(e.timestamp)),
          h("td", {}, e.consumed ? "yes" : "buffered"), h("td", {}, show(e.payload)))))
      : h("p", { class: "muted" }, "No events.");
    return {
      final: FINAL.has(instance.status),
      nodes: [
        h("h1", {}, id),
        h("div", { class: "toolbar", id: "actions" },
          allowed.has("pause") && act("Pause", () => ({ status: "pause" })),
          allowed.has("resume") && act("Resume", () => ({ status: "resume" })),
          allowed.has("terminate") && [
            act("Terminate", () => ({ status: "terminate" }), "danger", `Terminate instance ${id}? It stops for good.`),
            act("Terminate with rollback", () => ({ status: "terminate", rollback: true }), "danger",
              `Terminate instance ${id} and run its rollback handlers? It stops for good.`)],
          allowed.has("restart") && [act("Restart", restartBody), fromStep],
          allowed.has("delete") && remove),
        facts,
        h("h2", {}, `Steps (${instance.step_count})`), timeline(instance),
        h("h2", {}, "Events"), events,
        h("div", { class: "toolbar" }, eventType), eventPayload, h("div", { class: "toolbar" }, sendEvent),
      ],
    };
  }

  // -- refreshing ---------------------------------------------------------------------------

  function keepFocusFree() {
    const active = document.activeElement;
    return !(active && ["INPUT", "TEXTAREA", "SELECT"].includes(active.tagName) && view.contains(active));
  }

  async function render(initial) {
    const mine = ++generation;
    clearTimeout(timer);
    const routeShown = location.hash;
    const { parts, params } = route();
    let nodes;
    let delay = 1000;
    try {
      if (parts[0] === "w" && parts[2] === "i" && parts[3]) {
        const shown = await instanceView(parts[1], parts[3]);
        nodes = shown.nodes;
        if (shown.final) delay = 3000;
      } else if (parts[0] === "w" && parts[1]) {
        nodes = await instancesView(parts[1], params);
      } else {
        nodes = await workflowsView();
      }
      live.className = "live";
      live.textContent = "live";
    } catch (error) {
      live.className = "live off";
      live.textContent = "offline";
      if (initial) nodes = [h("p", { class: "notice" }, error.message)];
    }
    if (mine !== generation) return;
    if (nodes && (initial || keepFocusFree())) {
      view.replaceChildren(...nodes);
      view.dataset.route = routeShown; // which route the view shows (the tests wait on it)
    }
    timer = setTimeout(() => render(false), delay);
  }

  function refresh() { render(false); }

  window.addEventListener("hashchange", () => { say(""); render(true); });
  render(true);
})();
