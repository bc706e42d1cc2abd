"""`celld run --workers N`: real processes sharing one port, instances sharded over their
stores, a child killed with SIGKILL and started again with nothing acknowledged lost."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.celld_run import CelldRun

ROOT = Path(__file__).resolve().parents[2]
DURABLE = ROOT / "tests" / "projects" / "durable"
STARTED = re.compile(r"process (\d+) started \(pid (\d+)\)")


def pids(run: CelldRun) -> dict[int, list[int]]:
    """Every process id each child index was started with, in order."""
    found: dict[int, list[int]] = {}
    for index, pid in STARTED.findall(run.log()):
        found.setdefault(int(index), []).append(int(pid))
    return found


def instances_in(store: Path) -> set[str]:
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {row[0] for row in connection.execute("SELECT id FROM instances")}
    finally:
        connection.close()


def wait_complete(client: httpx.Client, ids: list[str], steps: int, timeout: float = 120) -> None:
    """Each instance's status through the Worker (any process) until all are complete."""
    deadline = time.monotonic() + timeout
    left = list(ids)
    while left:
        try:
            answer = client.post("/statuses?wf=LONG", json=left).json()
        except httpx.TransportError:  # a connection to a process that was killed
            assert time.monotonic() < deadline, f"not complete: {left}"
            time.sleep(0.2)
            continue
        for instance_id, status in answer.items():
            if status.get("status") == "complete":
                assert status["output"] == {"total": steps * (steps + 1) // 2, "steps": steps}
                left.remove(instance_id)
            else:
                assert status.get("status") in ("queued", "running"), status
        assert time.monotonic() < deadline, f"not complete: {left}"
        time.sleep(0.2)


@contextmanager
def running(project: Path, state: Path) -> Iterator[CelldRun]:
    """`celld run PROJECT --workers 2`, ready; it must stop cleanly afterwards."""
    run = CelldRun(project, state, "--port", "0", "--workers", "2")
    try:
        run.ready(timeout=120)
        yield run
    finally:
        assert run.stop() == 0, run.log()


@pytest.fixture
def cluster(tmp_path: Path):
    with running(DURABLE, tmp_path / "state") as run:
        yield run


def test_instances_are_sharded_and_survive_a_killed_child(cluster: CelldRun, tmp_path: Path):
    state = tmp_path / "state"
    steps = 40
    acknowledged: list[str] = []
    with httpx.Client(base_url=cluster.url, timeout=60) as client:
        for n in range(16):
            answer = client.post(f"/create?wf=LONG&id=a{n}", json={"steps": steps})
            assert answer.status_code == 200, answer.text
            acknowledged.append(answer.json()["id"])
        victim = pids(cluster)[1][0]
        os.kill(victim, signal.SIGKILL)
        # Creates go on while it is down: those acknowledged must complete too.
        # A connection the killed process had accepted is reset: not acknowledged.
        for n in range(16):
            try:
                answer = client.post(f"/create?wf=LONG&id=b{n}", json={"steps": steps})
            except httpx.TransportError:
                continue
            if answer.status_code == 200:
                acknowledged.append(answer.json()["id"])
        cluster.wait_for(r"process 1 exited .*: starting it again")
        cluster.wait_for(rf"process 1 started \(pid (?!{victim}\))\d+\)")
        wait_complete(client, acknowledged, steps)
        # Both stores hold a share, and no instance is in both.
        first = instances_in(state / "celld.sqlite3")
        second = instances_in(state / "processes" / "1" / "celld.sqlite3")
        assert first and second and not first & second
        assert set(acknowledged) <= first | second
        # An instance the other process owns is found from any process, by id.
        for instance_id in acknowledged[:4]:
            assert client.get(f"/get?wf=LONG&id={instance_id}").json() == {"id": instance_id}
        for nobody in ("nobody", "no-one", "none-at-all"):  # owned by either process
            missing = client.get(f"/get?wf=LONG&id={nobody}").json()["error"]
            assert missing["message"] == "WorkflowError: (instance.not_found) Instance not found"
            assert missing["name"] == "Error"


def test_batches_are_split_over_the_processes(cluster: CelldRun):
    with httpx.Client(base_url=cluster.url, timeout=60) as client:
        client.post("/create?wf=LONG&id=c3", json={"steps": 1}).raise_for_status()
        batch = [{"id": f"c{n}", "params": {"steps": 1}} for n in range(8)]
        batch.insert(5, {"id": "c1", "params": {"steps": 1}})  # again, at index 5
        answer = client.post("/create-batch?wf=LONG", json=batch).json()
        created = [f"c{n}" for n in range(8) if n != 3]
        assert answer == {"ids": created}, answer
        report = client.post(
            "/create-raw?wf=LONG", json={"id": "c9", "params": {"steps": 1}}
        ).json()
        assert report == {"id": "c9"}
        wait_complete(client, [*created, "c3", "c9"], 1)
        gone = client.post("/delete-batch?wf=LONG", json=["c0", "zz", "c7", "c0"]).json()
        assert [d["id"] for d in gone["deleted"]] == ["c0", "c7", "c0"], gone
        assert [e["id"] for e in gone["errors"]] == ["zz"], gone
        # the explorer API creates on, and reads from, whichever process owns the id
        api = "/cdn-cgi/local/explorer/api/workflows/long-workflow/instances"
        made = client.post(api, json={"params": {"steps": 2}}).json()["result"]["id"]
        wait_complete(client, [made], 2)
        assert client.get(f"{api}/{made}").json()["result"]["status"] == "complete"


def test_changing_the_number_of_a_sharded_folder_is_refused(tmp_path: Path):
    state = tmp_path / "state"
    run = CelldRun(DURABLE, state, "--port", "0", "--workers", "2")
    try:
        url = run.ready(timeout=120)
        httpx.post(f"{url}/create?wf=LONG&id=k1", json={"steps": 1}, timeout=60).raise_for_status()
    finally:
        assert run.stop() == 0, run.log()
    again = CelldRun(DURABLE, state, "--port", "0", "--workers", "3")
    assert again.exit_code(120) != 0
    assert "sharded over 2 process(es) (--workers 2)" in again.log(), again.log()
    # without --workers, the folder's own number is used
    plain = CelldRun(DURABLE, state, "--port", "0", workers=None)
    try:
        url = plain.ready(timeout=120)
        plain.wait_for("2 processes share the port")
        status = httpx.get(f"{url}/status?wf=LONG&id=k1", timeout=60).json()
        assert status["status"] == "complete", status
    finally:
        assert plain.stop() == 0, plain.log()


def test_the_manual_clock_moves_in_every_process(tmp_path: Path):
    state = tmp_path / "state"
    env = {"CELLD_TEST_CLOCK": "manual"}
    run = CelldRun(DURABLE, state, "--port", "0", "--workers", "2", env=env)
    ids = [f"t{n}" for n in range(8)]
    try:
        url = run.ready(timeout=120)
        with httpx.Client(base_url=url, timeout=60) as client:
            for instance_id in ids:
                params = {"steps": 2, "sleepEvery": 1, "nap": "1 hour"}
                client.post(f"/create?wf=LONG&id={instance_id}", json=params).raise_for_status()
            deadline = time.monotonic() + 120
            while True:
                # one process takes each advance; every process's sleepers must wake
                client.post("/cdn-cgi/celld/clock?advance=3600000").raise_for_status()
                statuses = client.post("/statuses?wf=LONG", json=ids).json()
                if all(s["status"] == "complete" for s in statuses.values()):
                    break
                assert time.monotonic() < deadline, statuses
                time.sleep(0.2)
    finally:
        assert run.stop() == 0, run.log()
    # both processes held some of them
    assert instances_in(state / "celld.sqlite3") and instances_in(
        state / "processes" / "1" / "celld.sqlite3"
    )
