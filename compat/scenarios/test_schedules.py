"""Cron `schedules` of a `workflows` entry (spec 4; changelog 2026-06-02)."""

from __future__ import annotations

from compat.differences import SCHEDULES_LOCAL, difference
from compat.scenario import Scenario

EVERY_MINUTE = "* * * * *"


@difference(wrangler=SCHEDULES_LOCAL)
def test_schedule_starts_an_instance_per_tick(sc: Scenario) -> None:
    """Past a minute boundary, the instance `"* * * * *-<tick ms>"` exists, was started by
    the schedule and sees `event.schedule = {cron, scheduledTime}`."""
    now_s = sc.clock_s()
    tick_ms = (now_s // 60 + 1) * 60_000
    sc.wait(tick_ms - now_s * 1000 + 2_000)
    instance_id = f"{EVERY_MINUTE}-{tick_ms}"
    code, body = sc.call("/status", id=instance_id, wf="CRON")
    if sc.on == "celld":
        body = sc.until(instance_id, "complete", wf="CRON")
    seen = body.get("output") if code == 200 else None
    assert seen == sc.pick(
        celld={
            "schedule": {"cron": EVERY_MINUTE, "scheduledTime": tick_ms},
            "id": instance_id,
        },
        wrangler=None,
    )
