"""instance.delete() and deleteBatch(): the rows go in one commit, a run stops (also its
own, from inside), and the id is free for a new create."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from celld.isolate.host import HostError
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, until, wait_for


async def test_delete_stops_the_run_and_frees_the_id(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state") as service:
        assert service.store is not None
        await call(service, "long-workflow", "create", id="d",
                   params=params({"steps": 2, "sleepEvery": 1, "nap": "1 day"}))  # fmt: skip
        await wait_for(service, "long-workflow", ["d"], {"waiting"})
        await call(service, "long-workflow", "delete", id="d")
        assert not await service.store.exists(InstanceRef("long-workflow", "d"))
        with pytest.raises(HostError, match="not_found"):
            await call(service, "long-workflow", "status", id="d")
        with pytest.raises(HostError, match="not_found"):
            await call(service, "long-workflow", "delete", id="d")
        await call(service, "long-workflow", "create", id="d", params=params({"steps": 3}))
        final = await wait_for(service, "long-workflow", ["d"], {"complete"})
        assert final["d"]["output"] == params({"total": 6, "steps": 3})


async def test_delete_batch_reports_every_position(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state") as service:
        for instance_id in ("a", "b"):
            await call(service, "long-workflow", "create", id=instance_id,
                       params=params({"steps": 1}))  # fmt: skip
        result = await call(service, "long-workflow", "deleteBatch", ids=["a", "x", "b", "a"])
        assert result == {
            "deleted": [{"id": "a"}, {"id": "b"}, {"id": "a"}],
            "errors": [
                {"id": "x", "code": 10400, "message": "workflows.api.error.instance.not_found"}
            ],
        }
        with pytest.raises(HostError, match="at least 1 instance"):
            await call(service, "long-workflow", "deleteBatch", ids=[])
        with pytest.raises(HostError, match="only supports 100"):
            await call(service, "long-workflow", "deleteBatch", ids=[f"i{n}" for n in range(101)])
        # Their runs are over once their cells are out of memory: nothing writes for them
        # any more, and nothing wrote their rows back.
        cells = service.cells
        assert cells is not None
        gone = [InstanceRef("long-workflow", i) for i in ("a", "b")]
        await until(lambda: all(cells.loaded(ref) is None for ref in gone), "runs stopped")
        assert (await service.store.counts()) == {}


async def test_an_instance_that_deletes_itself_stops(tmp_path: Path) -> None:
    from tests.e2e.counter import counter_server

    with counter_server() as counter:
        async with running_service(tmp_path / "state") as service:
            assert service.store is not None
            await call(service, "self-delete-workflow", "create", id="me",
                       params=params({"upstream": counter.url}))  # fmt: skip
            ref = InstanceRef("self-delete-workflow", "me")
            for _ in range(500):
                if counter.values("before") and not await service.store.exists(ref):
                    break
                await asyncio.sleep(0.02)
            # The run is over once its cell is out of memory and its isolate is back in the
            # warm pool: no JS of it runs any more.
            cells = service.cells
            assert cells is not None
            isolates = cells.isolates
            await until(
                lambda: cells.loaded(ref) is None and len(isolates.warm) == isolates.created,
                "the run stopped and gave its isolate back",
            )
            assert counter.values("before") == ["me"]
            assert counter.values("after") == []
            assert not await service.store.exists(ref)


async def test_create_batch_with_a_count(tmp_path: Path) -> None:
    from tests.celld_server import CelldServer

    server = CelldServer(Path(__file__).resolve().parents[1] / "projects" / "durable",
                         tmp_path / "state")  # fmt: skip
    server.start()
    try:
        made = server.post("/create-batch", params={"wf": "LONG"},
                           json={"count": 3, "params": {"steps": 2}})  # fmt: skip
        assert made.status_code == 200, made.text
        body = made.json()
        assert len(body["created"]) == 3 and body["errors"] == []
        assert len(set(body["created"])) == 3
        refused = server.post("/create-batch", params={"wf": "LONG"},
                              json={"count": 0, "params": {}})  # fmt: skip
        assert refused.status_code == 500
        assert refused.json()["error"]["message"] == (
            "WorkflowError: (body) count must be a positive integer"
        )

        def done() -> bool:
            statuses = server.post("/statuses", params={"wf": "LONG"}, json=body["created"])
            return all(s["status"] == "complete" for s in statuses.json().values())

        server.wait_for(done, timeout=30)
    finally:
        server.stop()
