"""A real `celld run` of a project with KV, D1, R2, assets and offline-only bindings."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

PROJECT = PROJECTS / "storage"


def wait_complete(server: CelldServer, instance: str) -> dict:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = server.get("/api/status", params={"id": instance}).json()
        if status["status"] in ("complete", "errored"):
            return status
        time.sleep(0.05)
    raise AssertionError(f"{instance} did not finish: {status}")


def test_workflow_writes_every_store_and_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(PROJECT, state).start()
    try:
        for n, instance in enumerate(("one", "two"), start=1):
            assert server.post("/api/start", params={"id": instance, "n": n}).status_code == 200
        assert wait_complete(server, "one")["output"] == {"n": 1}
        assert wait_complete(server, "two")["status"] == "complete"
        # The offline-only bindings were announced once, and their calls fail clearly.
        ai = server.get("/api/ai")
        assert ai.status_code == 500
        assert ai.json()["error"]["message"] == (
            "env.AI.run(): Workers AI needs Cloudflare's network and is not available under celld"
        )
        assert "env.AI (Workers AI), env.EMAIL (Email sending)" in server.log()
        assert server.get("/api/email").json() == {
            "from": "a@example.com",
            "error": "env.EMAIL.send(): Email sending needs Cloudflare's network and is not "
            "available under celld",
        }
    finally:
        server.stop()

    server = CelldServer(PROJECT, state).start()
    try:
        read = server.get("/api/read", params={"id": "two"}).json()
    finally:
        server.stop()
    assert read == {
        "row": {"id": "two", "n": 2},
        "object": {"body": {"n": 2}, "custom": {"n": "2"}, "type": "application/json"},
        "kv": {"value": 2, "metadata": {"n": 2}, "cacheStatus": None},
        "keys": ["run:one", "run:two"],
    }
    # Each store is a file of its own under the state folder.
    db = sqlite3.connect(state / "d1" / "test-db-id.sqlite3")
    assert db.execute("SELECT id, n FROM runs ORDER BY id").fetchall() == [("one", 1), ("two", 2)]
    assert (state / "kv" / "test-kv.sqlite3").is_file()
    assert (state / "r2" / "test-bucket" / "objects.sqlite3").is_file()


def test_assets_and_worker_share_the_port(tmp_path: Path) -> None:
    server = CelldServer(PROJECT, tmp_path / "state").start()
    try:
        home = server.get("/")
        about = server.get("/about.html", follow_redirects=False)
        binding = server.get("/api/assets", params={"path": "/style.css"})
        worker = server.get("/not-an-asset")
        head = server.client.head("/style.css")  # type: ignore[union-attr]
    finally:
        server.stop()
    assert (home.status_code, home.text) == (200, "<h1>home</h1>\n")
    assert home.headers["content-type"] == "text/html; charset=utf-8"
    assert (about.status_code, about.headers["location"]) == (307, "/about")
    assert (binding.status_code, binding.text) == (200, "body { color: red }\n")
    assert worker.json() == {"worker": "/not-an-asset"}
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len("body { color: red }\n"))


def test_projects_do_not_share_data(tmp_path: Path) -> None:
    """Two projects with the same binding ids keep their data apart (each has its state)."""
    first = CelldServer(PROJECT, tmp_path / "a").start()
    try:
        assert first.post("/api/kv/put", params={"key": "k"}, content=b"first").status_code == 200
        assert first.post("/api/r2/put", params={"key": "k"}, content=b"first").status_code == 200
    finally:
        first.stop()
    second = CelldServer(PROJECT, tmp_path / "b").start()
    try:
        assert second.get("/api/kv/get", params={"key": "k"}).json() == {"value": None}
        assert second.get("/api/r2/get", params={"key": "k"}).status_code == 404
    finally:
        second.stop()


def test_bad_input_harms_nothing_else(tmp_path: Path) -> None:
    server = CelldServer(PROJECT, tmp_path / "state").start()
    try:
        bad_sql = server.post("/api/d1/query", content=b"SELEC nonsense")
        big_key = server.post("/api/kv/put", params={"key": "k" * 600}, content=b"v")
        ok = server.post("/api/d1/query", content=b"SELECT 1 AS one")
    finally:
        server.stop()
    assert bad_sql.status_code == 500
    assert bad_sql.json()["error"]["message"].startswith('D1_ERROR: near "SELEC": syntax error')
    assert big_key.json()["error"]["message"] == (
        "KV PUT failed: 414 UTF-8 encoded length of 600 exceeds key length limit of 512."
    )
    assert ok.json()["results"] == [{"one": 1}]
