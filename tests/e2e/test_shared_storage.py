"""KV and R2 on several `celld run` nodes sharing one PostgreSQL: what one node writes every
node reads, and a node SIGKILLed while KV writes and streamed R2 puts are in flight loses
none of the writes it acknowledged."""

from __future__ import annotations

import hashlib
import os
import random
import threading
from pathlib import Path

import httpx

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


def test_a_node_killed_mid_write_loses_nothing_it_acknowledged(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """Four writers put KV values and stream R2 objects through random nodes of three; once
    40 writes are acknowledged one node is SIGKILLed, and the writers go on through the
    others until 40 more are. Every acknowledged write then reads back whole through every
    surviving node (a write cut off by the kill was never acknowledged: it may or may not
    be there)."""
    nodes = _nodes(tmp_path, postgres_dsn, 3)
    urls = [node.url for node in nodes]
    dead: set[str] = set()
    acknowledged: list[tuple[str, bytes]] = []  # (path, body)
    lock = threading.Lock()
    forty = threading.Event()
    eighty_after_kill = threading.Event()
    stop = threading.Event()
    after_kill = [0]
    failures: list[str] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(timeout=30) as client:
            n = 0
            while not stop.is_set():
                n += 1
                url = rng.choice([u for u in urls if u not in dead])
                if n % 2:
                    path, body = f"/kv/w{seed}/{n}", f"value {seed} {n}".encode()
                    content: object = body
                else:
                    body = rng.randbytes(rng.choice([1_000, 300_000, 700_000]))
                    path, content = f"/r2/w{seed}/{n}", _chunks(body)
                try:
                    response = client.put(url + path, content=content)  # type: ignore[arg-type]
                except httpx.TransportError:
                    continue  # cut off by the kill: not acknowledged
                if response.status_code != 200:
                    if url not in dead:
                        failures.append(f"{path} via {url}: {response.status_code} {response.text}")
                    continue
                with lock:
                    acknowledged.append((path, body))
                    if len(acknowledged) >= 40:
                        forty.set()
                    if dead:
                        after_kill[0] += 1
                        if after_kill[0] >= 40:
                            eighty_after_kill.set()

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(4)]
    try:
        for thread in threads:
            thread.start()
        assert forty.wait(120), f"writes stalled: {failures}"
        victim = nodes[1]
        dead.add(victim.url)
        victim.kill()
        assert eighty_after_kill.wait(120), f"writes stalled after the kill: {failures}"
        stop.set()
        for thread in threads:
            thread.join(60)
        assert failures == []
        survivors = [node for node in nodes if node.url not in dead]
        for path, body in acknowledged:
            for node in survivors:
                got = node.get(path)
                assert got.status_code == 200, (path, node.url, got.text)
                assert got.content == body, path
        kv = {p.split("/", 2)[2] for p, _ in acknowledged if p.startswith("/kv/")}
        assert kv <= set(survivors[0].get("/kv-list").json())
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        for node in nodes:
            node.stop()
