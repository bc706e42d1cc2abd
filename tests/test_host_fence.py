"""An isolate's host under a fence (celld/isolate/host.py): no turn starts and no message
is dispatched while the node's lease is not valid; both go on, in order, once it is; a
fence of a token the node lost never opens again. Real isolates, a real Lease."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from celld.isolate.gate import PendingWrite
from celld.isolate.host import IsolateHost
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.ops import isolate_ops
from celld.isolate.runtime import Script, runtime_scripts
from celld.store.lease import Lease
from tests.jsharness import pool

#: JS answers each `go` with a `t.sent` naming it (one turn per message).
SOURCE = "__celld_host.on('go', (m) => { __celld_host.notify('t.sent', { n: m.n }); });"


async def _host(sent: list[int]) -> tuple[IsolateHost, Lease]:
    isolate = Isolate(pool().pick(), Limits())
    await isolate.load((*runtime_scripts(), Script("test.js", SOURCE)))
    lease = Lease(margin_s=0.0)
    lease.new_epoch(1)
    lease.renewed(time.monotonic(), 60)
    host = IsolateHost(isolate, {**isolate_ops(), "t.sent": lambda m: sent.append(m["n"])})
    host.fence = lease.fence()
    return host, lease


async def _until(predicate: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_no_turn_runs_while_the_lease_lapsed_and_all_run_once_renewed() -> None:
    sent: list[int] = []
    host, lease = await _host(sent)
    try:
        host.post({"k": "go", "n": 1})
        await _until(lambda: sent == [1])
        await host.wait_idle()
        lease.lapse("a test")
        waiting = [{"k": "go", "n": n} for n in (2, 3)]
        for message in waiting:
            host.post(message)
        await _until(lambda: host.fenced)  # the pump came to its turn and stopped
        assert all(host.queued(m) for m in waiting)  # JS has not seen them
        assert sent == [1]
        lease.renewed(time.monotonic(), 60)
        await _until(lambda: sent == [1, 2, 3])
        assert not host.fenced
    finally:
        await host.close()


async def test_messages_of_a_turn_wait_for_the_lease_in_order() -> None:
    sent: list[int] = []
    host, lease = await _host(sent)
    try:
        host.post({"k": "go", "n": 0})  # (the first turn also asks for entropy)
        await _until(lambda: sent == [0])
        await host.wait_idle()
        write = PendingWrite("instance")
        host.gate.told(write)  # (as a run's result answered ahead of its commit)
        for n in (1, 2):
            host.post({"k": "go", "n": n})
        await _until(lambda: host.gate.waiting == 2)
        lease.lapse("a test")
        write.landed()  # the commit landed, but the lease lapsed meanwhile
        assert host.fenced and sent == [0] and host.gate.waiting == 2
        lease.renewed(time.monotonic(), 60)
        assert sent == [0, 1, 2]  # sent as the renewal is told, in order
    finally:
        await host.close()


async def test_a_fence_of_a_lost_token_never_opens_and_the_host_still_closes() -> None:
    sent: list[int] = []
    host, lease = await _host(sent)
    lease.lapse("taken over")
    host.post({"k": "go", "n": 1})
    await _until(lambda: host.fenced)
    lease.new_epoch(2)  # the node joined again under another token
    lease.renewed(time.monotonic(), 60)
    assert host.fenced and sent == []  # told of the renewal: still shut
    await asyncio.wait_for(host.close(), 20)
    assert sent == []
