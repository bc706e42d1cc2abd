"""D1 databases (env.DB): statements, binding types, results, meta, batches, exec, errors.

`meta` fields that describe the server rather than the query (served_by, duration, timings,
size_after: the page count of each engine's own file) are compared by type only.
"""

from __future__ import annotations

from typing import Any

from compat.differences import (
    D1_EXEC_ERROR_LINE,
    D1_ROWS_READ,
    SQLITE_ERROR_OFFSET,
    difference,
)
from compat.scenario import Scenario

META_KEYS = {
    "served_by", "served_by_primary", "total_attempts", "timings", "duration", "changes",
    "last_row_id", "changed_db", "size_after", "rows_read", "rows_written",
}  # fmt: skip


def q(sql: str, method: str = "all", *args: Any, bind: list[Any] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"b": "DB", "prepare": sql, "m": method, "args": list(args)}
    if bind is not None:
        op["bind"] = bind
    return op


def exec_(sql: str) -> dict[str, Any]:
    return {"b": "DB", "m": "exec", "args": [sql]}


def batch(*statements: tuple[str, list[Any]]) -> dict[str, Any]:
    return {
        "b": "DB",
        "m": "batch",
        "statements": [{"prepare": s, "bind": b} for s, b in statements],
    }


def meta(result: dict[str, Any]) -> dict[str, Any]:
    """The query-level meta fields; server-level ones checked for presence and type."""
    m = dict(result["meta"])
    assert set(m) == META_KEYS, sorted(m)
    assert isinstance(m.pop("served_by"), str) and m.pop("served_by_primary") is True
    assert m.pop("total_attempts") == 1
    assert isinstance(m.pop("duration"), int | float) and isinstance(m.pop("size_after"), int)
    assert set(m.pop("timings")) == {"sql_duration_ms"}
    assert result["success"] is True
    return m


def table(sc: Scenario) -> str:
    name = "t_" + sc.new_id().replace("-", "_")
    sc.one(exec_(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB)"))
    return name


def test_d1_types_round_trip(sc: Scenario) -> None:
    """Integers, reals, text, blobs (as byte arrays), null and booleans (as 1/0)."""
    t = table(sc)
    _, _, rows, raw, named = sc.storage(
        q(f"INSERT INTO {t} (name, score, data) VALUES (?, ?, ?)", "run",
          bind=["ann", 1.5, {"$bytes": [1, 2, 3]}]),
        q(f"INSERT INTO {t} (name, score, data) VALUES (?1, ?2, ?3)", "run", bind=[True, 2, None]),
        q(f"SELECT * FROM {t} ORDER BY id"),
        q(f"SELECT * FROM {t} ORDER BY id", "raw"),
        q(f"SELECT * FROM {t} ORDER BY id", "raw", {"columnNames": True}),
    )  # fmt: skip
    assert rows["results"] == [
        {"id": 1, "name": "ann", "score": 1.5, "data": [1, 2, 3]},
        {"id": 2, "name": "1.0", "score": 2, "data": None},  # true is bound as REAL 1.0
    ]
    assert raw == [[1, "ann", 1.5, [1, 2, 3]], [2, "1.0", 2, None]]
    assert named == [["id", "name", "score", "data"], *raw]


def test_d1_first(sc: Scenario) -> None:
    """first() answers the first row, one column of it, or null; a missing column throws."""
    t = table(sc)
    _, row, col, missing_col, none, none_col = sc.storage(
        q(f"INSERT INTO {t} (name) VALUES ('a'), ('b')", "run"),
        q(f"SELECT id, name FROM {t} ORDER BY id", "first"),
        q(f"SELECT id, name FROM {t} ORDER BY id", "first", "name"),
        q(f"SELECT id, name FROM {t} ORDER BY id", "first", "nope"),
        q(f"SELECT * FROM {t} WHERE id > 100", "first"),
        q(f"SELECT * FROM {t} WHERE id > 100", "first", "nope"),
    )
    assert row == {"id": 1, "name": "a"}
    assert col == "a"
    assert missing_col["error"] == {
        "name": "Error",
        "message": "D1_COLUMN_NOTFOUND: Column not found (nope)",
    }
    assert none is None and none_col is None


def test_d1_meta_of_writes(sc: Scenario) -> None:
    """changes, last_row_id, changed_db and rows_written after inserts and updates."""
    t = table(sc)
    first, second, update, select = sc.storage(
        q(f"INSERT INTO {t} (name) VALUES (?)", "run", bind=["a"]),
        q(f"INSERT INTO {t} (name) VALUES (?)", "run", bind=["b"]),
        q(f"UPDATE {t} SET score = 1", "run"),
        q(f"SELECT * FROM {t}", "all"),
    )
    assert first["results"] == []
    assert meta(first) == {"changes": 1, "last_row_id": 1, "changed_db": True,
                           "rows_read": 0, "rows_written": 1}  # fmt: skip
    assert meta(second)["last_row_id"] == 2
    assert meta(update) == {"changes": 2, "last_row_id": 2, "changed_db": True,
                            "rows_read": 2, "rows_written": 2}  # fmt: skip
    assert meta(select) == {"changes": 0, "last_row_id": 2, "changed_db": False,
                            "rows_read": 2, "rows_written": 0}  # fmt: skip


@difference(wrangler=D1_ROWS_READ)
def test_d1_rows_read_of_aggregate(sc: Scenario) -> None:
    """meta.rows_read of count(*) over a table."""
    t = table(sc)
    _, count = sc.storage(
        q(f"INSERT INTO {t} (name) VALUES ('a'), ('b'), ('c')", "run"),
        q(f"SELECT count(*) AS n FROM {t}"),
    )
    assert count["results"] == [{"n": 3}]
    assert meta(count)["rows_read"] == sc.pick(celld=1, wrangler=3)


def test_d1_batch_is_one_transaction(sc: Scenario) -> None:
    """batch() answers one result per statement; a failing statement undoes all of them."""
    t = table(sc)
    ok, failed, after = sc.storage(
        batch(
            (f"INSERT INTO {t} (name) VALUES (?)", ["a"]), (f"SELECT count(*) AS n FROM {t}", [])
        ),
        batch((f"INSERT INTO {t} (name) VALUES (?)", ["b"]), ("INSERT INTO nope VALUES (1)", [])),
        q(f"SELECT name FROM {t}", "raw"),
    )
    assert [r["results"] for r in ok] == [[], [{"n": 1}]]
    assert meta(ok[0])["changes"] == 1
    assert failed["error"] == {
        "name": "Error",
        "message": "D1_ERROR: no such table: nope: SQLITE_ERROR",
    }
    assert after == [["a"]]


def test_d1_exec(sc: Scenario) -> None:
    """exec() runs each non-blank line (several statements may share one) and counts lines."""
    t = "x_" + sc.new_id().replace("-", "_")
    made, counted, comments, empty, only_comment, no_batch = sc.storage(
        exec_(f"CREATE TABLE {t} (a);\nINSERT INTO {t} VALUES (1); INSERT INTO {t} VALUES (2);\n"),
        q(f"SELECT count(*) AS n FROM {t}", "first", "n"),
        exec_("SELECT 1;\n\n-- a comment\nSELECT 2;"),
        exec_(""),
        exec_("-- only a comment"),
        {"b": "DB", "m": "batch", "statements": []},
    )
    assert only_comment["error"]["message"] == (
        "D1_EXEC_ERROR: Error in line 1: -- only a comment: No SQL statements detected."
    )
    assert no_batch["error"] == {
        "name": "Error",
        "message": "D1_ERROR: No SQL statements detected.",
    }
    assert made["count"] == 2 and isinstance(made["duration"], int | float)
    assert counted == 2
    assert comments["count"] == 2
    assert empty["error"] == {
        "name": "Error",
        "message": "D1_EXEC_ERROR: Error in line 1: : No SQL statements detected.",
    }


@difference(wrangler=D1_EXEC_ERROR_LINE)
def test_d1_exec_failure_rolls_back(sc: Scenario) -> None:
    """A failing exec() leaves nothing of its earlier lines behind."""
    t = table(sc)
    failed, rows = sc.storage(
        exec_(f"INSERT INTO {t} (name) VALUES ('e');\nSELECT * FROM nope;"),
        q(f"SELECT * FROM {t}", "raw"),
    )
    assert failed["error"]["message"] == sc.pick(
        celld=(
            "D1_EXEC_ERROR: Error in line 2: SELECT * FROM nope;: no such table: nope: SQLITE_ERROR"
        ),
        wrangler=(
            f"D1_EXEC_ERROR: Error in line 1: INSERT INTO {t} (name) VALUES ('e');: "
            "no such table: nope: SQLITE_ERROR"
        ),
    )
    assert rows == []


def test_d1_errors(sc: Scenario) -> None:
    """SQLite's message and code in D1's words; binding type and count errors."""
    t = table(sc)
    sc.one(q(f"INSERT INTO {t} (id, name) VALUES (1, 'a')", "run"))
    missing, dup, obj, count, empty, begin = sc.storage(
        q("SELECT * FROM missing_table"),
        q(f"INSERT INTO {t} (id, name) VALUES (1, 'dup')", "run"),
        q("SELECT ?", bind=[{"a": 1}]),
        q("SELECT ?", bind=[]),
        q(""),
        q("BEGIN TRANSACTION", "run"),
    )
    assert missing["error"] == {
        "name": "Error",
        "message": "D1_ERROR: no such table: missing_table: SQLITE_ERROR",
    }
    assert dup["error"]["message"] == (
        f"D1_ERROR: UNIQUE constraint failed: {t}.id: SQLITE_CONSTRAINT "
        "(extended: SQLITE_CONSTRAINT_PRIMARYKEY)"
    )
    assert obj["error"] == {
        "name": "Error",
        "message": "D1_TYPE_ERROR: Type 'object' not supported for value '[object Object]'",
    }
    assert (
        count["error"]["message"] == "D1_ERROR: Wrong number of parameter bindings for SQL query."
    )
    assert empty["error"]["message"] == "D1_ERROR: No SQL statements detected."
    assert begin["error"]["message"].startswith(
        "D1_ERROR: To execute a transaction, please use the state.storage.transaction()"
    )


@difference(wrangler=SQLITE_ERROR_OFFSET)
def test_d1_syntax_error(sc: Scenario) -> None:
    """A syntax error carries SQLite's message and code."""
    error = sc.one(q("SELEC 1"))["error"]
    assert error["message"] == sc.pick(
        celld='D1_ERROR: near "SELEC": syntax error: SQLITE_ERROR',
        wrangler='D1_ERROR: near "SELEC": syntax error at offset 0: SQLITE_ERROR',
    )


def test_d1_odd_statements(sc: Scenario) -> None:
    """Several statements in one prepare() run in turn; the last one's rows are the result.
    Duplicate column names keep the last value; large integers keep their value as numbers."""
    several, dup, named, big = sc.storage(
        q("SELECT 1; SELECT 2 AS two"),
        q("SELECT 1 AS a, 2 AS a"),
        q("SELECT :a AS a", bind=[7]),
        q("SELECT ? AS v, x'00ff' AS b, 1.0 AS f", "first", bind=[10_000_000_000]),
    )
    assert several["results"] == [{"two": 2}]
    assert dup["results"] == [{"a": 2}]
    assert named["results"] == [{"a": 7}]
    assert big == {"v": 10_000_000_000, "b": [0, 255], "f": 1}


def test_d1_sessions(sc: Scenario) -> None:
    """withSession() gives a session that prepares and batches against the same database."""
    t = table(sc)
    first = {"b": "DB", "prepare": f"INSERT INTO {t} (name) VALUES ('s')", "m": "run",
             "session": "first-primary"}  # fmt: skip
    read = {"b": "DB", "prepare": f"SELECT name FROM {t}", "m": "raw",
            "session": "first-unconstrained"}  # fmt: skip
    bookmark = {"b": "DB", "m": "bookmark", "session": "first-primary"}
    wrote, rows, kind = sc.storage(first, read, bookmark)
    assert meta(wrote)["changes"] == 1
    assert rows == [["s"]]
    assert kind == "function"


def test_d1_binds_numbers_as_real(sc: Scenario) -> None:
    """JS numbers (and booleans, as 1/0) are bound as REAL values."""
    row = sc.one(
        q(
            "SELECT typeof(?) AS a, typeof(?) AS b, typeof(?) AS c, CAST(? AS TEXT) AS d",
            "first",
            bind=[2, True, 2.5, 3],
        )
    )
    assert row == {"a": "real", "b": "real", "c": "real", "d": "3.0"}
