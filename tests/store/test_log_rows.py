"""The instance event log as stored (celld/store/logpack.py): however the store packs a
write's entries, reading gives every event once, in order, with its own id, from any
cursor, on every backend; and a state file written one row per event reads on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from celld.cells.instance_log import InstanceLog
from celld.engine import ErrorInfo, Machine, Status
from celld.store.base import InstanceRef, LogRow, Write
from celld.store.logpack import expand_entries
from celld.store.postgres import PostgresStore
from celld.store.sqlite import SqliteStore

T0 = 1_700_000_000_000
RETRY = {"retries": {"limit": 2, "delay": 0, "backoff": "constant"}}
AnyStore = SqliteStore | PostgresStore


class Logged:
    """A real machine and its log, committed write by write; remembers every event."""

    def __init__(self, instance_id: str) -> None:
        self.machine = Machine.create("wf", instance_id, '{"p":1}', T0)
        self.log = InstanceLog(self.machine)
        self.ref = InstanceRef("wf", instance_id)
        self.expected: list[tuple[str, dict]] = []

    def write(self, now: int) -> Write:
        m = self.machine
        changes = m.take_changes()
        entries = tuple(self.log.entries(changes, now))
        self.expected += [(k, orjson.loads(b)) for _, k, b in expand_entries(entries)]
        write = Write(self.ref, changes, m.next_wake(), m.status is Status.RUNNING, log=entries)
        m.forget_finished()
        return write


def shapes(rows: list[LogRow]) -> list[tuple[str, dict]]:
    return [(r.type, orjson.loads(r.body)) for r in rows]


async def test_every_event_once_in_order_from_any_cursor(store: AnyStore) -> None:
    a, b = Logged("a"), Logged("b")
    await store.write_many([a.write(T0), b.write(T0)])
    a.machine.start_run(T0)
    b.machine.start_run(T0)
    for n in range(1, 4):  # steps begun and done in one write: the compact entry
        for x in (a, b):
            x.machine.step_do("s", n, None, RETRY, T0 + n)
            x.machine.attempt_succeeded(("do", "s", n), 1, f'"v{n}"', T0 + n)  # type: ignore[arg-type]
        await store.write_many([a.write(T0 + n), b.write(T0 + n)])
    # a retried step across writes (plain entries), then the end
    a.machine.step_do("r", 1, None, RETRY, T0 + 10)
    await store.write(a.write(T0 + 10))
    a.machine.attempt_failed(("do", "r", 1), 1, ErrorInfo("Error", "boom"), T0 + 11)  # type: ignore[arg-type]
    a.machine.wake(T0 + 12)
    a.machine.attempt_succeeded(("do", "r", 1), 2, "1", T0 + 12)  # type: ignore[arg-type]
    a.machine.run_succeeded('"done"', T0 + 13)
    await store.write(a.write(T0 + 13))

    rows = await store.log_after(a.ref, 0, 1000)
    assert shapes(rows) == a.expected
    assert [t for t, _ in a.expected].count("step_completed") == 4
    assert rows[-1].type == "workflow_completed"
    ids = [r.event_id for r in rows]
    assert ids == sorted(set(ids))
    other = [r.event_id for r in await store.log_after(b.ref, 0, 1000)]
    assert not set(ids) & set(other)  # unique across instances
    for index, cursor in enumerate(ids):  # every cursor, inside a packed row or not
        assert await store.log_after(a.ref, cursor, 1000) == rows[index + 1 :]
        assert await store.log_ended(a.ref, cursor) == (index == len(ids) - 1)
    # one stored row at a time still reaches every event
    seen: list[LogRow] = []
    cursor = 0
    while page := await store.log_after(a.ref, cursor, 1):
        seen += page
        cursor = page[-1].event_id
    assert seen == rows


async def test_a_state_file_with_one_row_per_event_reads_on(tmp_path: Path) -> None:
    """Rows written one per event (celld before packing) read as they were, and new
    events are numbered above every id ever used, deleted ones included."""
    from celld.store.rows import SCHEMA

    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.executescript(SCHEMA)
        insert = (
            "INSERT INTO instance_log (workflow, instance_id, timestamp, type, body) "
            "VALUES (?, ?, ?, ?, ?)"
        )
        connection.execute(insert, ("wf", "a", T0, "workflow_queued", "{}"))
        connection.execute(insert, ("wf", "gone", T0, "workflow_queued", "{}"))
        connection.execute("DELETE FROM instance_log WHERE instance_id = 'gone'")
    store = SqliteStore(path)
    await store.open()
    try:
        a = Logged("a")
        a.machine.take_changes()  # its creation is the old row
        a.machine.start_run(T0)
        a.machine.step_do("s", 1, None, RETRY, T0)
        a.machine.attempt_succeeded(("do", "s", 1), 1, "1", T0)  # type: ignore[arg-type]
        await store.write(a.write(T0))
        rows = await store.log_after(a.ref, 0, 100)
        assert rows[0] == LogRow(1, T0, "workflow_queued", "{}")
        assert shapes(rows[1:]) == a.expected
        assert [r.event_id for r in rows[1:]] == list(range(3, 3 + len(a.expected)))
    finally:
        await store.close()
