"""A Worker's D1 SQL reaches its own database and nothing else (celld/bindings/sqlguard.py).

Each attack runs from a real isolate through env.DB, in each of D1's three ways to run SQL
(prepare().all(), batch(), exec()), and the answer is wrangler dev's (recorded in
compat/scenarios/test_d1_sandbox.py against both targets).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.bindings.harness import Harness

AUTH = "not authorized: SQLITE_AUTH"
VACUUM = "cannot VACUUM from within a transaction: SQLITE_ERROR"


def attempt(js: Harness, sql: str) -> list[str]:
    """`sql` run by prepare().all(), batch() and exec(): the three answers (error messages,
    or "ok" and the rows)."""
    return js(f"""
        const sql = {json.dumps(sql)};
        await env.DB.exec("CREATE TABLE IF NOT EXISTS t (a)");
        const out = [];
        for (const run of [
          () => env.DB.prepare(sql).all(),
          () => env.DB.batch([env.DB.prepare(sql)]),
          () => env.DB.exec(sql),
        ]) {{
          try {{
            out.push("ok " + JSON.stringify(await run()));
          }} catch (e) {{
            out.push(e.message);
          }}
        }}
        return out;
    """)


def refused(answers: list[str], words: str = AUTH) -> bool:
    prepare, batch, exec_ = answers
    return (
        prepare == f"D1_ERROR: {words}"
        and batch == f"D1_ERROR: {words}"
        and exec_.startswith("D1_EXEC_ERROR: Error in line 1: ")
        and exec_.endswith(f": {words}")
    )


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")} if folder.exists() else set()


def test_attach_of_a_path_creates_no_file(js: Harness, tmp_path: Path) -> None:
    target = tmp_path / "outside" / "attached.db"
    target.parent.mkdir()
    answers = attempt(js, f"ATTACH DATABASE '{target}' AS x")
    assert refused(answers), answers
    # ...nor with a table written through it in the same statement text.
    answers = attempt(
        js, f"ATTACH '{target}' AS x; CREATE TABLE x.t (a); INSERT INTO x.t VALUES (1)"
    )
    assert refused(answers), answers
    assert files_under(target.parent) == set()


def test_detach_is_refused(js: Harness) -> None:
    assert refused(attempt(js, "DETACH DATABASE main"))


def test_vacuum_into_writes_no_copy(js: Harness, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    assert refused(attempt(js, f"VACUUM INTO '{copy}'"), VACUUM)
    assert refused(attempt(js, "VACUUM"), VACUUM)
    assert not copy.exists()


def test_file_uri_creates_no_file(js: Harness, tmp_path: Path) -> None:
    target = tmp_path / "uri.db"
    for name in (f"file:{target}?mode=rwc", f"file://{target}", "file:memdb?mode=memory"):
        assert refused(attempt(js, f"ATTACH DATABASE '{name}' AS y")), name
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_writable_schema_is_refused(js: Harness) -> None:
    for sql in (
        "PRAGMA writable_schema=ON",
        "PRAGMA writable_schema",
        "PRAGMA main.writable_schema=1",
    ):
        assert refused(attempt(js, sql)), sql
    # The schema is SQLite's own: rows of sqlite_master cannot be written either way.
    answers = attempt(js, "UPDATE sqlite_master SET sql = 'CREATE TABLE t (b)' WHERE name = 't'")
    assert answers[0] == "D1_ERROR: table sqlite_master may not be modified: SQLITE_ERROR"


def test_extensions_cannot_be_loaded(js: Harness, tmp_path: Path) -> None:
    library = tmp_path / "evil.so"
    library.write_bytes(b"\x7fELF")
    answers = attempt(js, f"SELECT load_extension('{library}')")
    assert refused(answers, "not authorized: SQLITE_ERROR"), answers  # SQLite's own refusal


def test_database_list_does_not_reveal_the_state_folder(js: Harness) -> None:
    for sql in (
        "PRAGMA database_list",
        "SELECT * FROM pragma_database_list",
        "SELECT file FROM pragma_database_list()",
    ):
        answers = attempt(js, sql)
        assert refused(answers), (sql, answers)
        assert not any(str(js.state) in answer for answer in answers)


def test_functions_beyond_workerds_list_are_refused(js: Harness) -> None:
    # fts3_tokenizer() hands out a native pointer (and with two arguments takes one).
    for name in ("sqlite_version", "fts3_tokenizer", "sqlite_compileoption_get"):
        arg = "'simple'" if name == "fts3_tokenizer" else ("0" if "option" in name else "")
        answers = attempt(js, f"SELECT {name}({arg})")
        assert refused(answers, f"not authorized to use function: {name}: SQLITE_ERROR"), answers


def test_d1s_pragmas_still_work(js: Harness) -> None:
    result = js("""
        await env.DB.exec("CREATE TABLE p (id INTEGER PRIMARY KEY, body TEXT)");
        const out = {};
        for (const sql of ["PRAGMA table_list", "PRAGMA table_info(p)", "PRAGMA table_xinfo(p)",
                           "PRAGMA index_list(p)", "PRAGMA quick_check", "PRAGMA foreign_keys",
                           "PRAGMA foreign_key_check", "PRAGMA defer_foreign_keys = on",
                           "PRAGMA optimize", "PRAGMA case_sensitive_like = off"]) {
          out[sql] = (await env.DB.prepare(sql).all()).results;
        }
        return out;
    """)
    assert [r["name"] for r in result["PRAGMA table_info(p)"]] == ["id", "body"]
    assert result["PRAGMA quick_check"] == [{"quick_check": "ok"}]
    assert result["PRAGMA foreign_keys"] == [{"foreign_keys": 1}]
    assert {"schema": "main", "name": "p", "type": "table", "ncol": 2, "wr": 0, "strict": 0} in (
        result["PRAGMA table_list"]
    )


def test_temp_objects_and_other_schemas_are_refused(js: Harness) -> None:
    for sql in (
        "CREATE TEMP TABLE tt (a)",
        "CREATE TEMP VIEW tv AS SELECT 1",
        "PRAGMA temp.table_info(t)",
        "CREATE VIRTUAL TABLE f3 USING fts3(a)",
        "CREATE TABLE _cf_mine (a)",
        "ALTER TABLE t RENAME TO _cf_KV",
    ):
        assert refused(attempt(js, sql)), sql
    tables = js("return (await env.DB.prepare('SELECT name FROM sqlite_master').all()).results")
    assert tables == [{"name": "t"}]


def test_transaction_statements_get_workerds_message(js: Harness) -> None:
    for sql in ("BEGIN", "COMMIT", "ROLLBACK", "END", "SAVEPOINT s", "RELEASE s"):
        answers = attempt(js, sql)
        assert answers[0].startswith("D1_ERROR: To execute a transaction, please use"), answers


@pytest.mark.parametrize("statement", ["INSERT INTO t VALUES (1); SELECT nope FROM t"])
def test_a_failing_query_leaves_nothing_behind(js: Harness, statement: str) -> None:
    """Each query is one transaction, as in wrangler dev: the INSERT before the failing
    statement is undone with it."""
    answers = attempt(js, statement)
    assert answers[0] == "D1_ERROR: no such column: nope: SQLITE_ERROR"
    assert js("return (await env.DB.prepare('SELECT count(*) AS n FROM t').first('n'))") == 0


def test_the_database_file_opens_by_path_never_as_a_uri(tmp_path: Path) -> None:
    from celld.bindings.sqlguard import connect

    for name in ("file:x.db?mode=rwc", "FILE:x.db", ":memory:"):
        with pytest.raises(ValueError, match="URIs are refused"):
            connect(Path(name))
    conn = connect(tmp_path / "d1" / "db.sqlite3")
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        conn.execute("PRAGMA database_list")
    with conn.trusted():  # celld's own view: the file by its absolute path
        assert conn.execute("PRAGMA database_list").fetchall() == [
            (0, "main", str(tmp_path / "d1" / "db.sqlite3"))
        ]
    conn.close()
    assert not (tmp_path / "x.db").exists()


def test_the_state_folder_is_all_that_changes(js: Harness, tmp_path: Path) -> None:
    before = files_under(tmp_path)
    attempt(js, f"ATTACH '{tmp_path / 'a.db'}' AS a")
    attempt(js, f"VACUUM INTO '{tmp_path / 'b.db'}'")
    after = files_under(tmp_path)
    assert {p for p in after - before if p != js.state and js.state not in p.parents} == set()
    assert sqlite3.connect(js.state / "d1" / "db-id.sqlite3").execute(
        "SELECT name FROM sqlite_master"
    ).fetchall() == [("t",)]
