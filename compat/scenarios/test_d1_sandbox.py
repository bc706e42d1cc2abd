"""D1's SQL sandbox (env.DB): what D1 refuses (other files, VACUUM, PRAGMAs beyond its list,
temp objects, reserved names, functions, transactions) and the PRAGMAs it allows.

Files a refused statement names live in a fresh folder of this process; each scenario checks
that it stays empty. Both targets run on this machine, so the folder is theirs to write.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat.differences import SQLITE_ERROR_OFFSET, difference
from compat.scenario import Scenario

AUTH = "D1_ERROR: not authorized: SQLITE_AUTH"
VACUUM = "D1_ERROR: cannot VACUUM from within a transaction: SQLITE_ERROR"
TRANSACTION = (
    "D1_ERROR: To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements. The JavaScript API is safer because it will automatically roll back on "
    "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
    "write coalescing."
)


def q(sql: str, method: str = "all", bind: list[Any] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"b": "DB", "prepare": sql, "m": method, "args": []}
    if bind is not None:
        op["bind"] = bind
    return op


def messages(results: list[Any]) -> list[str | None]:
    return [
        r["error"]["message"] if isinstance(r, dict) and "error" in r else None for r in results
    ]


def without_offset(message: str | None) -> str | None:
    """workerd's SQLite adds ` at offset N` to parse errors; Python's (3.40) does not."""
    return None if message is None else re.sub(r" at offset \d+", "", message)


@pytest.fixture
def outside() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="compat-d1-outside-") as folder:
        yield Path(folder)


def table(sc: Scenario) -> str:
    name = "s_" + sc.new_id().replace("-", "_")
    sc.one(q(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, body TEXT, parent INTEGER "
             f"REFERENCES {name}(id))"))  # fmt: skip
    sc.one(q(f"CREATE INDEX {name}_body ON {name} (body)"))
    return name


def test_d1_attach_and_detach_refused(sc: Scenario, outside: Path) -> None:
    """ATTACH (of a path, a file: URI, a fresh name) and DETACH are not authorized, through
    prepare(), batch() and exec(); no file appears."""
    target = outside / "attached.db"
    results = sc.storage(
        q(f"ATTACH DATABASE '{target}' AS x"),
        q(f"ATTACH DATABASE 'file:{outside / 'uri.db'}?mode=rwc' AS y"),
        q(f"ATTACH '{target}' AS x; CREATE TABLE x.t (a)"),
        q("DETACH DATABASE main"),
        {"b": "DB", "m": "batch", "statements": [{"prepare": f"ATTACH '{target}' AS z"}]},
        {"b": "DB", "m": "exec", "args": [f"ATTACH DATABASE '{target}' AS w"]},
    )
    assert messages(results) == [AUTH] * 5 + [
        f"D1_EXEC_ERROR: Error in line 1: ATTACH DATABASE '{target}' AS w: not authorized: "
        "SQLITE_AUTH"
    ]
    assert list(outside.iterdir()) == []


def test_d1_vacuum_refused(sc: Scenario, outside: Path) -> None:
    """VACUUM and VACUUM INTO fail: D1 runs every query in a transaction."""
    results = sc.storage(q("VACUUM"), q(f"VACUUM INTO '{outside / 'copy.db'}'"))
    assert messages(results) == [VACUUM, VACUUM]
    assert list(outside.iterdir()) == []


def test_d1_pragmas_refused(sc: Scenario) -> None:
    """PRAGMAs outside D1's list are not authorized, as statements and as table-valued
    functions: database_list (it would name the state folder), writable_schema, ..."""
    t = table(sc)
    refused = [
        "PRAGMA database_list",
        "SELECT * FROM pragma_database_list",
        "PRAGMA writable_schema = ON",
        "PRAGMA writable_schema",
        "PRAGMA journal_mode",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA page_count",
        "PRAGMA page_size = 8192",
        "PRAGMA data_version = 5",
        "PRAGMA integrity_check",
        "PRAGMA user_version",
        "PRAGMA cache_size",
        "PRAGMA compile_options",
        "PRAGMA function_list",
        "PRAGMA pragma_list",
        "PRAGMA no_such_pragma",
        "PRAGMA foreign_keys = 2",
        "PRAGMA optimize(abc)",
        "PRAGMA table_info",
        f"PRAGMA temp.table_info({t})",
    ]
    assert messages(sc.storage(*(q(sql) for sql in refused))) == [AUTH] * len(refused)


def test_d1_pragmas_allowed(sc: Scenario) -> None:
    """D1's documented PRAGMAs answer (with workerd's argument rules)."""
    t = table(sc)
    (info, xinfo, indexes, index_info, index_xinfo, quick, quick_named, quick_n, fk_list,
     fk_check, fk_check_named, fk_read, data_version, page_size) = sc.storage(
        q(f"PRAGMA table_info({t})"),
        q(f"PRAGMA table_xinfo({t})"),
        q(f"PRAGMA index_list({t})"),
        q(f"PRAGMA index_info({t}_body)"),
        q(f"PRAGMA index_xinfo({t}_body)"),
        q("PRAGMA quick_check"),
        q(f"PRAGMA quick_check({t})"),
        q("PRAGMA quick_check(5)"),
        q(f"PRAGMA foreign_key_list({t})"),
        q("PRAGMA foreign_key_check"),
        q(f"PRAGMA foreign_key_check({t})"),
        q("PRAGMA foreign_keys"),
        q("PRAGMA data_version"),
        q("PRAGMA page_size"),
    )  # fmt: skip
    assert [c["name"] for c in info["results"]] == ["id", "body", "parent"]
    assert [c["hidden"] for c in xinfo["results"]] == [0, 0, 0]
    assert [i["name"] for i in indexes["results"]] == [f"{t}_body"]
    assert index_info["results"] == [{"seqno": 0, "cid": 1, "name": "body"}]
    assert [c["name"] for c in index_xinfo["results"]] == ["body", None]
    assert (
        quick["results"] == quick_named["results"] == quick_n["results"] == [{"quick_check": "ok"}]
    )
    assert [(f["table"], f["from"], f["to"]) for f in fk_list["results"]] == [(t, "parent", "id")]
    assert fk_check["results"] == fk_check_named["results"] == []
    assert fk_read["results"] == [{"foreign_keys": 1}]
    assert isinstance(data_version["results"][0]["data_version"], int)
    assert page_size["results"] == [{"page_size": 4096}]
    listed = sc.one(q("PRAGMA table_list"))["results"]
    assert {"schema": "main", "name": t, "type": "table", "ncol": 3, "wr": 0, "strict": 0} in listed
    toggles = [
        "PRAGMA case_sensitive_like = on",
        "PRAGMA case_sensitive_like = off",
        "PRAGMA foreign_keys = off",
        "PRAGMA defer_foreign_keys = on",
        "PRAGMA ignore_check_constraints = off",
        "PRAGMA legacy_alter_table = off",
        "PRAGMA recursive_triggers = off",
        "PRAGMA reverse_unordered_selects = off",
        "PRAGMA foreign_keys = 'yes'",
        "PRAGMA optimize",
        "PRAGMA optimize(0x10002)",
        "ANALYZE",
        "REINDEX",
    ]
    assert messages(sc.storage(*(q(sql) for sql in toggles))) == [None] * len(toggles)
    # foreign_keys = off is ignored inside the query's transaction: still enforced after it
    assert sc.one(q("PRAGMA foreign_keys"))["results"] == [{"foreign_keys": 1}]


def test_d1_schema_refusals(sc: Scenario) -> None:
    """Temp objects, tables in the reserved _cf_ namespace (made or renamed into), and virtual
    tables of modules other than fts5/fts5vocab/rtree are not authorized; those three work."""
    t = table(sc)
    refused = [
        "CREATE TEMP TABLE tt (a)",
        "CREATE TEMP VIEW tv AS SELECT 1",
        "CREATE TABLE _cf_mine (a)",
        f"ALTER TABLE {t} RENAME TO _cf_KV",
        f"CREATE VIRTUAL TABLE {t}_f3 USING fts3(a)",
        "UPDATE sqlite_master SET sql = 'x'",
    ]
    answers = messages(sc.storage(*(q(sql) for sql in refused)))
    assert answers[:5] == [AUTH] * 5
    assert answers[5] == "D1_ERROR: table sqlite_master may not be modified: SQLITE_ERROR"
    allowed = sc.storage(
        q(f"CREATE VIRTUAL TABLE {t}_fts USING fts5(body)"),
        q(f"INSERT INTO {t}_fts (body) VALUES ('hello sandbox')"),
        q(f"SELECT body FROM {t}_fts WHERE {t}_fts MATCH 'sandbox'"),
        q(f"CREATE VIRTUAL TABLE {t}_box USING rtree(id, x0, x1)"),
        q(f"CREATE VIRTUAL TABLE {t}_voc USING fts5vocab({t}_fts, 'row')"),
    )
    assert messages(allowed) == [None] * 5
    assert allowed[2]["results"] == [{"body": "hello sandbox"}]
    tables = sc.one(q(f"SELECT name FROM sqlite_master WHERE name = '{t}'"))["results"]
    assert tables == [{"name": t}]


@difference(wrangler=SQLITE_ERROR_OFFSET)
def test_d1_functions_refused(sc: Scenario) -> None:
    """Functions beyond workerd's list are not authorized (sqlite_version() and friends);
    load_extension() is SQLite's own refusal."""
    load, version, source, fine = sc.storage(
        q("SELECT load_extension('/nonexistent/lib.so')"),
        q("SELECT sqlite_version()"),
        q("SELECT likely(1), sqlite_source_id()"),
        q(
            "SELECT abs(-1) AS a, json_extract('{\"k\":2}', '$.k') AS j,"
            " unixepoch('1970-01-01') AS u"
        ),
    )
    assert messages([load]) == ["D1_ERROR: not authorized: SQLITE_ERROR"]
    assert [without_offset(m) for m in messages([version, source])] == [
        "D1_ERROR: not authorized to use function: sqlite_version: SQLITE_ERROR",
        "D1_ERROR: not authorized to use function: sqlite_source_id: SQLITE_ERROR",
    ]
    assert fine["results"] == [{"a": 1, "j": 2, "u": 0}]


def test_d1_transaction_statements_refused(sc: Scenario) -> None:
    """BEGIN, COMMIT, ROLLBACK, END, SAVEPOINT and RELEASE get workerd's message."""
    sqls = ["BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK", "END", "SAVEPOINT s", "RELEASE s"]
    assert messages(sc.storage(*(q(sql) for sql in sqls))) == [TRANSACTION] * len(sqls)


@difference(wrangler=SQLITE_ERROR_OFFSET)
def test_d1_query_is_one_transaction(sc: Scenario) -> None:
    """A prepared text whose second statement fails leaves nothing of the first behind."""
    t = table(sc)
    failed, count = sc.storage(
        q(f"INSERT INTO {t} (body) VALUES ('kept?'); SELECT nope FROM {t}"),
        q(f"SELECT count(*) AS n FROM {t}", "first"),
    )
    assert without_offset(messages([failed])[0]) == "D1_ERROR: no such column: nope: SQLITE_ERROR"
    assert count == {"n": 0}


@difference(wrangler=SQLITE_ERROR_OFFSET)
def test_d1_limits(sc: Scenario) -> None:
    """workerd's limits: 100 bound parameters, 5 compound terms, 100,000 bytes of SQL,
    100 columns, LIKE patterns of 50 bytes, expression depth 100."""
    t = "w_" + sc.new_id().replace("-", "_")
    results = sc.storage(
        q("SELECT " + ", ".join("?" * 100), bind=[1] * 100),
        q("SELECT " + ", ".join("?" * 101), bind=[1] * 101),
        q(" UNION ALL ".join(f"SELECT {n}" for n in range(5))),
        q(" UNION ALL ".join(f"SELECT {n}" for n in range(6))),
        q("SELECT '" + "x" * (100_000 - 9) + "'"),
        q("SELECT '" + "x" * (100_000 - 8) + "'"),
        q(f"CREATE TABLE {t} (" + ", ".join(f"c{n}" for n in range(101)) + ")"),
        q("SELECT 'a' LIKE '" + "a" * 51 + "'"),
        q("SELECT " + " + ".join(["1"] * 100)),
        q("SELECT " + " + ".join(["1"] * 101)),
    )
    assert [without_offset(m) for m in messages(results)] == [
        None,
        "D1_ERROR: too many SQL variables: SQLITE_ERROR",
        None,
        "D1_ERROR: too many terms in compound SELECT: SQLITE_ERROR",
        None,
        "D1_ERROR: statement too long: SQLITE_TOOBIG",
        f"D1_ERROR: too many columns on {t}: SQLITE_ERROR",
        "D1_ERROR: LIKE or GLOB pattern too complex: SQLITE_ERROR",
        None,
        "D1_ERROR: Expression tree is too large (maximum depth 100): SQLITE_ERROR",
    ]
