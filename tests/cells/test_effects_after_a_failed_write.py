"""Nothing JS does after a result it was answered ahead of its commit leaves celld when a
write of the instance then fails.

The crash harness's disk-full form found this (tests/crash_harness.py: an effect carried
step `a`'s result, the instance was dropped after a failed commit, `a` ran again and its
journal holds another value). The sequence, made deterministic here:

1. step `a`'s attempt is in flight while an event's write of the same instance is in
   flight too (the store's writer holds it: `SqliteStore.fault`);
2. `a` reports its result: JS is answered ahead of the result's commit, which waits for
   the event's write; JS's next turn (which takes a while, then sends a fetch carrying
   `a`) runs with its messages held until that commit lands;
3. the event's write fails (a full disk): the instance is dropped from memory and its
   run stopped while that turn is still under way;
4. `a`'s result is never committed; once the store works again the instance is reloaded
   and `a` runs again with a new value. The fetch that carried the first value must
   never have left.

Real isolates on JS threads (not the event loop's inline turns, so that the failure lands
during the turn) and a real SQLite store whose writer fails the event's commit.
"""

from __future__ import annotations

import asyncio
import http.server
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from celld.cells.manager import CellSettings
from celld.isolate.host import HostError
from celld.store.base import InstanceRef
from tests.e2e.counter import counter_server, serving
from tests.inprocess import call, params, running_service, until, wait_for

WORKFLOW = "failed-write-workflow"


@contextmanager
def gate_server(gate: threading.Event) -> Iterator[str]:
    """A URL whose requests are answered once `gate` is set."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            gate.wait(60)
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield f"{url}/gate"


async def test_a_result_never_committed_is_never_carried_out(tmp_path: Path) -> None:
    gate = threading.Event()
    entered, release = threading.Event(), threading.Event()
    armed = threading.Event()

    def hold_then_fail() -> None:
        """The store's writer: the next commit waits for `release`, then fails."""
        if not armed.is_set():
            return
        armed.clear()
        entered.set()
        release.wait(60)
        raise sqlite3.OperationalError("database or disk is full")

    with counter_server() as counter, gate_server(gate) as gate_url:
        async with running_service(
            tmp_path / "state", cells=CellSettings(inline_turns=False)
        ) as service:
            store, cells = service.store, service.cells
            assert store is not None and cells is not None
            store.fault = hold_then_fail
            payload = {"upstream": counter.url, "gate": gate_url, "spinMs": 600}
            await call(service, WORKFLOW, "create", id="w", params=params(payload))
            await until(lambda: counter.values("w/a"), "step a started")
            # 1. the event's write goes to the store, whose writer holds it
            armed.set()
            sent = asyncio.ensure_future(
                call(service, WORKFLOW, "sendEvent", id="w", type="go", payload=params(1))
            )
            assert await asyncio.to_thread(entered.wait, 60), "the event's write never came"
            # 2. `a` returns: its result is answered ahead of its commit, which waits
            gate.set()
            cell = cells.loaded(InstanceRef(WORKFLOW, "w"))
            assert cell is not None and cell.run is not None
            host = cell.run.host
            await until(
                lambda: cell.writes_held and host.turn_pending,
                "JS's turn after the result under way, the result's write held",
            )
            # 3. the event's write fails while that turn is under way
            release.set()
            with pytest.raises(HostError, match=r"store\.unavailable"):
                await sent
            # 4. reloaded once the store commits again: `a` runs again, the event goes in
            for _ in range(200):
                try:
                    await call(service, WORKFLOW, "sendEvent", id="w", type="go", payload=params(1))
                    break
                except HostError as error:
                    assert "store.unavailable" in str(error)
                    await asyncio.sleep(0.05)
            final = await wait_for(service, WORKFLOW, ["w"], {"complete"}, timeout=60)
    journal = orjson.loads(final["w"]["output"])["a"]
    executions = counter.values("w/a")
    assert len(executions) == 2 and executions[-1] == journal  # `a` ran again
    carried = [seen["a"] for sender, seen in counter.witnesses if sender == "w/after-a"]
    assert carried == [journal]  # only the committed result ever left
