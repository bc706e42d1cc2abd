"""Durable Objects end to end in process: ids, stubs, RPC, fetch, storage, eviction."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from celld.cells.clock import ManualClock
from celld.isolate.isolate import Limits
from tests.objects.harness import START_MS, get, objects_service, rpc


async def test_rpc_calls_keep_state_per_name(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        assert await rpc(service, "a", "increment") == {"value": 1}
        assert await rpc(service, "a", "increment", 5) == {"value": 6}
        assert await rpc(service, "b", "increment") == {"value": 1}
        who = (await rpc(service, "a", "whoami"))["value"]
        assert who["name"] == "a" and len(who["id"]) == 64 and who["loads"] == 0


async def test_concurrent_calls_to_one_object_do_not_interleave_storage(tmp_path: Path) -> None:
    """increment() reads, then writes after an await: the input gate keeps another call from
    reading in between, so no increment is lost."""
    async with objects_service(tmp_path / "state") as service:
        results = await asyncio.gather(*(rpc(service, "busy", "increment") for _ in range(40)))
        assert sorted(r["value"] for r in results) == list(range(1, 41))
        assert await rpc(service, "busy", "get") == {"value": 40}


async def test_a_turn_past_the_cpu_limit_resets_the_object(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        assert service.objects is not None
        service.objects.limits = Limits(
            cpu_ms=300, memory_bytes=service.objects.limits.memory_bytes
        )
        assert await rpc(service, "cpu", "increment") == {"value": 1}
        error = (await rpc(service, "cpu", "spin", 1500))["error"]
        assert error["message"] == "Durable Object exceeded its CPU time limit and was reset."
        # The next call gets a fresh isolate; committed storage is intact.
        assert await rpc(service, "cpu", "increment") == {"value": 2}


async def test_a_loop_that_never_ends_is_stopped_at_the_cpu_limit(tmp_path: Path) -> None:
    """Object isolates run without QuickJS's time limit (their storage calls need that);
    the CPU watchdog stops an endless turn, and other objects on the same JS threads
    go on answering."""
    async with objects_service(tmp_path / "state") as service:
        assert service.objects is not None
        service.objects.limits = Limits(
            cpu_ms=300, memory_bytes=service.objects.limits.memory_bytes
        )
        assert await rpc(service, "forever", "increment") == {"value": 1}
        stuck = [rpc(service, f"forever-{n}", "spinForever") for n in range(3)]
        for outcome in await asyncio.wait_for(asyncio.gather(*stuck), timeout=60):
            message = outcome["error"]["message"]
            assert message == "Durable Object exceeded its CPU time limit and was reset."
        assert await rpc(service, "other", "increment") == {"value": 1}
        assert await rpc(service, "forever", "increment") == {"value": 2}


async def test_synchronous_kv_and_cursor_iteration(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        assert await rpc(service, "n", "notes.add", "x") == {"value": {"written": 1}}
        assert await rpc(service, "n", "notes.iterate") == {"value": [[1, "x"], ["k", 5]]}


async def test_arguments_and_results_are_structured_clones(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        value = {"nested": [1, "two", None, {"x": 1.5}], "unicode": "é🙂"}
        assert await rpc(service, "a", "echo", value) == {"value": value}


async def test_errors_are_rethrown_in_the_caller(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        error = (await rpc(service, "a", "fail", "nope"))["error"]
        # Own properties beyond name, message and stack do not cross, as with workerd's clone.
        assert error == {"name": "RangeError", "message": "nope", "isRange": True}
        missing = (await rpc(service, "a", "noSuchMethod"))["error"]
        assert missing["name"] == "TypeError"
        assert 'does not implement the method "noSuchMethod"' in missing["message"]
        # The object is unharmed.
        assert await rpc(service, "a", "increment") == {"value": 1}


async def test_ids_are_deterministic_validated_and_per_namespace(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        ids = json.loads((await get(service, "/ids"))[2])
        assert len(ids["a"]) == 64 and int(ids["a"], 16) >= 0
        assert ids["name"] == "x" and ids["same"] and ids["otherNs"] and ids["parsed"]
        assert ids["parsedName"] is None and ids["uniqueName"] is None
        assert ids["unique"] != ids["a"] and len(ids["unique"]) == 64
        assert ids["bad"] == "TypeError: Invalid Durable Object ID: must be 64 hex digits"
        assert ids["foreign"] == "TypeError: Durable Object ID is not valid for this namespace."
    # The same name maps to the same id after a restart.
    async with objects_service(tmp_path / "state") as service:
        assert json.loads((await get(service, "/ids"))[2])["a"] == ids["a"]


async def test_stub_fetch_reaches_the_objects_fetch_handler(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        status, headers, body = await get(service, "/fetch", name="f")
        assert (status, body, headers.get("x-object")) == (200, "POST /path 2", "f")
        assert (await get(service, "/fetch", name="f"))[2] == "POST /path 4"


async def test_a_class_without_extends_durable_object_serves_fetch_but_not_rpc(
    tmp_path: Path,
) -> None:
    async with objects_service(tmp_path / "state") as service:
        answer = json.loads((await get(service, "/plain"))[2])
        assert answer["text"] == "plain"
        assert "does not support RPC" in answer["rpc"] and "extends DurableObject" in answer["rpc"]


async def test_key_value_api(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:

        async def kv(*call: object) -> object:
            return (await rpc(service, "kv", "kv", *call))["value"]

        await kv("deleteAll")  # the constructor stored its load count
        assert (
            await kv("put", {"a": 1, "b": [2], "c": "three", "d/1": 4, "d/2": 5}) == "(undefined)"
        )
        assert await kv("get", "b") == [2]
        assert await kv("get", "missing") == "(undefined)"
        assert await kv("get", ["a", "missing", "c"]) == {"map": [["a", 1], ["c", "three"]]}
        assert await kv("list") == {
            "map": [["a", 1], ["b", [2]], ["c", "three"], ["d/1", 4], ["d/2", 5]]
        }
        assert await kv("list", {"prefix": "d/"}) == {"map": [["d/1", 4], ["d/2", 5]]}
        assert await kv("list", {"start": "b", "end": "d/2"}) == {
            "map": [["b", [2]], ["c", "three"], ["d/1", 4]]
        }
        assert await kv("list", {"startAfter": "b", "limit": 1}) == {"map": [["c", "three"]]}
        assert await kv("list", {"reverse": True, "limit": 2}) == {"map": [["d/2", 5], ["d/1", 4]]}
        assert await kv("delete", "a") is True
        assert await kv("delete", "a") is False
        assert await kv("delete", ["b", "c", "nope"]) == 2
        assert await kv("deleteAll") == "(undefined)"
        assert await kv("list") == {"map": []}


async def test_transaction_commits_or_rolls_back(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        assert await rpc(service, "t", "txn", "throw") == {"value": {"error": "undo", "t1": None}}
        assert await rpc(service, "t", "txn", "rollback") == {"value": {"t1": None, "t2": None}}
        assert await rpc(service, "t", "txn", "keep") == {"value": {"t1": 1, "t2": 2}}


async def test_an_idle_object_is_evicted_and_comes_back_with_its_storage(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    async with objects_service(tmp_path / "state", clock) as service:
        objects = service.objects
        assert objects is not None
        assert await rpc(service, "e", "increment", 3) == {"value": 3}
        assert len(objects.live) == 1
        for _ in range(50):  # the isolate goes idle a turn after its answer
            await asyncio.sleep(0.01)
            clock.advance(objects.idle_ms + 1)
            if not objects.live:
                break
        assert not objects.live and objects.evictions == 1
        assert await rpc(service, "e", "increment") == {"value": 4}
        # The constructor ran again (a new instance) and saw its stored load count.
        assert (await rpc(service, "e", "whoami"))["value"]["loads"] == 1


async def test_storage_survives_a_restart(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        assert await rpc(service, "r", "increment", 7) == {"value": 7}
    async with objects_service(tmp_path / "state") as service:
        assert await rpc(service, "r", "get") == {"value": 7}
