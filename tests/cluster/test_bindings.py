"""KV, R2, D1 and Durable Objects with `celld run --workers 2`: real processes, each
request on a new connection so requests land on either process, and a child killed with
SIGKILL while writes are in flight with every acknowledged write present afterwards."""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.celld_run import CelldRun
from tests.cluster.test_workers import pids, running

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "projects" / "cluster"


def fresh(url: str, method: str, path: str, **kwargs) -> httpx.Response:
    """One request on its own connection: either process may accept it."""
    with httpx.Client(base_url=url, timeout=60) as client:
        return client.request(method, path, **kwargs)


@pytest.fixture
def cluster(tmp_path: Path):
    with running(PROJECT, tmp_path / "state") as run:
        yield run


def test_kv_and_r2_written_in_one_process_are_read_in_any(cluster: CelldRun):
    for n in range(12):
        assert fresh(cluster.url, "POST", f"/kv/put?key=k{n}", content=f"v{n}").status_code == 200
        # read back at once, on a new connection, 3 times: each may be either process
        for _ in range(3):
            assert fresh(cluster.url, "GET", f"/kv/get?key=k{n}").json() == {"value": f"v{n}"}
    body = os.urandom(3 * 1024 * 1024 + 17)  # larger than one message: streamed both ways
    put = fresh(cluster.url, "POST", "/r2/put?key=big", content=body)
    assert put.status_code == 200, put.text
    assert put.json()["size"] == len(body)
    for _ in range(4):
        got = fresh(cluster.url, "GET", "/r2/get?key=big")
        assert got.status_code == 200 and got.content == body


def test_a_counter_has_one_live_instance_and_the_exact_total(cluster: CelldRun):
    names = [f"c{n}" for n in range(6)]
    adds = 20

    def hit(job: int) -> dict:
        name = names[job % len(names)]
        route = "add" if job % 2 else "fetch"  # RPC and fetch, both forwarded
        answer = fresh(cluster.url, "GET", f"/do/{route}?name={name}&n=1")
        assert answer.status_code == 200, answer.text
        return {"name": name, **answer.json()}

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(hit, range(adds * len(names))))
    for answer in answers:
        # one live instance per object: it saw every call the store counted
        assert answer["calls"] == answer["total"], answer
    for name in names:
        totals = {fresh(cluster.url, "GET", f"/do/total?name={name}").json()["total"]
                  for _ in range(4)}  # fmt: skip
        assert totals == {adds}, (name, totals)


def test_d1_inserts_and_selects_through_either_process(cluster: CelldRun):
    made = fresh(
        cluster.url, "POST", "/d1", json=[{"sql": "CREATE TABLE t (id INTEGER PRIMARY KEY, v)"}]
    )
    assert made.status_code == 200, made.text
    for n in range(10):
        insert = [{"sql": "INSERT INTO t VALUES (?, ?)", "params": [n, f"v{n}"]}]
        assert fresh(cluster.url, "POST", "/d1", json=insert).status_code == 200
    select = [{"sql": "SELECT count(*) AS n, group_concat(v) AS vs FROM t", "params": []}]
    for _ in range(4):
        rows = fresh(cluster.url, "POST", "/d1", json=select).json()["results"][0]
        assert rows == [{"n": 10, "vs": ",".join(f"v{n}" for n in range(10))}]
    again = fresh(cluster.url, "POST", "/d1", json=[{"sql": "INSERT INTO t VALUES (1, 'x')"}])
    assert again.status_code == 500
    assert "UNIQUE constraint failed" in again.json()["error"]["message"]


def test_every_acknowledged_write_survives_a_killed_child(cluster: CelldRun):
    fresh(cluster.url, "POST", "/d1", json=[{"sql": "CREATE TABLE w (k TEXT PRIMARY KEY)"}])
    names = [f"k{n}" for n in range(4)]
    acked_kv: list[str] = []
    acked_d1: list[str] = []
    acked_do: dict[str, int] = dict.fromkeys(names, 0)
    unsure_do: dict[str, int] = dict.fromkeys(names, 0)
    lock = threading.Lock()
    killed = threading.Event()

    def write(job: int) -> None:
        key, name = f"w{job}", names[job % len(names)]
        for path, kwargs, acked in (
            (f"/kv/put?key={key}", {"content": key}, acked_kv),
            ("/d1", {"json": [{"sql": "INSERT INTO w VALUES (?)", "params": [key]}]}, acked_d1),
        ):
            try:
                if fresh(cluster.url, "POST", path, **kwargs).status_code == 200:
                    with lock:
                        acked.append(key)
            except httpx.TransportError:
                pass  # the process that had the connection was killed: not acknowledged
        try:
            done = fresh(cluster.url, "GET", f"/do/add?name={name}&n=1").status_code == 200
        except httpx.TransportError:
            done = False
        with lock:
            (acked_do if done else unsure_do)[name] += 1

    victim = pids(cluster)[1][0]
    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(write, job) for job in range(120)]
        for index, future in enumerate(futures):
            future.result()
            if index == 30:
                os.kill(victim, signal.SIGKILL)
                killed.set()
    assert killed.is_set()
    cluster.wait_for(r"process 1 exited .*: starting it again")
    cluster.wait_for(rf"process 1 started \(pid (?!{victim}\))\d+\)")
    assert len(acked_kv) > 30 and len(acked_d1) > 30
    for key in acked_kv:
        assert fresh(cluster.url, "GET", f"/kv/get?key={key}").json() == {"value": key}
    rows = fresh(cluster.url, "POST", "/d1", json=[{"sql": "SELECT k FROM w"}]).json()
    assert set(acked_d1) <= {row["k"] for row in rows["results"][0]}
    for name in names:
        total = fresh(cluster.url, "GET", f"/do/total?name={name}").json()["total"]
        assert acked_do[name] <= total <= acked_do[name] + unsure_do[name], (name, total)
