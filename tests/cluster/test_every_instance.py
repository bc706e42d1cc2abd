"""Routes about every instance of a workflow on `celld run --workers 2`: listings with
paging and filters, counts, `latest`, batch delete, introspection sessions and delete
all, answered from both processes' shards through whichever process takes the call;
celld's own CLI and (when installed) wrangler's against the cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from celld.cli.main import cli
from tests.celld_run import CelldRun
from tests.cluster.test_workers import DURABLE, instances_in

WORKFLOW = "long-workflow"
API = f"/cdn-cgi/local/explorer/api/workflows/{WORKFLOW}"
SESSION = f"/cdn-cgi/celld/api/workflows/{WORKFLOW}/introspection"
DETAILS = {"X-Celld-Details": "1"}
IDS = [f"w{n}" for n in range(13)]
WRANGLER_DIR = Path(__file__).resolve().parents[2] / "tests" / "wrangler" / "node_modules"
NODE = WRANGLER_DIR / "node" / "bin" / "node"
WRANGLER = WRANGLER_DIR / "wrangler" / "bin" / "wrangler.js"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CelldRun, Path]]:
    state = tmp_path_factory.mktemp("every") / "state"
    env = {"CELLD_TEST_MODE": "1"}
    run = CelldRun(DURABLE, state, "--port", "0", "--workers", "2", env=env)
    try:
        run.ready(timeout=120)
        with httpx.Client(base_url=run.url, timeout=60) as client:
            for instance_id in IDS:
                made = client.post(
                    f"{API}/instances", json={"id": instance_id, "params": {"steps": 1}}
                )
                assert made.status_code == 200, made.text
        yield run, state
    finally:
        assert run.stop() == 0, run.log()


def fresh(run: CelldRun) -> httpx.Client:
    """A client on a new connection: the kernel hands it to either process."""
    return httpx.Client(base_url=run.url, timeout=60, headers={"connection": "close"})


def listing(run: CelldRun, **params: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with fresh(run) as client:
        answer = client.get(f"{API}/instances", params=params, headers=DETAILS)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    return data["result"], data["result_info"]


def wait_all_complete(run: CelldRun, count: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        _, info = listing(run, status="complete", per_page=1)
        if info["total_count"] == count:
            return
        assert time.monotonic() < deadline, info
        time.sleep(0.2)


def test_instances_are_listed_from_every_shard_with_paging(cluster: tuple[CelldRun, Path]):
    run, state = cluster
    first = instances_in(state / "celld.sqlite3")
    second = instances_in(state / "processes" / "1" / "celld.sqlite3")
    assert first and second and first | second == set(IDS)  # both processes hold some
    wait_all_complete(run, len(IDS))
    everything, info = listing(run, per_page=100)
    assert sorted(i["id"] for i in everything) == sorted(IDS)
    assert info["total_count"] == len(IDS) and info["total_pages"] == 1
    created = [i["created_on"] for i in everything]
    assert created == sorted(created, reverse=True)  # newest first
    for _ in range(3):  # through whichever process each new connection reaches
        pages = []
        for page in (1, 2, 3):
            items, info = listing(run, page=page, per_page=5)
            assert info == {**info, "page": page, "per_page": 5, "total_count": 13}
            assert info["total_pages"] == 3
            pages.extend(items)
        assert [i["id"] for i in pages] == [i["id"] for i in everything]
        beyond, info = listing(run, page=4, per_page=5)
        assert beyond == [] and info["total_count"] == 13
    found, info = listing(run, search="W1")  # w1, w10, w11, w12
    assert sorted(i["id"] for i in found) == ["w1", "w10", "w11", "w12"]
    assert info["total_count"] == 4
    none, info = listing(run, status="errored")
    assert none == [] and info["total_count"] == 0
    # wrangler's shape (no details header): the same ids, wrangler's fields
    with fresh(run) as client:
        plain = client.get(f"{API}/instances", params={"per_page": 4, "page": 2}).json()
    assert [i["id"] for i in plain["result"]] == [i["id"] for i in everything[4:8]]
    assert set(plain["result"][0]) == {"id", "status", "created_on"}
    assert plain["result_info"] == {"page": 2, "per_page": 4, "total_count": 13, "total_pages": 4}
    with fresh(run) as client:  # a refusal is the shard's, unchanged
        bad = client.get(f"{API}/instances", params={"per_page": 500})
    assert bad.status_code == 400 and "per_page" in bad.json()["errors"][0]["message"]


def test_counts_latest_and_the_cli(cluster: tuple[CelldRun, Path]):
    run, _ = cluster
    wait_all_complete(run, len(IDS))
    everything, _ = listing(run, per_page=100)
    for _ in range(2):
        with fresh(run) as client:
            details = client.get(API, headers=DETAILS).json()["result"]
            plain = client.get(API).json()["result"]
            latest = client.get(f"{API}/instances/latest").json()["result"]
            helper = client.get(
                f"/cdn-cgi/celld/api/workflows/{WORKFLOW}/instances/latest/wait-for-status",
                params={"status": "complete"},
            ).json()["result"]
        assert details["instances"]["complete"] == 13 and sum(details["instances"].values()) == 13
        assert plain["instances"] == details["instances"]
        assert details["schedules"] == []
        assert latest["status"] == "complete" and helper["status"] == "complete"
        assert latest["params"] == {"steps": 1}
    port = run.url.rsplit(":", 1)[1]
    listed = CliRunner().invoke(cli, ["workflows", "list", "--port", port])
    assert listed.exit_code == 0 and WORKFLOW in listed.output, listed.output
    page = CliRunner().invoke(
        cli,
        ["workflows", "instances", "list", WORKFLOW, "--per-page", "5", "--page", "2",
         "--json", "--port", port],
    )  # fmt: skip
    assert page.exit_code == 0, page.output
    assert [i["id"] for i in json.loads(page.output)] == [i["id"] for i in everything[5:10]]
    text = CliRunner().invoke(cli, ["workflows", "describe", WORKFLOW, "--port", port])
    assert text.exit_code == 0 and re.search(r"complete:\s+13\n", text.output), text.output
    if NODE.exists() and WRANGLER.exists():
        listed = wrangler(
            run, port, "instances", "list", WORKFLOW, "--per-page", "5", "--page", "3", "--json"
        )
        assert [i["id"] for i in json.loads(listed)] == [i["id"] for i in everything[10:]]


def wrangler(run: CelldRun, port: str, *args: str) -> str:
    home = Path(run.log_path).parent / "wrangler-home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": f"{NODE.parent}:{os.environ.get('PATH', '')}", "HOME": str(home),
        "XDG_CONFIG_HOME": str(home), "WRANGLER_SEND_METRICS": "false",
        "WRANGLER_SEND_ERROR_REPORTS": "false", "DO_NOT_TRACK": "1", "CI": "true",
        "NO_COLOR": "1", "WRANGLER_LOG_PATH": str(home / "logs"),
    }  # fmt: skip
    command = [str(NODE), str(WRANGLER), "workflows", *args, "--local", "--port", port]
    done = subprocess.run(
        command, cwd=home, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
    return done.stdout


def test_sessions_batch_delete_and_delete_all(cluster: tuple[CelldRun, Path]):
    run, state = cluster
    with fresh(run) as client:
        started = client.post(SESSION, json={"operations": [{"type": "disableSleeps"}]})
        assert started.status_code == 200, started.text
        again = client.post(SESSION, json={"operations": [{"type": "disableSleeps"}]})
        assert again.status_code == 409, again.text  # one session at a time, everywhere
    made = [f"s{n}" for n in range(8)]
    with fresh(run) as client:
        for instance_id in made:
            params = {"steps": 2, "sleepEvery": 1, "nap": "1 day"}
            answer = client.post(f"{API}/instances", json={"id": instance_id, "params": params})
            assert answer.status_code == 200, answer.text
    held = instances_in(state / "processes" / "1" / "celld.sqlite3")
    assert set(made) & held and set(made) - held  # the session's instances are on both
    with fresh(run) as client:
        session = client.get(SESSION).json()["result"]
    assert sorted(session["instances"]) == made
    wait_all_complete(run, len(IDS) + len(made))  # a day's sleeps skipped in both processes
    with fresh(run) as client:
        ended = client.delete(SESSION).json()["result"]
    assert sorted(d["id"] for d in ended["disposed"]) == made
    assert all(d["deleted"] for d in ended["disposed"])
    _, info = listing(run)
    assert info["total_count"] == len(IDS)
    with fresh(run) as client:
        gone = client.post(f"{API}/instances/batch/delete", json={"instances": ["w0", "zz", "w7"]})
    assert gone.status_code == 200, gone.text
    assert [d["id"] for d in gone.json()["result"]["deleted"]] == ["w0", "w7"]
    _, info = listing(run)
    assert info["total_count"] == len(IDS) - 2
    with fresh(run) as client:
        cleared = client.delete(API)
        assert cleared.status_code == 200, cleared.text
        assert client.get(f"{API}/instances/latest").status_code == 404
    _, info = listing(run)
    assert info["total_count"] == 0
    assert not instances_in(state / "celld.sqlite3") and not instances_in(
        state / "processes" / "1" / "celld.sqlite3"
    )
