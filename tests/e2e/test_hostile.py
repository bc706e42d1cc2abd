"""Broken and hostile Worker code fails only the request that has it.

Each test runs against a real `celld run` of tests/projects/hostile (limits.cpu_ms =
2,000) and checks that /ping keeps answering within a second meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS
from tests.e2e.hostile import cpu_share_over, in_background, ping, pinging, rss_bytes


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


def test_a_request_whose_timers_burn_cpu_is_stopped(server: CelldServer) -> None:
    with pinging(server):
        response = get(server, "/timer-storm-hang")
    assert response.status_code == 500
    assert "Worker exceeded CPU time limit." in response.text
    assert cpu_share_over(server, 1.0) < 0.5


def test_patched_builtins_do_not_break_the_bridge(server: CelldServer) -> None:
    # Every isolate gets patched; the runtime's bridge keeps working on all of them.
    for _ in range(4):
        response = get(server, "/patch-builtins")
        assert (response.status_code, response.text) == (200, "patched")
    for _ in range(4):
        ping(server)


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
