"""One object's storage file directly: ordering, deleteAll, the per-turn commit, bad calls."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from celld.objects.storage import ObjectStorage


def opened(path: Path, *, sqlite: bool = True) -> ObjectStorage:
    storage = ObjectStorage(path, sqlite=sqlite, alarms=lambda op, message: None)
    storage.open()
    return storage


def call(storage: ObjectStorage, op: str, **fields: Any) -> Any:
    return json.loads(storage.call(json.dumps({"op": op, **fields})))


def test_keys_list_in_utf8_byte_order(tmp_path: Path) -> None:
    storage = opened(tmp_path / "o.sqlite3")
    keys = ["b", "a", "é", "Z", "aa", "\U0001f642", "\uffff"]
    call(storage, "put", entries=[[k, json.dumps(i)] for i, k in enumerate(keys)])
    listed = [k for k, _ in call(storage, "list")["v"]]
    assert listed == sorted(keys, key=lambda k: k.encode("utf-8"))


def test_writes_commit_at_the_end_of_the_turn_only(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite3"
    storage = opened(path)
    call(storage, "put", entries=[["k", "1"]])
    other = sqlite3.connect(path)
    assert other.execute("SELECT name FROM sqlite_master WHERE name = '_cf_KV'").fetchone() is None
    storage.end_turn()
    assert other.execute("SELECT value FROM _cf_KV").fetchall() == [("1",)]
    # An object dropped before its turn ended loses that turn's writes, nothing else.
    call(storage, "put", entries=[["k", "2"]])
    storage.close()
    assert other.execute("SELECT value FROM _cf_KV").fetchall() == [("1",)]


def test_delete_all_drops_user_tables_too(tmp_path: Path) -> None:
    storage = opened(tmp_path / "o.sqlite3")
    call(storage, "sql", query="CREATE TABLE t (x); CREATE VIEW v AS SELECT * FROM t")
    call(storage, "put", entries=[["k", "1"]])
    call(storage, "deleteAll")
    tables = call(storage, "sql", query="SELECT name FROM sqlite_master ORDER BY name")["v"]
    assert tables["rows"] == [["_cf_KV"]]
    assert call(storage, "list")["v"] == []


def test_bad_calls_and_keys_are_clear_errors(tmp_path: Path) -> None:
    storage = opened(tmp_path / "o.sqlite3", sqlite=False)
    assert call(storage, "get")["e"]["name"] == "TypeError"
    assert call(storage, "get", keys=["x" * 2049])["e"] == {
        "name": "RangeError",
        "message": "Keys cannot be larger than 2048 bytes.",
    }
    assert call(storage, "sql", query="SELECT 1")["e"]["message"].startswith(
        "SQL is not enabled for this Durable Object class."
    )
    assert call(storage, "list", limit=0)["e"]["message"] == "List limit must be positive."
