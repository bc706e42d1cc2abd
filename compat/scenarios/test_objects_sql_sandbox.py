"""Durable Object SQL storage's sandbox (compat/projects/objects, `Notes.sneaky(sql)`): the same
refusals as D1's (compat/scenarios/test_d1_sandbox.py), worded without D1's prefix."""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from pathlib import Path
from typing import Any

from compat.differences import SQLITE_ERROR_OFFSET, difference
from compat.targets import Target

RUN = uuid.uuid4().hex[:8]
AUTH = "not authorized: SQLITE_AUTH"


def sneak(target: Target, sql: str) -> Any:
    """`ctx.storage.sql.exec(sql)` in one Notes object: "allowed" or the error's message."""
    response = target.request(
        "GET", "/rpc", params={"name": f"sandbox-{RUN}", "call": json.dumps(["notes.sneaky", sql])}
    )
    assert response.status_code == 200, response.text
    return response.json()["value"]


@difference(wrangler=SQLITE_ERROR_OFFSET)
def test_sql_storage_sandbox(objects_target: Target) -> None:
    """ATTACH, DETACH, VACUUM (INTO), file: URIs, PRAGMAs beyond D1's list (database_list,
    writable_schema), temp objects, reserved names and functions beyond workerd's list are
    refused; fts5, rtree and the allowed PRAGMAs work. No file appears."""
    t = objects_target
    with tempfile.TemporaryDirectory(prefix="compat-do-outside-") as folder:
        outside = Path(folder)
        answers = {
            sql: sneak(t, sql)
            for sql in (
                f"ATTACH DATABASE '{outside / 'x.db'}' AS x",
                f"ATTACH DATABASE 'file:{outside / 'uri.db'}?mode=rwc' AS y",
                "DETACH DATABASE main",
                "PRAGMA database_list",
                "SELECT * FROM pragma_database_list",
                "PRAGMA writable_schema = ON",
                "PRAGMA journal_mode",
                "PRAGMA integrity_check",
                "CREATE TEMP TABLE tt (a)",
                "CREATE TABLE _cf_mine (a)",
                "CREATE VIRTUAL TABLE f3 USING fts3(a)",
                "ALTER TABLE notes RENAME TO _cf_notes",
            )
        }
        assert answers == dict.fromkeys(answers, AUTH)
        vacuum = [sneak(t, "VACUUM"), sneak(t, f"VACUUM INTO '{outside / 'copy.db'}'")]
        assert vacuum == ["cannot VACUUM from within a transaction: SQLITE_ERROR"] * 2
        assert list(outside.iterdir()) == []
    assert sneak(t, "SELECT load_extension('/nonexistent/lib.so')") == (
        "not authorized: SQLITE_ERROR"
    )
    assert re.sub(r" at offset \d+", "", sneak(t, "SELECT sqlite_version()")) == (
        "not authorized to use function: sqlite_version: SQLITE_ERROR"
    )
    for sql in (
        "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(body)",
        "CREATE VIRTUAL TABLE IF NOT EXISTS boxes USING rtree(id, x0, x1)",
        "PRAGMA table_info(notes)",
        "PRAGMA quick_check",
        "PRAGMA foreign_keys = off",
        "PRAGMA optimize",
        "PRAGMA table_list",
        "SELECT count(*) FROM notes",
    ):
        assert sneak(t, sql) == "allowed", sql
