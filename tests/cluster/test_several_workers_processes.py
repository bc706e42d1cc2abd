"""Several Workers in one `celld run --workers 2` (compat/projects/workers: "front" served,
"back" bound): every process runs both Workers, so service bindings and RPC stay in the
process that took the request, while back's Durable Object has one owner across the
processes and back's workflow instances are sharded over them, each request on a new
connection so it lands in either process. The expected answers are those of the same
projects on one process (tests/e2e/test_several_workers.py, checked there against
wrangler dev)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from celld.cluster.placement import owner_of
from tests.celld_run import CelldRun
from tests.cluster.test_bindings import fresh
from tests.cluster.test_workers import instances_in

PROJECTS = Path(__file__).resolve().parents[2] / "compat" / "projects" / "workers"
FRONT, BACK = PROJECTS / "front", PROJECTS / "back"
FLOW = "compat-back-flow"


@pytest.fixture
def cluster(tmp_path: Path):
    run = CelldRun(FRONT, tmp_path / "state", str(BACK), "--port", "0", "--workers", "2")
    try:
        run.ready(timeout=120)
        yield run
    finally:
        assert run.stop() == 0, run.log()


def test_bindings_between_workers_answer_in_every_process(cluster: CelldRun) -> None:
    for _ in range(6):
        assert fresh(cluster.url, "GET", "/vars").json()["WHO"] == "front"
        assert fresh(cluster.url, "GET", "/fetch").json() == {
            "status": 201,
            "from": "back",
            "text": "back got POST /some/path?q=1 hi",
        }
        assert fresh(cluster.url, "GET", "/rpc").json() == {"ok": 5}
        assert fresh(cluster.url, "GET", "/rpc-named").json() == {"ok": "back"}
        assert fresh(cluster.url, "GET", "/self").json() == {"ok": "hello you from front"}


def test_the_other_workers_object_has_one_owner(cluster: CelldRun) -> None:
    expected = "c5cfa96008f0278c581e82bb9b11a7f5e62d8ad2392edda466090b16fca055a0"
    assert fresh(cluster.url, "GET", "/do-id?name=shared").json() == {"ok": expected}
    first = fresh(cluster.url, "GET", "/do?name=shared&n=0").json()["ok"]["total"]

    def add(_: int) -> dict:
        answer = fresh(cluster.url, "GET", "/do?name=shared&n=1")
        assert answer.status_code == 200, answer.text
        return answer.json()["ok"]

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(add, range(30)))
    assert {a["who"] for a in answers} == {"back"}
    # one live instance: the 30 adds saw 30 distinct totals, ending at first + 30
    assert sorted(a["total"] for a in answers) == list(range(first + 1, first + 31))


def test_the_other_workers_workflow_is_sharded_over_the_processes(
    cluster: CelldRun, tmp_path: Path
) -> None:
    ids = [f"w{n}" for n in range(8)]
    owners = {owner_of(FLOW, i, 2) for i in ids}
    assert owners == {0, 1}  # (these ids land in both shards)
    for n, instance_id in enumerate(ids):
        made = fresh(cluster.url, "GET", f"/wf-create?id={instance_id}&n={n}")
        assert made.json() == {"ok": instance_id}, made.text
    deadline = time.monotonic() + 90
    for n, instance_id in enumerate(ids):
        while True:
            status = fresh(cluster.url, "GET", f"/wf-status?id={instance_id}").json()["ok"]
            if status["status"] == "complete":
                assert status["output"] == {"doubled": 2 * n, "who": "back"}
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
    back = tmp_path / "state" / "workers" / "back"
    shards = [
        instances_in(back / "celld.sqlite3"),
        instances_in(back / "processes/1/celld.sqlite3"),
    ]
    assert shards == [
        {i for i in ids if owner_of(FLOW, i, 2) == 0},
        {i for i in ids if owner_of(FLOW, i, 2) == 1},
    ]
    # the operator surface answers for back's instances from every shard
    listed = fresh(cluster.url, "GET", f"/cdn-cgi/local/explorer/api/workflows/{FLOW}/instances")
    assert {row["id"] for row in listed.json()["result"]} == set(ids)


def test_a_different_number_of_processes_is_refused_for_every_workers_folder(
    cluster: CelldRun, tmp_path: Path
) -> None:
    made = fresh(cluster.url, "GET", "/wf-create?id=kept&n=1")
    assert made.json() == {"ok": "kept"}
    assert cluster.stop() == 0
    # back's instances are sharded over 2: its folder refuses 3 as the served one would
    (tmp_path / "state" / "workers.json").unlink()
    again = CelldRun(FRONT, tmp_path / "state", str(BACK), "--port", "0", "--workers", "3")
    assert again.exit_code(timeout=120) != 0
    assert "sharded over 2 process(es)" in again.log()
    assert str(tmp_path / "state" / "workers" / "back") in again.log()
    # the fixture stops `cluster` again: a stopped run stops at once
