"""Promise.race of a step and a day-long sleep: the step wins and run() goes on at once. The
run must not hibernate (its next deadline is a day away) while the winning step's answer
is on its way to JS, or the code after the race would wait for the sleep."""

from __future__ import annotations

from pathlib import Path

from tests.celld_server import CelldServer
from tests.e2e.test_versions import RACE, T0, project, until


def test_code_after_a_won_race_runs_before_the_losing_sleep_ends(tmp_path: Path) -> None:
    body = RACE.replace("50 minutes", "1 day") % ""  # far beyond the residency window
    assert '"1 day"' in body
    server = CelldServer(project(tmp_path / "p", body), tmp_path / "s", manual_clock=T0)
    server.start()
    try:
        server.post("/create", params={"id": "r"}).raise_for_status()

        def nap_reached() -> bool:
            steps = {s["name"]: s["state"] for s in server.describe("flow", "r")["steps"]}
            return steps.get("after") == "done" and steps.get("nap") == "sleeping"

        server.wait_for(nap_reached)
        server.advance(10 * 60_000)  # the nap only; the losing sleep has a day to go
        assert until(server, "r", "complete")["output"] == "fast!"
    finally:
        server.stop()
