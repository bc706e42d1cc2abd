"""How an instance's event log (what `instance.subscribe()` streams) is stored: one row
per write in SQLite, expanded into events when someone reads it.

Why: a step's commit logs four events (`step_started`, `attempt_started`,
`attempt_completed`, `step_completed`). Written as four rows, with their JSON built on
the event loop, the log cost about as much as the step's own rows (measured in
bench/PROFILE.md, "The log nobody reads"), though most logs are never read. So:

* A step whose first attempt began and succeeded between two commits (most steps) is
  one compact entry, `STEP_DONE`, holding the step's cache key, its config view and its
  output; it stands for those four events. The cells layer makes it from texts it
  already has (celld.cells.instance_log).
* All the entries of one write go in one row. Each event still has its own `eventId`:
  the row's `event_id` is the id of its *last* event and the row owns the `n` ids before
  it (`event_id - n + 1 .. event_id`), so ids stay unique across instances and increase
  within one, and `event_id > cursor` finds every row holding an event after a cursor.
  The row's `type` is its last event's type, and a final event (completed, errored,
  terminated) is always a write's last, so "is a final event logged at or before id X"
  stays one indexed query.
* A row whose body is a JSON object is one event (every row celld wrote before, and a
  write that logs a single plain event); a body that is a JSON array is packed:
  ``[[type, body], ...]``, with ``["=", [stepName, config view, output text]]`` for a
  `STEP_DONE`.

Nothing is lost or delayed: the row is written in the same commit as the changes it
describes (a subscriber sees a write's events as soon as it lands, and after kill -9
exactly what landed). Reading expands rows back into the same events, same bodies, in
the same order, as one row per event gave. The store numbers the packed ids itself
(SQLite: the writer is the file's only writer); a store that cannot reserve a range of
ids atomically (PostgreSQL, shared by several nodes) writes one row per event
(`expand_entries`).
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from celld.store.base import LogRow

#: The type of a compact entry: a step begun and done with its first attempt in one write.
STEP_DONE = "="
#: The events a `STEP_DONE` stands for, in order.
STEP_DONE_EVENTS = 4

#: A log entry as the cells layer makes it: (timestamp ms, type, body JSON text).
Entry = tuple[int, str, str]


def step_done_body(name_json: str, view_json: str, output_json: str) -> str:
    """A `STEP_DONE` body from JSON texts: the cache key, the `step_started` config
    view, and the `$output` (the serializer's text as a JSON string)."""
    return "[" + name_json + "," + view_json + "," + output_json + "]"


def event_count(entries: Iterable[Entry]) -> int:
    """How many events `entries` stand for (how many ids they take)."""
    return sum(STEP_DONE_EVENTS if kind == STEP_DONE else 1 for _, kind, _ in entries)


def pack(entries: tuple[Entry, ...]) -> tuple[int, str, str, int]:
    """One write's entries as one row: (timestamp, type of its last event, body, events)."""
    if len(entries) == 1 and entries[0][1] != STEP_DONE:
        timestamp, kind, body = entries[0]
        return timestamp, kind, body, 1
    parts: list[str] = []
    count = 0
    for _, kind, body in entries:
        parts.append('["' + kind + '",' + body + "]")
        count += STEP_DONE_EVENTS if kind == STEP_DONE else 1
    last = entries[-1][1]
    return (
        entries[-1][0],
        "step_completed" if last == STEP_DONE else last,
        "[" + ",".join(parts) + "]",
        count,
    )


def _step_done_events(value: list[object]) -> list[tuple[str, str]]:
    name, view, output = value
    named = {"stepName": name}
    attempt = orjson.dumps({"stepName": name, "attempt": 1}).decode()
    return [
        ("step_started", orjson.dumps({**named, "config": view}).decode()),
        ("attempt_started", attempt),
        ("attempt_completed", attempt),
        ("step_completed", orjson.dumps({**named, "$output": output}).decode()),
    ]


def expand_entries(entries: Iterable[Entry]) -> list[Entry]:
    """`entries` with every `STEP_DONE` replaced by the events it stands for."""
    out: list[Entry] = []
    for timestamp, kind, body in entries:
        if kind == STEP_DONE:
            out.extend((timestamp, k, b) for k, b in _step_done_events(orjson.loads(body)))
        else:
            out.append((timestamp, kind, body))
    return out


def unpack(event_id: int, timestamp: int, kind: str, body: str) -> list[LogRow]:
    """The events a stored row holds, oldest first, with their ids."""
    if not body.startswith("["):
        return [LogRow(event_id, timestamp, kind, body)]
    events: list[tuple[str, str]] = []
    for entry_kind, value in orjson.loads(body):
        if entry_kind == STEP_DONE:
            events.extend(_step_done_events(value))
        else:
            events.append((entry_kind, orjson.dumps(value).decode()))
    first = event_id - len(events) + 1
    return [LogRow(first + offset, timestamp, k, b) for offset, (k, b) in enumerate(events)]
