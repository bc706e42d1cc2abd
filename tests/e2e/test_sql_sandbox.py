"""A Worker of a real `celld run` cannot reach celld's own workflow store through D1, nor any
other file; neither can `celld d1 execute` (celld/bindings/sqlguard.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from click.testing import CliRunner

from celld.cli.main import cli
from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS
from tests.e2e.test_storage import wait_complete

PROJECT = PROJECTS / "storage"
AUTH = "D1_ERROR: not authorized: SQLITE_AUTH"


def instances(store: Path) -> list[tuple[str, str | None, str]]:
    conn = sqlite3.connect(store)
    try:
        return conn.execute("SELECT id, output, status FROM instances ORDER BY id").fetchall()
    finally:
        conn.close()


def test_a_worker_cannot_forge_workflow_outputs_through_d1(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = state / "celld.sqlite3"
    server = CelldServer(PROJECT, state).start()
    try:
        assert server.post("/api/start", params={"id": "one", "n": 1}).status_code == 200
        assert wait_complete(server, "one")["output"] == {"n": 1}
        rows = instances(store)
        forge = "UPDATE w.instances SET output = '{\"n\": 666}' WHERE id = 'one'"
        for body in (
            f"ATTACH DATABASE '{store}' AS w",
            f"ATTACH DATABASE '{store}' AS w; {forge}",
            f"ATTACH DATABASE 'file:{store}?mode=rw' AS w",
        ):
            answer = server.post("/api/d1/query", content=body)
            assert answer.status_code == 500 and answer.json()["error"]["message"] == AUTH, body
        batch = server.post(
            "/api/d1/batch",
            json=[{"sql": f"ATTACH DATABASE '{store}' AS w"}, {"sql": forge}],
        )
        assert batch.status_code == 500 and batch.json()["error"]["message"] == AUTH
        assert wait_complete(server, "one")["output"] == {"n": 1}
        assert instances(store) == rows
    finally:
        server.stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["state", "state-celld.log"])


def test_celld_d1_execute_is_sandboxed_too(tmp_path: Path) -> None:
    target = tmp_path / "outside.db"
    result = CliRunner().invoke(
        cli,
        ["d1", "execute", "DB", "--command", f"ATTACH DATABASE '{target}' AS x",
         "--project", str(PROJECT), "--persist-to", str(tmp_path / "state")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert AUTH in result.output
    assert not target.exists()
