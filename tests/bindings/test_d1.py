"""D1 binding: each database is a real SQLite file under the state folder."""

from __future__ import annotations

import sqlite3

import pytest

from celld.bindings.d1 import split_statements
from tests.bindings.harness import Harness
from tests.jsharness import JsError


def test_database_is_a_real_sqlite_file(js: Harness) -> None:
    js("""
        await env.DB.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT, data BLOB)");
        await env.DB.prepare("INSERT INTO t (body, data) VALUES (?, ?)")
          .bind("hi", new Uint8Array([1, 2])).run();
    """)
    conn = sqlite3.connect(js.state / "d1" / "db-id.sqlite3")
    assert conn.execute("SELECT id, body, data FROM t").fetchall() == [(1, "hi", b"\x01\x02")]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_results_meta_and_types(js: Harness) -> None:
    result = js("""
        await env.DB.exec(
          "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, r REAL, s TEXT, b BLOB)");
        const ins = await env.DB.prepare("INSERT INTO t (n, r, s, b) VALUES (?, ?, ?, ?)")
          .bind(7, 1.5, "x", new Uint8Array([9])).run();
        await env.DB.prepare("INSERT INTO t (n, r, s, b) VALUES (?, ?, ?, ?)")
          .bind(true, null, "y", null).run();
        const all = await env.DB.prepare("SELECT n, r, s, b FROM t ORDER BY id").all();
        return {
          insMeta: ins.meta, rows: all.results, success: all.success,
          raw: await env.DB.prepare("SELECT n, s FROM t ORDER BY id").raw({columnNames: true}),
          first: await env.DB.prepare("SELECT s FROM t ORDER BY id").first("s"),
        };
    """)
    meta = result["insMeta"]
    assert (meta["changes"], meta["last_row_id"], meta["changed_db"]) == (1, 1, True)
    assert (meta["rows_read"], meta["rows_written"]) == (0, 1)
    assert meta["size_after"] > 0 and meta["served_by"] == "celld"
    assert result["rows"] == [
        {"n": 7, "r": 1.5, "s": "x", "b": [9]},
        {"n": 1, "r": None, "s": "y", "b": None},
    ]
    assert result["success"] is True
    assert result["raw"] == [["n", "s"], [7, "x"], [1, "y"]]
    assert result["first"] == "x"


def test_batch_is_atomic(js: Harness) -> None:
    with pytest.raises(JsError) as caught:
        js("""
            await env.DB.exec("CREATE TABLE t (id INTEGER PRIMARY KEY)");
            await env.DB.batch([
              env.DB.prepare("INSERT INTO t VALUES (1)"),
              env.DB.prepare("INSERT INTO t VALUES (1)"),
            ]);
        """)
    assert caught.value.message == (
        "D1_ERROR: UNIQUE constraint failed: t.id: SQLITE_CONSTRAINT "
        "(extended: SQLITE_CONSTRAINT_PRIMARYKEY)"
    )
    assert js('return (await env.DB.prepare("SELECT count(*) AS n FROM t").first("n"))') == 0


def test_exec_counts_lines_and_rolls_back(js: Harness) -> None:
    assert (
        js('return (await env.DB.exec("CREATE TABLE t (a);\\nINSERT INTO t VALUES (1);")).count')
        == 2
    )
    with pytest.raises(JsError) as caught:
        js('await env.DB.exec("INSERT INTO t VALUES (2);\\nINSERT INTO missing VALUES (3);")')
    assert caught.value.message == (
        "D1_EXEC_ERROR: Error in line 2: INSERT INTO missing VALUES (3);: "
        "no such table: missing: SQLITE_ERROR"
    )
    assert js('return (await env.DB.prepare("SELECT a FROM t").raw())') == [[1]]


@pytest.mark.parametrize(
    ("js_call", "message"),
    [
        ('env.DB.prepare("SELECT ?").bind(undefined).all()',
         "D1_TYPE_ERROR: Type 'undefined' not supported for value 'undefined'"),
        ('env.DB.prepare("SELECT ?").bind(1n).all()',
         "D1_TYPE_ERROR: Type 'bigint' not supported for value '1'"),
        ('env.DB.prepare("SELECT ?, ?").bind(1).all()',
         "D1_ERROR: Wrong number of parameter bindings for SQL query."),
        ('env.DB.prepare("BEGIN").run()',
         "D1_ERROR: To execute a transaction, please use the state.storage.transaction() or "
         "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
         "statements. The JavaScript API is safer because it will automatically roll back on "
         "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
         "write coalescing."),
        ('env.DB.prepare("SELECT 1 AS a").first("b")', "D1_COLUMN_NOTFOUND: Column not found (b)"),
    ],
)  # fmt: skip
def test_errors(js: Harness, js_call: str, message: str) -> None:
    with pytest.raises(JsError) as caught:
        js(f"await {js_call};")
    assert caught.value.message == message


def test_split_statements() -> None:
    assert split_statements("SELECT 1; SELECT ';'; -- c\n") == ["SELECT 1;", "SELECT ';';"]
    assert split_statements("CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END;") == [
        "CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END;"
    ]
    assert split_statements("SELECT") == ["SELECT"]
