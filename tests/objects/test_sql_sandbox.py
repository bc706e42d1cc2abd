"""Durable Object SQL (`ctx.storage.sql.exec`) reaches the object's own file and nothing else:
the same sandbox as D1 (celld/bindings/sqlguard.py), driven from the object's isolate."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from celld.server.service import Service
from tests.objects.harness import get, objects_service, rpc

AUTH = "not authorized: SQLITE_AUTH"
VACUUM = "cannot VACUUM from within a transaction: SQLITE_ERROR"


async def sneak(service: Service, sql: str) -> str:
    """`sql.exec(sql)` in a Notes object: "allowed" or the error's message."""
    return str((await rpc(service, "sandbox", "notes.sneaky", sql))["value"])


def store_rows(state: Path) -> list[tuple[str, str | None, str]]:
    store = sqlite3.connect(state / "celld.sqlite3")
    try:
        return store.execute("SELECT id, output, status FROM instances ORDER BY id").fetchall()
    finally:
        store.close()


async def finished_tally(service: Service) -> dict[str, object]:
    await rpc(service, "wf", "increment", 1)
    assert await rpc(service, "wf", "startTally", "tally-1") == {"value": "tally-1"}
    for _ in range(400):
        status = json.loads((await get(service, "/wfstatus", id="tally-1"))[2])
        if status["status"] == "complete":
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"the workflow did not finish: {status}")


async def test_attacks_through_durable_object_sql(tmp_path: Path) -> None:
    state = tmp_path / "state"
    outside = tmp_path / "outside"
    outside.mkdir()
    async with objects_service(state) as service:
        status = await finished_tally(service)
        assert status == {"status": "complete", "output": {"first": 11}}
        rows = store_rows(state)
        store = state / "celld.sqlite3"
        assert await sneak(service, f"ATTACH DATABASE '{outside / 'x.db'}' AS x") == AUTH
        # celld's own workflow store: attach it and forge the instance's output
        forged = (
            f"ATTACH DATABASE '{store}' AS w; UPDATE w.instances SET output = '{{\"first\": 666}}'"
        )
        assert await sneak(service, forged) == AUTH
        assert await sneak(service, f"ATTACH 'file:{store}?mode=rw' AS w") == AUTH
        assert await sneak(service, f"ATTACH 'file:{outside / 'uri.db'}?mode=rwc' AS u") == AUTH
        assert await sneak(service, "DETACH DATABASE main") == AUTH
        assert await sneak(service, f"VACUUM INTO '{outside / 'copy.db'}'") == VACUUM
        assert await sneak(service, "PRAGMA writable_schema = ON") == AUTH
        assert await sneak(service, "SELECT load_extension('/lib/x.so')") == (
            "not authorized: SQLITE_ERROR"
        )
        for sql in ("PRAGMA database_list", "SELECT file FROM pragma_database_list"):
            answer = await sneak(service, sql)
            assert answer == AUTH and str(state) not in answer
        assert await sneak(service, "SELECT fts3_tokenizer('simple')") == (
            "not authorized to use function: fts3_tokenizer: SQLITE_ERROR"
        )
        # what SQL storage allows still works, FTS5 and R*Tree included
        for sql in (
            "CREATE VIRTUAL TABLE docs USING fts5(body)",
            "CREATE VIRTUAL TABLE boxes USING rtree(id, x0, x1)",
            "PRAGMA table_info(notes)",
            "PRAGMA optimize",
        ):
            assert await sneak(service, sql) == "allowed", sql
        assert json.loads((await get(service, "/wfstatus", id="tally-1"))[2]) == status
    assert sorted(p.name for p in outside.iterdir()) == []
    assert store_rows(state) == rows


async def test_the_key_value_table_stays_out_of_reach(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        await rpc(service, "sandbox", "notes.remember", "k", "secret")
        assert await sneak(service, "SELECT * FROM _cf_KV") == (
            "access to _cf_KV.key is prohibited: SQLITE_AUTH"
        )
        assert await sneak(service, "PRAGMA table_info(_cf_KV)") == AUTH
        assert await sneak(service, "ALTER TABLE notes RENAME TO _cf_mine") == AUTH
        assert await sneak(service, "SELECT count(*) FROM notes") == "allowed"
        assert "transactionSync()" in await sneak(service, "COMMIT")
