// The operator page's section on queues and WebSocket-holding Durable Objects, below
// whatever view is open. It polls celld's own routes (/cdn-cgi/celld/queues and
// /cdn-cgi/celld/objects/websockets, the same `celld queues list` reads) every two seconds,
// and stays hidden while the session has neither. Values go into the page as text only.
"use strict";
(() => {
  const section = document.getElementById("live-parts");
  const ROUTES = { queues: "/cdn-cgi/celld/queues", objects: "/cdn-cgi/celld/objects/websockets" };
  const QUEUE_COLUMNS = [["queue", "Queue"], ["consumer", "Consumer"], ["depth", "Depth"],
    ["ready", "Ready"], ["delayed", "Delayed"], ["inFlight", "In flight"],
    ["deadLettered", "Dead-lettered"], ["dropped", "Dropped"]];
  const OBJECT_COLUMNS = [["worker", "Worker"], ["class", "Class"], ["name", "Name"],
    ["id", "Id"], ["websockets", "WebSockets"]];

  function cell(tag, text) {
    const node = document.createElement(tag);
    node.textContent = text === null || text === undefined ? "—" : String(text);
    return node;
  }

  function table(title, id, columns, rows, key) {
    const box = document.createElement("div");
    box.id = id;
    box.append(cell("h2", title));
    const grid = document.createElement("table");
    const head = document.createElement("tr");
    for (const [, label] of columns) head.append(cell("th", label));
    grid.append(head);
    for (const row of rows) {
      const line = document.createElement("tr");
      line.dataset.key = row[key];
      for (const [field] of columns) {
        const td = cell("td", row[field]);
        td.dataset.field = field;
        line.append(td);
      }
      grid.append(line);
    }
    box.append(grid);
    return box;
  }

  async function read(path) {
    const response = await fetch(path, { credentials: "same-origin" });
    const data = await response.json();
    if (!response.ok || !data.success) throw new Error(`${path}: HTTP ${response.status}`);
    return data.result;
  }

  async function refresh() {
    try {
      const [queues, objects] = await Promise.all([read(ROUTES.queues), read(ROUTES.objects)]);
      const parts = [];
      if (queues.length) parts.push(table("Queues", "queues", QUEUE_COLUMNS, queues, "queue"));
      if (objects.length) {
        parts.push(table("Durable Objects with WebSockets", "socket-objects", OBJECT_COLUMNS,
          objects, "id"));
      }
      section.replaceChildren(...parts);
      section.hidden = parts.length === 0;
    } catch (error) {
      section.replaceChildren(cell("p", `queues and sockets unavailable: ${error.message}`));
      section.hidden = false;
    }
  }

  refresh();
  setInterval(refresh, 2000);
})();
