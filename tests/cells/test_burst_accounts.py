"""After a burst, what nobody read while it ran is complete: every instance's event log
holds each step's events once (stored packed, read back one by one), and the metrics
say what the store holds."""

from __future__ import annotations

from pathlib import Path

import orjson

from celld.server.metrics import render_metrics
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, wait_for

BENCH_PROJECT = Path(__file__).resolve().parents[2] / "bench" / "project"
WORKFLOW = "bench-workflow"


async def test_a_burst_leaves_complete_logs_and_true_metrics(tmp_path: Path) -> None:
    n, steps = 60, 4
    ids = [f"b{i}" for i in range(n)]
    async with running_service(tmp_path / "state", BENCH_PROJECT) as service:
        store = service.store
        assert store is not None
        payload = params({"steps": steps})
        for start in range(0, n, 20):
            batch = [{"id": i, "params": payload} for i in ids[start : start + 20]]
            await call(service, WORKFLOW, "createBatch", instances=batch)
        done = await wait_for(service, WORKFLOW, ids, {"complete"}, timeout=120)
        assert all(orjson.loads(d["output"])["steps"] == steps for d in done.values())

        seen: set[int] = set()
        for instance_id in ids:
            rows = await store.log_after(InstanceRef(WORKFLOW, instance_id), 0, 10_000)
            kinds = [(r.type, orjson.loads(r.body).get("stepName")) for r in rows]
            assert kinds[0] == ("workflow_queued", None) and kinds[-1][0] == "workflow_completed"
            for step in range(steps):
                mine = [k for k, name in kinds if name == f"s{step}-1"]
                assert mine == [
                    "step_started", "attempt_started", "attempt_completed", "step_completed"
                ], (instance_id, kinds)  # fmt: skip
            ids_here = [r.event_id for r in rows]
            assert ids_here == sorted(ids_here) and not seen & set(ids_here)
            seen |= set(ids_here)

        text = await render_metrics(service)
        samples = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line and not line.startswith("#")
        }
        truth = await store._fetch("SELECT status, COUNT(*) AS n FROM instances GROUP BY status")  # type: ignore[union-attr]
        assert {k: v for k, v in samples.items() if k.startswith("celld_instances{")} == {
            f'celld_instances{{status="{r["status"]}"}}': float(r["n"]) for r in truth
        }
        assert samples['celld_instances{status="complete"}'] == n
        assert samples["celld_store_commits_total"] == store.commits  # type: ignore[attr-defined]
        step_rows = await store._fetch("SELECT COUNT(*) AS n FROM steps")  # type: ignore[union-attr]
        assert step_rows[0]["n"] == n * steps
        assert samples["celld_store_rows_written_total"] >= n * (steps + 1)
