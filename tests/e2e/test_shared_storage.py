"""KV and R2 on several `celld run` nodes sharing one PostgreSQL: what one node writes every
node reads. (A node SIGKILLed while KV writes and streamed R2 puts are in flight, among
object calls, D1 inserts and workflow creations: tests/e2e/test_shared_objects.py.)"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.celld_server import CelldServer

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "shared-storage"


def _nodes(tmp_path: Path, dsn: str, count: int) -> list[CelldServer]:
    nodes = []
    for index in range(count):
        node = CelldServer(PROJECT, tmp_path / f"node{index}", args=("--store", dsn))
        nodes.append(node.start())
    return nodes


def _chunks(data: bytes, size: int = 100_000):  # type: ignore[no-untyped-def]
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_every_node_sees_what_another_wrote(tmp_path: Path, postgres_dsn: str) -> None:
    nodes = _nodes(tmp_path, postgres_dsn, 2)
    try:
        a, b = nodes
        assert a.client is not None and b.client is not None
        a.client.put("/kv/greeting", content=b"hello").raise_for_status()
        assert b.get("/kv/greeting").content == b"hello"
        # 3 MB streamed in by one node (chunked request body), streamed out by the other.
        body = os.urandom(3_000_000)
        put = b.client.put("/r2/big/object", content=_chunks(body))
        put.raise_for_status()
        assert put.json() == {"etag": hashlib.md5(body).hexdigest(), "size": len(body)}
        with a.client.stream("GET", "/r2/big/object") as got:
            pieces = [piece for piece in got.iter_bytes()]
        assert b"".join(pieces) == body
        b.client.put("/kv/greeting", content=b"changed").raise_for_status()
        assert a.get("/kv/greeting").content == b"changed"
        assert a.get("/r2-list", params={"prefix": "big/"}).json() == ["big/object"]
        assert b.get("/kv-list").json() == ["greeting"]
    finally:
        for node in nodes:
            node.stop()
