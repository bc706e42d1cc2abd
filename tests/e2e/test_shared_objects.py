"""Durable Objects and D1 on several `celld run` nodes sharing one PostgreSQL: one owner per
object at a time, calls from every node, and an owner SIGKILLed (or SIGSTOPped past its
lease) while calls are in flight. The kill test is the short form of the cluster harness:
a project binding every storage kind and a Workflow (tests/projects/shared-storage) on
three nodes, with object calls, D1 inserts, KV and R2 puts and workflow creations in
flight when one node dies.

Each object turn records its sequence number and the node that ran it in the object's own
SQL storage (tests/projects/shared-storage): two live owners would show up as two
acknowledged turns with one number, or a node whose turns resume after another's began.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.celld_server import CelldServer
from tests.e2e.test_reload import celld, make_project, set_version, text, until

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "shared-storage"
LEASE_MS = 2000
OBJECTS = ["c0", "c1", "c2"]


def _nodes(tmp_path: Path, dsn: str, count: int) -> list[CelldServer]:
    nodes = []
    for index in range(count):
        node = CelldServer(
            PROJECT,
            tmp_path / f"node{index}",
            args=("--store", dsn, "--var", f"NODE:node{index}"),
            env={"CELLD_NODE_LEASE_MS": str(LEASE_MS)},
        )
        nodes.append(node.start())
    return nodes


def _chunks(data: bytes, size: int = 64 * 1024):  # type: ignore[no-untyped-def]
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _check_turns(turns: list[dict[str, Any]], acknowledged: list[dict[str, Any]]) -> None:
    """Numbered 1..n without a gap; every acknowledged turn there with the node that
    answered it, no number acknowledged twice; each node's turns one unbroken run."""
    assert [t["seq"] for t in turns] == list(range(1, len(turns) + 1))
    recorded = {t["seq"]: t["node"] for t in turns}
    seqs = [a["seq"] for a in acknowledged]
    assert len(seqs) == len(set(seqs)), "one turn number acknowledged twice: two owners"
    for turn in acknowledged:
        assert recorded.get(turn["seq"]) == turn["node"], turn
    runs: list[str] = []
    for turn in turns:
        if not runs or runs[-1] != turn["node"]:
            runs.append(turn["node"])
    assert len(runs) == len(set(runs)), f"a node ran the object again after another: {runs}"


def test_objects_and_d1_from_every_node(tmp_path: Path, postgres_dsn: str) -> None:
    """Calls through any node reach the one owner; the database's rows are the same from
    every node."""
    nodes = _nodes(tmp_path, postgres_dsn, 2)
    try:
        answers = [nodes[n % 2].post("/do/c0/inc").json() for n in range(6)]
        assert [a["seq"] for a in answers] == [1, 2, 3, 4, 5, 6]
        assert len({a["node"] for a in answers}) == 1  # one owner ran every turn
        for n in range(4):
            nodes[n % 2].client.put(f"/d1/k{n}").raise_for_status()  # type: ignore[union-attr]
        rows = nodes[1].get("/d1-list").json()
        assert [r["k"] for r in rows] == ["k0", "k1", "k2", "k3"]
        assert {r["node"] for r in rows} == {"node0", "node1"}  # received by both
        _check_turns(nodes[0].get("/do/c0/turns").json(), answers)
        # An SQL error in the database answers as D1's, through the other node too.
        assert nodes[0].client.put("/d1/k0").status_code == 500  # type: ignore[union-attr]
    finally:
        for node in nodes:
            node.stop()


def test_an_owner_killed_mid_call_loses_nothing_acknowledged(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """Four clients increment three objects, insert D1 rows, put KV values and R2 objects
    and create workflow instances through random nodes of three; once 40 calls are
    acknowledged the node owning c0 and the D1 database is SIGKILLed, and the clients go
    on through the others until 40 more are. Every acknowledged turn, row, value and
    object is then there, read through every survivor, no object ever had two owners,
    and every acknowledged instance completes (its KV write and object call done)."""
    nodes = _nodes(tmp_path, postgres_dsn, 3)
    by_name = {f"node{i}": node for i, node in enumerate(nodes)}
    urls = [node.url for node in nodes]
    dead: set[str] = set()
    turns: dict[str, list[dict[str, Any]]] = {name: [] for name in OBJECTS}
    rows: list[str] = []
    puts: dict[str, bytes] = {}  # KV and R2 paths and what was put there
    instances: list[str] = []
    lock = threading.Lock()
    forty = threading.Event()
    after_kill = threading.Event()
    stop = threading.Event()
    counts = {"all": 0, "after": 0}
    failures: list[str] = []
    kinds = ("do", "d1", "do", "kv", "do", "r2", "do", "wf")

    def call(http: httpx.Client, url: str, kind: str, name: str, rng: random.Random) -> Any:
        """One call; what to record once it is acknowledged."""
        if kind == "do":
            obj = rng.choice(OBJECTS)
            return http.post(f"{url}/do/{obj}/inc"), lambda r: turns[obj].append(r.json())
        if kind == "wf":
            return http.post(f"{url}/wf/{name}"), lambda r: instances.append(name)
        if kind == "d1":
            return http.put(f"{url}/d1/{name}"), lambda r: rows.append(name)
        body = name.encode() if kind == "kv" else rng.randbytes(rng.choice([1_000, 300_000]))
        content = body if kind == "kv" else _chunks(body)  # R2: streamed in
        response = http.put(f"{url}/{kind}/{name}", content=content)
        return response, lambda r: puts.__setitem__(f"/{kind}/{name}", body)

    def client(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(timeout=90) as http:
            n = 0
            while not stop.is_set():
                n += 1
                url = rng.choice([u for u in urls if u not in dead])
                try:
                    response, record = call(http, url, kinds[n % 8], f"w{seed}-{n}", rng)
                except httpx.TransportError:
                    continue  # cut off by the kill: not acknowledged
                if response.status_code != 200:
                    # Calls in flight to the dead owner may fail (outcome unknown); none
                    # may before the kill.
                    if not dead:
                        failures.append(f"{kinds[n % 8]} via {url}: {response.text}")
                    continue
                with lock:
                    record(response)
                    counts["all"] += 1
                    counts["after"] += 1 if dead else 0
                if counts["all"] >= 40:
                    forty.set()
                if counts["after"] >= 40:
                    after_kill.set()

    # Placed first: c0 and the D1 database on node0 (the victim), c1 and c2 elsewhere.
    for index, name in enumerate(OBJECTS):
        turns[name].append(nodes[index].post(f"/do/{name}/inc").json())
    nodes[0].client.put("/d1/first").raise_for_status()  # type: ignore[union-attr]
    rows.append("first")
    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(4)]
    try:
        for thread in threads:
            thread.start()
        assert forty.wait(120), f"calls stalled: {failures}"
        owner = "node0"
        victim = by_name[owner]
        dead.add(victim.url)
        victim.kill()
        assert after_kill.wait(180), f"calls stalled after the kill: {failures}"
        stop.set()
        for thread in threads:
            thread.join(120)
        assert failures == []
        survivors = [node for node in nodes if node.url not in dead]
        for name in OBJECTS:
            for node in survivors:
                recorded = node.get(f"/do/{name}/turns").json()
                _check_turns(recorded, turns[name])
        assert any(t["node"] != owner for t in turns["c0"])  # c0 moved and went on
        for node in survivors:
            present = {r["k"] for r in node.get("/d1-list").json()}
            missing = set(rows) - present
            assert not missing, f"acknowledged D1 rows lost: {sorted(missing)[:5]}"
            for path, body in puts.items():
                got = node.get(path)
                assert got.status_code == 200 and got.content == body, path
        assert instances, "no workflow instance was created"
        deadline = time.monotonic() + 120
        for name in instances:
            while True:
                status = survivors[0].get(f"/wf/{name}").json()
                if status["status"] == "complete" or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert status["status"] == "complete", (name, status)
            assert status["output"]["id"] == name
            assert survivors[1].get(f"/kv/wf/{name}").text == name
    finally:
        stop.set()
        for thread in threads:
            thread.join(120)
        for node in nodes:
            node.stop()


def test_an_owner_stopped_past_its_lease_sends_nothing_late(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """The owner of an object is SIGSTOPped with a call to it waiting in its socket; the
    other node takes the object over and goes on. When the old owner runs again, its late
    call must not be answered from its stale copy: it fails, or it is answered by the new
    owner, and the object's turns show no second owner."""
    nodes = _nodes(tmp_path, postgres_dsn, 2)
    old, new = nodes
    try:
        first = old.post("/do/c0/inc").json()
        assert first == {"seq": 1, "node": "node0"}
        assert old.process is not None
        os.killpg(old.process.pid, signal.SIGSTOP)
        late: dict[str, Any] = {}

        def late_call() -> None:
            with httpx.Client(timeout=120) as http:
                try:
                    late["response"] = http.post(old.url + "/do/c0/inc")
                except httpx.TransportError as error:
                    late["error"] = error

        caller = threading.Thread(target=late_call)
        caller.start()
        # Through the other node: forwarded to the stopped owner until its lease runs out
        # and it is reaped; then placed on node1.
        taken = new.client.post("/do/c0/inc", timeout=120)  # type: ignore[union-attr]
        assert taken.status_code == 200, taken.text
        assert taken.json() == {"seq": 2, "node": "node1"}
        more = [new.post("/do/c0/inc").json() for _ in range(3)]
        os.killpg(old.process.pid, signal.SIGCONT)
        caller.join(120)
        acknowledged = [first, taken.json(), *more]
        response = late.get("response")
        if response is not None and response.status_code == 200:
            acknowledged.append(response.json())  # answered by the new owner, after these
            assert response.json()["node"] == "node1"
        deadline = time.monotonic() + 30
        while old.get("/cdn-cgi/celld/health").status_code != 200:  # its lease renewed
            assert time.monotonic() < deadline
        after = old.post("/do/c0/inc").json()  # the old node forwards now
        assert after["node"] == "node1"
        acknowledged.append(after)
        _check_turns(new.get("/do/c0/turns").json(), acknowledged)
    finally:
        if old.process is not None and old.process.poll() is None:
            os.killpg(old.process.pid, signal.SIGCONT)
        for node in nodes:
            node.stop()


def _wait_for_alarm(node: CelldServer, name: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 90
    while True:
        turns = node.get(f"/do/{name}/turns").json()
        if sum(t["kind"] == "alarm" for t in turns) >= count or time.monotonic() > deadline:
            return list(turns)
        time.sleep(0.2)


def test_an_alarm_fires_on_the_node_that_takes_its_object_over(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """An alarm set on a shared store fires on the object's owner; when the owner is
    SIGKILLed before its next alarm is due, a live node claims the object and fires it."""
    nodes = _nodes(tmp_path, postgres_dsn, 2)
    first, second = nodes
    try:
        assert first.post("/do/al/arm", params={"ms": 200}).json()["node"] == "node0"
        turns = _wait_for_alarm(second, "al", 1)
        assert [(t["kind"], t["node"]) for t in turns] == [("arm", "node0"), ("alarm", "node0")]
        assert first.post("/do/al/arm", params={"ms": 1500}).json()["seq"] == 3
        first.kill()
        turns = _wait_for_alarm(second, "al", 2)
        assert [(t["kind"], t["node"]) for t in turns][2:] == [("arm", "node0"), ("alarm", "node1")]
    finally:
        for node in nodes:
            node.stop()


def test_a_reload_keeps_placed_objects_on_a_shared_store(tmp_path: Path, postgres_dsn: str) -> None:
    """An edit reloads the Worker of a node on a shared store: its object keeps its
    storage (its pages) and runs the new code."""
    project = make_project(tmp_path / "p")
    with celld(project, tmp_path / "state", "--store", postgres_dsn) as run:
        do = lambda: httpx.get(run.url + "/do", timeout=30).json()  # noqa: E731
        assert do() == {"n": 1, "version": "v1"}
        set_version(project, "v2")
        until(lambda: text(run.url) == "v2 -")
        assert do() == {"n": 2, "version": "v2"}
