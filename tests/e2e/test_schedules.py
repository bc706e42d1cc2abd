"""Cron `schedules` of a real `celld run` (examples/scheduled) on the manual clock: one
instance per tick, Cloudflare's id form and `event.schedule`, and ticks missed while celld
was down started once, not once per missed tick."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from click.testing import CliRunner

from celld.cli.main import cli
from celld.client import Client, Instance
from tests.celld_server import CelldServer
from tests.e2e.conftest import REPO

PROJECT = REPO / "examples" / "scheduled"
HALF_HOURLY = "*/30 * * * *"
MINUTE = 60_000
T0 = 1_767_226_200_000  # 2026-01-01T00:10:00Z, a Thursday
AT_0030 = 1_767_227_400_000
AT_0300 = 1_767_236_400_000


def ids(client: Client) -> list[str]:
    return sorted(i["id"] for i in client.workflow("digest").instances(per_page=100))


def until(server: CelldServer, instance: Instance, wanted: str) -> dict[str, Any]:
    """Poll the explorer API (ids with "/" in them need no other route)."""
    return dict(server.wait_for(lambda: (s := instance.status())["status"] == wanted and s))


def schedule_view(client: Client) -> dict[str, Any]:
    (found,) = [
        s for s in client.workflow("digest").details()["schedules"] if s["cron"] == HALF_HOURLY
    ]
    return found


def test_ticks_start_instances_and_missed_ticks_run_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(PROJECT, state, manual_clock=T0).start()
    try:
        with Client(server.url) as client:
            view = schedule_view(client)
            assert view["nextTick"] == "2026-01-01T00:30:00.000Z"
            assert view["lastInstanceId"] is None
            assert ids(client) == []  # a new schedule starts nothing for the past
            server.advance(19 * MINUTE)  # 00:29: not yet
            assert ids(client) == []
            server.advance(MINUTE)  # 00:30
            first = f"{HALF_HOURLY}-{AT_0030}"
            server.wait_for(lambda: ids(client) == [first])
            instance = client.workflow("digest").get(first)  # the id has "/" and spaces
            until(server, instance, "waiting")
            server.advance(MINUTE)
            status = until(server, instance, "complete")
            assert status["output"] == {
                "cron": HALF_HOURLY,
                "covers": "2026-01-01T00:00:00.000Z .. 2026-01-01T00:30:00.000Z",
            }
            details = instance.describe()
            assert details["trigger"] == {"source": "cron"}
            assert schedule_view(client)["lastInstanceId"] == first
            shown = CliRunner().invoke(
                cli, ["workflows", "describe", "digest", "--port", str(server.port)]
            )
            assert shown.exit_code == 0, shown.output
            lines = [" ".join(line.split()) for line in shown.output.splitlines()]
            at = lines.index("Schedule */30 * * * * (UTC):")
            assert "Next Tick: 2026-01-01T01:00:00.000Z" in lines[at + 1 : at + 4]
            assert f"Last Instance: {first}" in lines[at + 1 : at + 4]
    finally:
        server.stop()

    # down from 00:31 to 03:10: five half-hour ticks and no weekday 09:00 passed; only
    # the latest (03:00) runs, once
    server = CelldServer(PROJECT, state, manual_clock=AT_0300 + 10 * MINUTE).start()
    try:
        with Client(server.url) as client:
            caught_up = f"{HALF_HOURLY}-{AT_0300}"
            server.wait_for(lambda: len(ids(client)) == 2)
            assert ids(client) == sorted([f"{HALF_HOURLY}-{AT_0030}", caught_up])
            view = schedule_view(client)
            assert view["lastTick"] == "2026-01-01T03:00:00.000Z"
            assert view["nextTick"] == "2026-01-01T03:30:00.000Z"
            until(server, client.workflow("digest").get(caught_up), "waiting")
    finally:
        server.kill()

    # SIGKILLed at 03:10 with nothing missed since: a start at 03:20 starts nothing
    server = CelldServer(PROJECT, state, manual_clock=AT_0300 + 20 * MINUTE).start()
    try:
        with Client(server.url) as client:
            server.advance(0)
            assert len(ids(client)) == 2
            server.advance(10 * MINUTE)  # 03:30: the next tick, while running
            server.wait_for(lambda: len(ids(client)) == 3)
    finally:
        server.stop()


def test_scheduled_instance_id_is_refused_for_create_and_explorer_paths_work(
    tmp_path: Path,
) -> None:
    """A user cannot create an id in the scheduled form (it is the scheduler's); the
    explorer API addresses scheduled ids with "/" in them."""
    server = CelldServer(PROJECT, tmp_path / "state", manual_clock=T0).start()
    try:
        with Client(server.url) as client:
            response = server.post(
                "/cdn-cgi/local/explorer/api/workflows/digest/instances",
                json={"id": f"{HALF_HOURLY}-{AT_0030}"},
            )
            assert response.status_code == 400
            assert "invalid_id" in response.text
            server.advance(20 * MINUTE)
            first = f"{HALF_HOURLY}-{AT_0030}"
            server.wait_for(lambda: ids(client) == [first])
            instance = client.workflow("digest").get(first)
            until(server, instance, "waiting")
            assert instance.wait_for_status("waiting")["status"] == "waiting"  # test routes
            described = server.get(
                f"/cdn-cgi/celld/workflows/digest/instances/{quote(first, safe='')}"
            )
            assert described.status_code == 200 and described.json()["id"] == first
            instance.pause()
            assert until(server, instance, "paused")["status"] == "paused"
            instance.terminate()
            assert instance.status()["status"] == "terminated"
    finally:
        server.stop()
