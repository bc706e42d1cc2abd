"""`celld d1|kv|r2 ...` on real state files, through click's runner."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from celld.cli.main import cli
from tests.celld_server import CelldServer

PROJECT = Path(__file__).resolve().parent / "projects" / "storage"


def run(state: Path, *args: str, input: str | None = None) -> tuple[int, str]:  # noqa: A002
    result = CliRunner().invoke(
        cli, [*args, "--project", str(PROJECT), "--persist-to", str(state)], input=input
    )
    return result.exit_code, result.output


def test_d1_migrations_and_execute(tmp_path: Path) -> None:
    assert run(tmp_path, "d1", "migrations", "list", "DB") == (0, "0001_notes.sql\n")
    assert run(tmp_path, "d1", "migrations", "apply", "test-db") == (
        0,
        "applied 0001_notes.sql\n",
    )
    assert run(tmp_path, "d1", "migrations", "apply", "DB") == (0, "No migrations to apply.\n")
    code, out = run(
        tmp_path, "d1", "execute", "DB", "--json",
        "--command", "INSERT INTO notes (body) VALUES ('a'); SELECT id, body FROM notes",
    )  # fmt: skip
    assert code == 0
    assert [r["results"] for r in json.loads(out)] == [[], [{"id": 1, "body": "a"}]]
    db = sqlite3.connect(tmp_path / "d1" / "test-db-id.sqlite3")
    # wrangler's own table and columns, so either tool sees what the other applied
    assert db.execute("SELECT id, name FROM d1_migrations").fetchall() == [(1, "0001_notes.sql")]
    code, out = run(tmp_path, "d1", "execute", "DB", "--command", "SELECT * FROM nope")
    assert code == 1 and "D1_ERROR: no such table: nope: SQLITE_ERROR" in out
    code, out = run(tmp_path, "d1", "execute", "OTHER", "--command", "SELECT 1")
    assert code == 1 and "no D1 database 'OTHER'" in out


def test_failing_migration_changes_nothing(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "migrations").mkdir(parents=True)
    (project / "index.js").write_text("export default {}")
    (project / "wrangler.json").write_text(
        json.dumps({"main": "index.js", "d1_databases": [{"binding": "DB"}]})
    )
    (project / "migrations" / "0001_ok.sql").write_text("CREATE TABLE a (x);")
    (project / "migrations" / "0002_bad.sql").write_text(
        "CREATE TABLE b (x);\nINSERT INTO nope VALUES (1);"
    )
    result = CliRunner().invoke(cli, ["d1", "migrations", "apply", "DB", "--project", str(project)])
    assert result.exit_code == 1
    assert "migration failed: 0002_bad.sql: no such table: nope" in result.output
    db = sqlite3.connect(project / ".celld" / "d1" / "DB.sqlite3")
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "a" in tables and "b" not in tables
    assert db.execute("SELECT name FROM d1_migrations").fetchall() == [("0001_ok.sql",)]


def test_kv_keys(tmp_path: Path) -> None:
    assert (
        run(tmp_path, "kv", "key", "put", "k", "v1", "--binding", "KV", "--metadata", '{"a":1}')[0]
        == 0
    )
    assert run(tmp_path, "kv", "key", "get", "k", "--binding", "KV") == (0, "v1")
    code, out = run(tmp_path, "kv", "key", "list", "--namespace-id", "test-kv")
    assert code == 0 and json.loads(out) == [{"name": "k", "metadata": {"a": 1}}]
    code, out = run(tmp_path, "kv", "key", "put", "k", "v", "--binding", "KV", "--ttl", "5")
    assert code == 1 and "Expiration TTL must be at least 60" in out
    assert run(tmp_path, "kv", "key", "delete", "k", "--binding", "KV")[0] == 0
    code, out = run(tmp_path, "kv", "key", "get", "k", "--binding", "KV")
    assert code == 1 and "Value not found" in out


def test_r2_objects(tmp_path: Path) -> None:
    code, out = run(tmp_path, "r2", "object", "put", "test-bucket/a/b.txt", "--pipe", input="hello")
    assert code == 0 and "etag 5d41402abc4b2a76b9719d911017c592" in out
    assert run(tmp_path, "r2", "object", "get", "test-bucket/a/b.txt") == (0, "hello")
    assert run(tmp_path, "r2", "object", "delete", "BUCKET/a/b.txt")[0] == 0
    code, out = run(tmp_path, "r2", "object", "get", "test-bucket/a/b.txt")
    assert code == 1 and "does not exist" in out
    code, out = run(tmp_path, "r2", "object", "get", "nobucket/x")
    assert code == 1 and "no R2 bucket 'nobucket'" in out


def test_d1_commands_on_a_shared_store(tmp_path: Path, postgres_dsn: str) -> None:
    """With --store, the commands reach the database's pages in PostgreSQL: done by the
    command itself while no node owns the database, and forwarded to the node that owns
    it once one does (its own file under --persist-to is never read)."""
    shared = ("--store", postgres_dsn)
    assert run(tmp_path / "cli", "d1", "migrations", "list", "DB", *shared) == (
        0,
        "0001_notes.sql\n",
    )
    assert run(tmp_path / "cli", "d1", "migrations", "apply", "DB", *shared) == (
        0,
        "applied 0001_notes.sql\n",
    )
    node = CelldServer(PROJECT, tmp_path / "node", args=shared).start()
    try:
        # The node takes the database (rebuilt from the pages the command wrote) ...
        assert node.post("/api/d1/query", content="SELECT count(*) AS n FROM notes").json()[
            "results"
        ] == [{"n": 0}]
        # ... and the next commands run there, forwarded.
        assert run(tmp_path / "cli2", "d1", "migrations", "apply", "DB", *shared) == (
            0,
            "No migrations to apply.\n",
        )
        code, out = run(
            tmp_path / "cli2", "d1", "execute", "DB", "--json", *shared,
            "--command", "INSERT INTO notes (body) VALUES ('a'); SELECT id, body FROM notes",
        )  # fmt: skip
        assert code == 0, out
        assert [r["results"] for r in json.loads(out)] == [[], [{"id": 1, "body": "a"}]]
        assert not (tmp_path / "cli2" / "d1" / "test-db-id.sqlite3").exists()
        rows = node.post("/api/d1/query", content="SELECT body FROM notes").json()["results"]
        assert rows == [{"body": "a"}]
    finally:
        node.stop()
    code, out = run(tmp_path, "d1", "execute", "DB", "--store", "mysql://x", "--command", "x")
    assert code == 2 and "--store must be a postgresql://" in out
