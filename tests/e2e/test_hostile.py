"""Broken and hostile Worker code fails only the request that has it.

Each test runs against a real `celld run` of tests/projects/hostile (limits.cpu_ms =
4,000: setting the 200,000 timers an isolate may hold takes 1.3-2 s of CPU on a busy
machine, and must stay well inside it) and checks that /ping keeps answering within a
second meanwhile.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS
from tests.e2e.hostile import (
    answering,
    cpu_share_over,
    in_background,
    ping,
    pinging,
    rss_bytes,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(PROJECTS / "hostile", tmp_path_factory.mktemp("hostile") / "s")
    celld.start()
    yield celld
    celld.stop()


def get(server: CelldServer, path: str, timeout: float = 60) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=timeout) as client:
        return client.get(path)


@pytest.mark.parametrize("path", ["/microtask-loop", "/spin"])
def test_two_runaway_requests_fail_with_the_cpu_error_and_ping_answers(
    server: CelldServer, path: str
) -> None:
    with pinging(server):
        first = in_background(lambda: get(server, path))
        second = in_background(lambda: get(server, path))
        for response in (first(), second()):
            assert response.status_code == 500
            assert "Worker exceeded CPU time limit." in response.text
    ping(server)


def test_timers_die_with_the_request_that_set_them(server: CelldServer) -> None:
    response = get(server, "/timer-storm")
    assert response.text == "armed"
    ping(server)
    # 5,000 zero-delay intervals that outlived their request would keep a core busy.
    assert cpu_share_over(server, 1.0) < 0.5


def test_timers_set_after_an_await_die_when_the_isolate_goes_quiet(server: CelldServer) -> None:
    response = get(server, "/late-timer-storm")
    assert response.text == "armed late"
    ping(server)
    assert cpu_share_over(server, 1.0) < 0.5


def test_a_hundred_thousand_timers_in_one_request_and_ping_answers(server: CelldServer) -> None:
    """100,000 timers live in the isolate's heap (one host timer), not as 100,000 tasks on
    the server's event loop: they all fire, in deadline order, and /ping is answered
    meanwhile. The timers are spread over 3 s, so the request lasts at least that long."""
    logged_before = len(server.log())
    with answering(server) as answered:
        started = time.monotonic()
        response = get(server, "/many-timers?n=100000&spread=3000", timeout=300)
        ended = time.monotonic()
    assert response.status_code == 200, response.text
    assert response.json() == {"fired": 100_000, "ordered": True}
    assert any(started < at < ended for at in answered)
    assert "Worker isolate stopped" not in server.log()[logged_before:]


def test_timers_past_the_limit_fail_the_request_with_the_reason(server: CelldServer) -> None:
    response = get(server, "/many-timers?n=250000&spread=1000", timeout=300)
    assert response.status_code == 500
    assert "RangeError: timers: limit reached" in response.text
    # Its timers were cleared with it: the next request sets timers again.
    response = get(server, "/many-timers?n=10&spread=10")
    assert response.json() == {"fired": 10, "ordered": True}
    ping(server, timeout=60)


def test_a_pending_fetch_is_cancelled_with_its_request(server: CelldServer) -> None:
    """An upstream that never answers sees its connection closed once the request that
    started the fetch is over."""
    closed = threading.Event()
    accepted = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def upstream() -> None:
        connection, _ = listener.accept()
        accepted.set()
        with connection:
            connection.settimeout(60)
            try:
                while connection.recv(4096):
                    pass  # read the request, never answer
            except OSError:
                pass
            closed.set()

    thread = threading.Thread(target=upstream, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/slow"
        response = get(server, f"/fetch-and-leave?url={url}")
        assert response.text == "left"
        assert accepted.wait(20)
        assert closed.wait(20), "the fetch outlived its request"
    finally:
        listener.close()
    ping(server)


def test_a_request_whose_timers_burn_cpu_is_stopped(server: CelldServer) -> None:
    with pinging(server):
        response = get(server, "/timer-storm-hang")
    assert response.status_code == 500
    assert "Worker exceeded CPU time limit." in response.text
    assert cpu_share_over(server, 1.0) < 0.5


def test_a_value_too_deep_for_the_bridge_is_a_clear_error(server: CelldServer) -> None:
    response = get(server, "/deep-binding")
    assert response.status_code == 400
    assert "nested more than" in response.text
    ping(server)


def test_runaway_memory_after_load_returns_near_baseline(server: CelldServer) -> None:
    for _ in range(3):
        ping(server)
    baseline = rss_bytes(server)
    for _ in range(3):
        with pinging(server):
            first = in_background(lambda: get(server, "/microtask-loop"))
            get(server, "/timer-storm")
            assert first().status_code == 500
    ping(server)
    assert rss_bytes(server) < baseline + 64 * 1024 * 1024


def test_patched_builtins_do_not_break_the_bridge(tmp_path: Path) -> None:
    # Its own server: the patches stay in the isolates (module state is per isolate).
    celld = CelldServer(PROJECTS / "hostile", tmp_path / "s").start()
    try:
        # Every isolate gets patched; the runtime's bridge keeps working on all of them.
        for _ in range(4):
            response = get(celld, "/patch-builtins")
            assert (response.status_code, response.text) == (200, "patched")
        for _ in range(4):
            ping(celld)
    finally:
        celld.stop()


# -- workflows ----------------------------------------------------------------------------


def create(server: CelldServer, instance_id: str, params: dict[str, Any]) -> None:
    response = server.post("/create", params={"id": instance_id}, json=params)
    assert response.status_code == 200, response.text


def final(server: CelldServer, instance_id: str, timeout: float = 60) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        status = server.get("/status", params={"id": instance_id}).json()
        return status if status["status"] in ("complete", "errored", "terminated") else None

    return dict(server.wait_for(done, timeout=timeout))


def test_patched_builtins_do_not_change_what_is_recorded(server: CelldServer) -> None:
    create(server, "patcher", {"kind": "patch-push"})
    assert final(server, "patcher", timeout=15) == {
        "status": "complete",
        "output": {"pair": {"a": 5, "b": 6}, "list": [1, 2, 3]},
    }
    recorded = server.step("hostile-workflow", "patcher", "pair")["value"]
    assert json.loads(recorded) == {"a": 5, "b": 6}  # the serializer's text
    # Later instances (which may reuse the patched isolate) are recorded exactly too.
    for n in range(3):
        create(server, f"after-patcher-{n}", {"kind": "plain"})
        assert final(server, f"after-patcher-{n}") == {
            "status": "complete",
            "output": {"pair": {"a": 5, "b": 6}, "list": [1, 2, 3]},
        }
    ping(server)


def test_a_step_that_breaks_json_is_recorded_exactly(server: CelldServer) -> None:
    create(server, "json-breaker", {"kind": "break-json"})
    assert final(server, "json-breaker") == {"status": "complete", "output": {"fine": True}}
    create(server, "after-json-breaker", {"kind": "plain"})
    assert final(server, "after-json-breaker")["output"] == {
        "pair": {"a": 5, "b": 6},
        "list": [1, 2, 3],
    }


def test_an_isolate_with_patched_builtins_is_not_reused(server: CelldServer) -> None:
    create(server, "patch-at-end", {"kind": "patch-at-end"})
    assert final(server, "patch-at-end") == {
        "status": "complete",
        "output": {"pair": {"a": 5, "b": 6}},
    }
    # Its isolate would break the runtime of the next run: it is not kept warm.
    for n in range(12):
        create(server, f"after-patch-at-end-{n}", {"kind": "plain"})
        assert final(server, f"after-patch-at-end-{n}") == {
            "status": "complete",
            "output": {"pair": {"a": 5, "b": 6}, "list": [1, 2, 3]},
        }


def test_run_output_is_limited_like_step_results(server: CelldServer) -> None:
    create(server, "big-output", {"kind": "big-output"})
    status = final(server, "big-output")
    assert status["status"] == "errored"
    assert "output is too large" in status["error"]["message"]
    ping(server)


def test_buffered_events_are_capped_with_a_clear_error(server: CelldServer) -> None:
    create(server, "flooded", {"kind": "wait"})
    response = server.get("/flood", params={"id": "flooded", "n": 1_001}, timeout=120)
    flood = response.json()
    assert flood["accepted"] == 1_000
    assert "already holds 1000 events that no waitForEvent has received" in flood["error"]
    # The event the instance waits for is still accepted and received.
    response = server.post("/event", params={"id": "flooded", "type": "go"}, json={"ok": 1})
    assert response.text == "sent"
    assert final(server, "flooded") == {"status": "complete", "output": {"ok": 1}}


def test_a_step_looping_on_microtasks_fails_with_the_cpu_error(server: CelldServer) -> None:
    with pinging(server):
        create(server, "micro", {"kind": "microtask-loop"})
        status = final(server, "micro")
    assert status["status"] == "errored"
    assert "CPU time limit exceeded" in status["error"]["message"]
    create(server, "after-micro", {"kind": "plain"})
    assert final(server, "after-micro")["status"] == "complete"
