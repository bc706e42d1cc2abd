"""The SQLite sandbox on its own (celld/bindings/sqlguard.py), on real files in a temp folder:
the parts D1 and Durable Object SQL cannot show through JS."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from celld.bindings.sqlguard import LIMITS, GuardedConnection, connect


@pytest.fixture
def conn(tmp_path: Path) -> GuardedConnection:
    conn = connect(tmp_path / "state" / "db.sqlite3")
    with conn.trusted():
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (a)")
    return conn


def test_vacuum_into_is_refused_outside_a_transaction(
    conn: GuardedConnection, tmp_path: Path
) -> None:
    """D1 and SQL storage run Worker SQL inside a transaction, where SQLite refuses VACUUM by
    itself; the sandbox refuses it without one too (SQLite vacuums by attaching a database)."""
    assert not conn.in_transaction
    for sql in (f"VACUUM INTO '{tmp_path / 'copy.db'}'", "VACUUM"):
        with pytest.raises(sqlite3.DatabaseError) as caught:
            conn.run(sql)
        assert caught.value.sqlite_errorname == "SQLITE_AUTH"  # type: ignore[attr-defined]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_attach_is_refused_even_trusted(conn: GuardedConnection, tmp_path: Path) -> None:
    """No database but main: celld's own statements cannot attach one either (the limit)."""
    with conn.trusted(), pytest.raises(sqlite3.OperationalError, match="too many attached"):
        conn.execute(f"ATTACH '{tmp_path / 'x.db'}' AS x")
    assert not (tmp_path / "x.db").exists()


def test_workerds_limits_are_set(conn: GuardedConnection) -> None:
    for category, value in LIMITS.items():
        assert conn.getlimit(category) == value
    with pytest.raises(sqlite3.OperationalError, match="too many SQL variables"):
        conn.run("SELECT " + ", ".join("?" * 101), [1] * 101)
    assert conn.run("SELECT " + ", ".join("?" * 100), [1] * 100).fetchone() == (1,) * 100


def test_a_statement_celld_prepared_is_not_reused_for_a_worker(conn: GuardedConnection) -> None:
    """Python caches prepared statements by their text; one prepared by celld's own code
    (trusted) must be prepared and authorized again before the same text runs for a Worker."""
    with conn.trusted():
        conn.execute("CREATE TABLE _cf_KV (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO _cf_KV VALUES ('k', 'secret')")
        assert conn.execute("SELECT value FROM _cf_KV").fetchall() == [("secret",)]
    for _ in range(2):
        with pytest.raises(sqlite3.DatabaseError, match="prohibited"):
            conn.run("SELECT value FROM _cf_KV")
        with conn.trusted():
            conn.execute("SELECT value FROM _cf_KV").fetchall()


def test_a_rename_into_the_reserved_namespace_is_undone(conn: GuardedConnection) -> None:
    """SQLite tells an authorizer which table ALTER TABLE renames but not the new name; the
    sandbox finds the stray name after the statement and renames the table back."""
    conn.run("INSERT INTO t VALUES (1)")
    for new in ("_cf_KV", "_CF_other", '"_cf_quoted"'):
        with pytest.raises(sqlite3.DatabaseError, match="not authorized") as caught:
            conn.run(f"ALTER TABLE t RENAME TO {new}")
        assert caught.value.sqlite_errorname == "SQLITE_AUTH"  # type: ignore[attr-defined]
    with conn.trusted():
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
    assert conn.run("SELECT a FROM t").fetchall() == [(1,)]
    conn.run("ALTER TABLE t RENAME TO u")  # an ordinary rename is fine
    conn.run("ALTER TABLE u RENAME TO t")


@pytest.mark.parametrize(
    ("pragma", "allowed"),
    [
        ("foreign_keys", True),
        ("foreign_keys = off", True),
        ("foreign_keys = 'yes'", True),
        ("foreign_keys = onion", True),  # workerd compares the first letters only
        ("foreign_keys = 2", False),
        ("optimize", True),
        ("optimize(-1)", True),
        ("optimize(0x10002)", True),
        ("optimize(abc)", False),
        ("quick_check", True),
        ("quick_check(5)", True),
        ("quick_check(t)", True),
        ("table_info", False),
        ("table_info(t)", True),
        ("index_list", False),
        ("foreign_key_check", True),
        ("data_version", True),
        ("data_version = 5", False),
        ("page_size", True),
        ("page_size = 8192", False),
        ("page_count", False),
        ("journal_mode", False),
        ("integrity_check", False),
        ("database_list", False),
        ("writable_schema = 1", False),
        ("pragma_list", False),
        ("no_such_pragma", False),
        ("temp.table_info(t)", False),
        ("main.table_info(t)", True),
    ],
)
def test_pragmas_as_workerd_checks_them(
    conn: GuardedConnection, pragma: str, allowed: bool
) -> None:
    if allowed:
        conn.run(f"PRAGMA {pragma}").fetchall()
    else:
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            conn.run(f"PRAGMA {pragma}")


def test_workers_sql_never_runs_trusted(conn: GuardedConnection) -> None:
    with conn.trusted(), pytest.raises(RuntimeError, match="must not run inside trusted"):
        conn.run("SELECT 1")
