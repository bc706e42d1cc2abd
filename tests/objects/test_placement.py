"""Placement of D1 databases (objects with SQL storage) on two nodes of one PostgreSQL
store, in one process: queries through either node reach the one owner; when the owner
leaves, the other rebuilds the file from the pages in the store, whatever the commits
changed (a page rewritten many times, a file that grew past one log checkpoint, a table
dropped). Plus the log reader on its own."""

from __future__ import annotations

import base64
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from celld.bindings.registry import Bindings
from celld.cells.clock import ManualClock
from celld.isolate.host import HostError
from celld.objects.pages import Changes, WalReader
from celld.objects.placement import Placement
from celld.store.base import Fenced
from celld.store.lease import Fence
from celld.store.postgres import PostgresStore
from tests.bindings.harness import START_MS, storage_config


class Node:
    def __init__(self, dsn: str, folder: Path) -> None:
        self.dsn = dsn
        self.folder = folder
        self.closed = False
        self.store = PostgresStore(dsn, lease_ms=2000)
        self.bindings = Bindings(
            storage_config(folder), folder / "state", ManualClock(START_MS).now, shared=dsn
        )

    async def start(self) -> Node:
        await self.store.open()
        self.placement = Placement(self.store)
        self.bindings.place_d1(self.placement)
        await self.bindings.open()
        return self

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self.bindings.close()
        await self.store.close()

    async def sql(self, sql: str, *params: Any) -> list[list[Any]]:
        result = await self.bindings.op_d1(
            {"id": "db-id", "method": "query", "statements": [{"sql": sql, "params": params}]}
        )
        return list(result[0]["rows"])


async def test_queries_reach_one_owner_and_survive_it(postgres_dsn: str, tmp_path: Path) -> None:
    a = await Node(postgres_dsn, tmp_path / "a").start()
    b = await Node(postgres_dsn, tmp_path / "b").start()
    try:
        await a.sql("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
        blob = base64.b64encode(os.urandom(3000)).decode()
        for n in range(120):  # several MB of log: checkpointed along the way
            await (a if n % 2 else b).sql("INSERT INTO t (body) VALUES (?)", blob * 10)
        wal = tmp_path / "a" / "state" / "d1" / "db-id.sqlite3-wal"
        assert wal.stat().st_size < 4_000_000  # ~5 MB were written: folded in on the way
        await b.sql("UPDATE t SET body = 'short' WHERE id % 3 = 0")
        assert a.placement.ships > 0 and b.placement.ships == 0  # b forwarded to a
        assert not (tmp_path / "b" / "state" / "d1" / "db-id.sqlite3").exists()
        with pytest.raises(HostError, match="UNIQUE constraint failed"):
            await b.sql("INSERT INTO t (id, body) VALUES (1, 'again')")  # a's error, via b
        expected = await a.sql("SELECT id, body FROM t ORDER BY id")
        await a.close()  # leaves: b takes the database at its next query
        assert await b.sql("SELECT id, body FROM t ORDER BY id") == expected
        assert b.placement.moves == 1
        await b.sql("DROP TABLE t")
        await b.sql("CREATE TABLE u (x)")
        await b.close()
        c = await Node(postgres_dsn, tmp_path / "c").start()
        try:
            assert await c.sql("SELECT name FROM sqlite_master WHERE type = 'table'") == [["u"]]
            done = await c.bindings.op_d1(
                {"id": "db-id", "method": "exec", "sql": "INSERT INTO u VALUES (1)"}
            )
            assert done["count"] == 1
            assert await c.sql("SELECT x FROM u") == [[1]]
        finally:
            await c.close()
    finally:
        await a.close()
        await b.close()


def test_the_log_reader_returns_each_commit_once(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    reader = WalReader(path)
    reader.attach(conn)
    assert reader.read() is None
    conn.execute("CREATE TABLE t (x)")
    first = reader.read()
    assert first is not None and first.page_count == 2 and set(first.pages) <= {1, 2}
    assert reader.read() is None  # nothing new
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (randomblob(20000))")
    assert reader.read() is None  # not committed yet
    conn.execute("COMMIT")
    second = reader.read()
    assert second is not None and second.page_count > 5
    reader.checkpoint(conn)
    conn.execute("INSERT INTO t VALUES (1)")
    third = reader.read()  # a log restarted after the checkpoint
    assert third is not None and third.page_count == second.page_count
    conn.close()


async def test_a_node_taken_over_cannot_write_pages(postgres_dsn: str, tmp_path: Path) -> None:
    """The database fences page writes: once another node took the object over (the old
    owner's row reaped), the old owner's write of a commit is refused and changes nothing,
    and it learns its lease is gone."""
    a = await Node(postgres_dsn, tmp_path / "a").start()
    b = await Node(postgres_dsn, tmp_path / "b").start()
    try:
        await a.sql("CREATE TABLE t (x)")
        key = ("d1", "db-id")
        assert (await b.placement.claim(key)).owner == a.store.node  # a is alive: a's
        stale = a.bindings.d1["db-id"].shared
        old_token, old_version = stale.token, stale.version
        assert a.store.pool is not None
        await a.store.pool.execute("DELETE FROM celld_nodes WHERE token = $1", old_token)
        taken = await b.placement.claim(key)
        assert taken.owner == b.store.node and taken.version == old_version
        changes = Changes({1: b"\0" * 4096}, 1, 4096)
        with pytest.raises(Fenced):
            await a.placement.ship(key, old_token, old_version, changes)
        # it stops acting at once: nothing loaded under the old token may act again
        assert not Fence(a.placement.lease, old_token).allows_effects()
        assert key not in a.placement.known or a.placement.known[key] == old_version
        assert await b.sql("SELECT count(*) FROM t") == [[0]]  # b rebuilt it, unharmed
    finally:
        await a.close()
        await b.close()
