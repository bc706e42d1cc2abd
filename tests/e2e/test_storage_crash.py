"""kill -9 `celld run` while D1 batches and R2 puts are in flight.

Every write acknowledged over HTTP before the kill must be there after a restart, a D1 batch
must be all there or not at all, and an R2 object must be whole (its bytes match its size and
etag) with no body file left behind that no row points at.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

import httpx

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

PROJECT = PROJECTS / "storage"
ROWS_PER_BATCH = 10


def _pump(url: str, make, acked: list, stop: threading.Event) -> None:  # type: ignore[no-untyped-def]
    """Send requests one after another until stopped or the server dies."""
    with httpx.Client(base_url=url, timeout=10) as client:
        n = 0
        while not stop.is_set():
            path, params, body, token = make(n)
            try:
                response = client.post(path, params=params, content=body)
            except httpx.TransportError:
                return
            if response.status_code == 200:
                acked.append(token)
            n += 1


def _kill_under_load(server: CelldServer, workers: list[threading.Thread], acked: list) -> None:
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 20
    while len(acked) < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.kill()
    for worker in workers:
        worker.join(15)
    assert len(acked) >= 30, "the load never got going"


def test_d1_batches_are_atomic_across_kill_9(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(PROJECT, state).start()
    created = server.post(
        "/api/d1/query",
        content=b"CREATE TABLE batches (b TEXT, i INTEGER); CREATE TABLE done (b TEXT PRIMARY KEY)",
    )
    assert created.status_code == 200, created.text

    def make(thread: int):  # type: ignore[no-untyped-def]
        def batch(n: int):  # type: ignore[no-untyped-def]
            b = f"{thread}-{n}"
            statements = [
                {"sql": "INSERT INTO batches VALUES (?, ?)", "params": [b, i]}
                for i in range(ROWS_PER_BATCH)
            ] + [{"sql": "INSERT INTO done VALUES (?)", "params": [b]}]
            return "/api/d1/batch", None, json.dumps(statements).encode(), b

        return batch

    acked: list[str] = []
    stop = threading.Event()
    workers = [
        threading.Thread(target=_pump, args=(server.url, make(t), acked, stop)) for t in range(4)
    ]
    _kill_under_load(server, workers, acked)

    server = CelldServer(PROJECT, state).start()
    server.stop()
    db = sqlite3.connect(state / "d1" / "test-db-id.sqlite3")
    counts = dict(db.execute("SELECT b, count(*) FROM batches GROUP BY b").fetchall())
    done = {row[0] for row in db.execute("SELECT b FROM done")}
    assert set(counts) == done  # a batch's rows and its marker committed together
    assert set(counts.values()) == {ROWS_PER_BATCH}  # never part of a batch
    assert set(acked) <= done  # every acknowledged batch survived


def _body(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest() * 8192  # 256 KiB


def test_r2_puts_are_whole_across_kill_9(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(PROJECT, state).start()

    def make(thread: int):  # type: ignore[no-untyped-def]
        def put(n: int):  # type: ignore[no-untyped-def]
            key = f"obj-{thread}-{n % 5}"  # keys are overwritten again and again
            return "/api/r2/put", {"key": key}, _body(key), key

        return put

    acked: list[str] = []
    stop = threading.Event()
    workers = [
        threading.Thread(target=_pump, args=(server.url, make(t), acked, stop)) for t in range(3)
    ]
    _kill_under_load(server, workers, acked)

    server = CelldServer(PROJECT, state).start()  # opening the bucket sweeps stray bodies
    try:
        for key in set(acked):
            got = server.get("/api/r2/get", params={"key": key})
            assert got.status_code == 200 and got.content == _body(key)
    finally:
        server.stop()
    folder = state / "r2" / "test-bucket"
    rows = (
        sqlite3.connect(folder / "objects.sqlite3")
        .execute("SELECT key, blob, size, etag FROM objects")
        .fetchall()
    )
    keys = {row[0] for row in rows}
    assert set(acked) <= keys
    for key, blob, size, etag in rows:
        data = (folder / "blobs" / blob).read_bytes()
        assert data == _body(key) and len(data) == size
        assert hashlib.md5(data).hexdigest() == etag
    assert {p.name for p in (folder / "blobs").iterdir()} == {row[1] for row in rows}
