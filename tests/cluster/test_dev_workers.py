"""`celld run`'s dev features on `--workers 2`: reload on change (the `[build] command` run
once, every process serving the new version, a broken change kept out of every process),
and one line for what the parent says for all (stopping, stopped), none for the requests
a process forwards to another."""

from __future__ import annotations

import os
import re
import signal
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.celld_run import CelldRun
from tests.cluster.test_bindings import fresh
from tests.cluster.test_workers import running

BUILD = (
    '[build]\ncommand = "test ! -e src/broken && mkdir -p dist && cp src/index.js dist/index.js"\n'
)


def worker(answer: str) -> str:
    return f'export default {{ fetch() {{ return new Response("{answer}"); }} }};\n'


def answers(run: CelldRun, count: int = 16) -> set[str]:
    """What `count` requests, each on its own connection (so either process may take it),
    were answered."""
    return {fresh(run.url, "GET", "/").text for _ in range(count)}


def until(read: Callable[[], object], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not read():
        assert time.monotonic() < deadline, "not seen in time"
        time.sleep(0.05)


def test_a_change_is_built_once_and_every_process_serves_the_new_version(tmp_path: Path):
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    (project / "src" / "index.js").write_text(worker("one"))
    (project / "wrangler.toml").write_text(
        'name = "built"\nmain = "dist/index.js"\ncompatibility_date = "2026-11-01"\n' + BUILD
    )
    with running(project, tmp_path / "state") as run:
        assert answers(run) == {"one"}
        (project / "src" / "index.js").write_text(worker("two"))
        # process 0 says it once every process has loaded the new version
        run.wait_for(r"Local server updated and ready")
        assert answers(run) == {"two"}
        # the parent built once at start, process 0 once for the change: not once a process
        assert len(re.findall(r"\[custom build\] Running", run.log())) == 2, run.log()
        said = re.findall(r"Reloading local server\.\.\. \(src/index\.js changed\)", run.log())
        assert len(said) == 1, run.log()
        assert "could not load the new version" not in run.log()

        # a failing build keeps the running version in every process
        (project / "src" / "broken").write_text("")
        (project / "src" / "index.js").write_text(worker("three"))
        run.wait_for(r"Running custom build .* failed: it exited with code 1")
        assert answers(run) == {"two"}
        (project / "src" / "broken").unlink()
        until(lambda: len(re.findall(r"Local server updated and ready", run.log())) == 2)
        assert answers(run) == {"three"}
        assert len(re.findall(r"\[custom build\] Running", run.log())) == 4, run.log()


def test_a_load_error_keeps_every_process_on_the_old_version(tmp_path: Path):
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    (project / "src" / "index.js").write_text(worker("one"))
    (project / "wrangler.toml").write_text(
        'name = "plain"\nmain = "src/index.js"\ncompatibility_date = "2026-11-01"\n'
    )
    with running(project, tmp_path / "state") as run:
        (project / "src" / "index.js").write_text("export default { fetch( {\n")
        run.wait_for(r"previous version keeps serving")
        assert answers(run) == {"one"}
        (project / "src" / "index.js").write_text(worker("two"))
        run.wait_for(r"Local server updated and ready")
        assert answers(run) == {"two"}
        # said once, by process 0, not once a process
        assert len(re.findall(r"previous version keeps serving", run.log())) == 1, run.log()
    log = run.log()
    # the parent says stopping and stopped once for every process
    assert len(re.findall(r"stopping \(SIGTERM\)", log)) == 1, log
    assert len(re.findall(r"\] stopped$", log, re.MULTILINE)) == 1, log


def test_a_stopped_process_does_not_stall_the_watch_and_loads_once_it_runs(tmp_path: Path):
    """Process 0 waits `CELLD_RELOAD_WAIT_S` for the others' reloads, then goes on
    watching: a process stopped past it (SIGSTOP) is named, and loads the new version
    when it runs again, from the request that waited for it."""
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    (project / "src" / "index.js").write_text(worker("one"))
    (project / "wrangler.toml").write_text(
        'name = "plain"\nmain = "src/index.js"\ncompatibility_date = "2026-11-01"\n'
    )
    run = CelldRun(
        project, tmp_path / "state", "--port", "0", "--workers", "2",
        env={"CELLD_RELOAD_WAIT_S": "1"},
    )  # fmt: skip
    try:
        run.ready(timeout=120)
        pid = int(run.wait_for(r"process 1 started \(pid (\d+)\)").group(1))
        os.kill(pid, signal.SIGSTOP)
        try:
            (project / "src" / "index.js").write_text(worker("two"))
            run.wait_for(r"process 1 did not answer within 1 s")
            run.wait_for(r"Local server updated and ready")
            # the watch goes on while process 1 is still stopped: a second change reloads
            (project / "src" / "index.js").write_text(worker("three"))
            until(lambda: len(re.findall(r"Local server updated and ready", run.log())) == 2)
        finally:
            os.kill(pid, signal.SIGCONT)
        # process 1 takes the reloads that waited for it, and serves what process 0 does
        until(lambda: answers(run) == {"three"})
    finally:
        assert run.stop() == 0, run.log()


def test_forwarded_operator_routes_add_no_log_lines(tmp_path: Path):
    durable = Path(__file__).resolve().parents[2] / "tests" / "projects" / "durable"
    with running(durable, tmp_path / "state") as run:
        api = "/cdn-cgi/local/explorer/api/workflows"
        listed = fresh(run.url, "GET", api)
        assert listed.status_code == 200, listed.text
        workflow = listed.json()["result"][0]["name"]
        for n in range(6):  # ids of both owners, each asked about through either process
            made = fresh(run.url, "POST", f"{api}/{workflow}/instances", json={"id": f"i{n}"})
            assert made.status_code == 200, made.text
            assert fresh(run.url, "GET", f"{api}/{workflow}/instances/i{n}").status_code == 200
        assert fresh(run.url, "GET", f"{api}/{workflow}/instances").status_code == 200
        assert "HTTP Request:" not in run.log(), run.log()


def test_https_the_operator_token_and_test_scheduled_on_every_process(tmp_path: Path):
    from tests.e2e.test_dev_settings import make_project

    token = "a-token-of-the-cluster-1234"
    state = tmp_path / "state"
    run = CelldRun(make_project(tmp_path / "p"), state, "--port", "0", "--workers", "2",
                   "--local-protocol", "https", "--test-scheduled",
                   env={"CELLD_ADMIN_TOKEN": token})  # fmt: skip
    try:
        url = run.ready(timeout=120)
        # one certificate, made by the parent before any process started, served by both
        trusting = ssl.create_default_context(cafile=str(state / "local-cert" / "cert.pem"))
        for n in range(8):
            with httpx.Client(base_url=url, verify=trusting, timeout=60) as http:
                ran = http.get("/__scheduled", params={"cron": f"{n} * * * *"})
                assert (ran.status_code, ran.text) == (200, "Ran scheduled event")
                bare = http.get("/cdn-cgi/celld/metrics")
                assert bare.status_code == 401, bare.text
                auth = {"authorization": f"Bearer {token}"}
                assert http.get("/cdn-cgi/celld/metrics", headers=auth).status_code == 200
    finally:
        assert run.stop() == 0, run.log()
    log = run.log()
    assert "local-cert" in log and log.count("trust ") == 1, log
    # each request logged once, by the process that answered it
    for n in range(8):
        assert f"scheduled() cron={n} * * * * time=" in log, log
    assert len(re.findall(r"GET /__scheduled 200 OK", log)) == 8, log


def test_cron_starts_one_instance_a_tick_across_the_processes(tmp_path: Path):
    scheduled = Path(__file__).resolve().parents[2] / "examples" / "scheduled"
    start = 1_767_226_200_000  # 2026-01-01T00:10:00Z: ticks of */30 only, no 09:00
    half_hour = 30 * 60_000
    run = CelldRun(scheduled, tmp_path / "state", "--port", "0", "--workers", "2",
                   env={"CELLD_TEST_CLOCK": f"manual:{start}"})  # fmt: skip
    try:
        url = run.ready(timeout=120)
        for _ in range(3):  # each advance taken by either process moves every clock
            fresh(url, "POST", f"/cdn-cgi/celld/clock?advance={half_hour}").raise_for_status()
        ticks = {f"*/30 * * * *-{start + 20 * 60_000 + n * half_hour}" for n in range(3)}
        api = "/cdn-cgi/local/explorer/api/workflows/digest/instances?per_page=50"

        def listed() -> list[str]:
            return [row["id"] for row in fresh(url, "GET", api).json()["result"]]

        until(lambda: set(listed()) >= ticks)
        assert sorted(listed()) == sorted(ticks)  # once each, in one process's store
    finally:
        assert run.stop() == 0, run.log()
    assert len(re.findall(r"schedule '\*/30 \* \* \* \*' of digest started", run.log())) == 3
