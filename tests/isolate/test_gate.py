"""The output gate's rules (celld/isolate/gate.py), each attacked on its own: first on the
gate alone, then on a real QuickJS isolate whose messages pass a real host."""

from __future__ import annotations

import asyncio
from typing import Any

from celld.cells.warm import WarmIsolates
from celld.isolate.gate import OutputGate, PendingWrite
from celld.isolate.host import IsolateHost
from celld.isolate.isolate import Isolate, IsolateFault, Limits
from celld.isolate.ops import isolate_ops
from celld.isolate.runtime import Script, runtime_scripts
from tests.jsharness import pool


def _gate() -> tuple[OutputGate, list[dict[str, Any]], list[BaseException]]:
    condemned: list[BaseException] = []
    gate = OutputGate(condemned.append)
    sent: list[dict[str, Any]] = []
    gate.attach(sent.append, lambda _: None)
    return gate, sent, condemned


def _send(gate: OutputGate, sent: list[dict[str, Any]], message: dict[str, Any], **kw: Any) -> None:
    if gate.send(message, **kw):
        sent.append(message)


# -- the gate alone --------------------------------------------------------------------------


def test_an_open_gate_lets_everything_through() -> None:
    gate, sent, _ = _gate()
    _send(gate, sent, {"op": "fetch", "n": 1})
    assert sent == [{"op": "fetch", "n": 1}] and gate.open


def test_nothing_leaves_before_the_write_it_was_told_of_lands() -> None:
    gate, sent, _ = _gate()
    write = PendingWrite("instance-a")
    gate.told(write)
    for n in range(3):
        _send(gate, sent, {"op": "fetch", "n": n})
    assert sent == [] and gate.waiting == 3
    write.landed()
    assert [m["n"] for m in sent] == [0, 1, 2]  # in the order sent
    assert gate.open


def test_a_message_waits_only_for_the_writes_told_before_it() -> None:
    gate, sent, _ = _gate()
    first, second = PendingWrite("a"), PendingWrite("a")
    gate.told(first)
    _send(gate, sent, {"op": "fetch", "n": 1})
    gate.told(second)
    _send(gate, sent, {"op": "fetch", "n": 2})
    first.landed()
    assert [m["n"] for m in sent] == [1]
    second.landed()
    assert [m["n"] for m in sent] == [1, 2]


def test_writes_landing_out_of_order_release_nothing_early() -> None:
    gate, sent, _ = _gate()
    first, second = PendingWrite("a"), PendingWrite("b")
    gate.told(first)
    _send(gate, sent, {"op": "fetch", "n": 1})
    gate.told(second)
    _send(gate, sent, {"op": "fetch", "n": 2})
    second.landed()
    assert sent == []  # the first message still waits for the first write
    first.landed()
    assert [m["n"] for m in sent] == [1, 2]


def test_the_runs_own_step_messages_pass_its_own_pending_write() -> None:
    gate, sent, _ = _gate()
    stream = object()
    gate.told(PendingWrite(stream))
    _send(gate, sent, {"op": "wf.do", "n": 1}, inward_stream=stream)
    assert [m["n"] for m in sent] == [1]


def test_step_messages_wait_for_another_instances_write() -> None:
    """A run on an isolate that was told another instance's result commits separately
    from it: its step messages may carry what it read from module state."""
    gate, sent, _ = _gate()
    mine, theirs = object(), object()
    other = PendingWrite(theirs)
    gate.told(other)
    _send(gate, sent, {"op": "wf.attempt", "n": 1}, inward_stream=mine)
    assert sent == []
    other.landed()
    assert [m["n"] for m in sent] == [1]


def test_step_messages_keep_their_place_behind_waiting_ones() -> None:
    gate, sent, _ = _gate()
    stream = object()
    write = PendingWrite(stream)
    gate.told(write)
    _send(gate, sent, {"op": "log", "n": 1})
    _send(gate, sent, {"op": "wf.done", "n": 2}, inward_stream=stream)
    assert sent == []  # the log line was sent first: the end may not overtake it
    write.landed()
    assert [m["n"] for m in sent] == [1, 2]


def test_a_failed_write_drops_what_waits_and_condemns_the_isolate() -> None:
    gate, sent, condemned = _gate()
    heard: list[BaseException] = []
    gate.attach(sent.append, heard.append)
    write = PendingWrite("a")
    gate.told(write)
    _send(gate, sent, {"op": "fetch", "n": 1})
    error = OSError("disk full")
    write.failed(error)
    assert sent == [] and gate.waiting == 0
    assert condemned == [error] and heard == [error] and gate.condemned is error
    write.landed()  # (settled once: nothing changes)
    _send(gate, sent, {"op": "fetch", "n": 2})
    assert sent == []  # nothing ever leaves a condemned isolate again


def test_the_gate_stays_with_the_isolate_when_its_user_changes() -> None:
    gate, sent, _ = _gate()
    write = PendingWrite("a")
    gate.told(write)
    _send(gate, sent, {"op": "fetch", "who": "first run"})
    assert gate.detach() == 1  # the first run is over: what it left waiting goes with it
    later: list[dict[str, Any]] = []
    gate.attach(later.append, lambda _: None)
    _send(gate, later, {"op": "fetch", "who": "next run"}, inward_stream=object())
    assert later == []  # the next run may have read the result from module state
    write.landed()
    assert later == [{"op": "fetch", "who": "next run"}] and sent == []


def test_nothing_leaves_once_the_sender_is_detached() -> None:
    """A turn still under way when its run is stopped ends later: what it sends is the
    run's, and the run is over (it may have been dropped after a failed commit)."""
    gate, sent, _ = _gate()
    gate.detach()
    assert gate.send({"op": "fetch"}) is False
    assert gate.send({"op": "wf.attempt"}, inward_stream=object()) is False
    assert gate.waiting == 0


def test_a_write_settled_before_it_is_told_holds_nothing() -> None:
    gate, sent, _ = _gate()
    write = PendingWrite("a")
    write.landed()
    gate.told(write)
    _send(gate, sent, {"op": "fetch"})
    assert len(sent) == 1


# -- on a real isolate -------------------------------------------------------------------------

_SENDER = """
__celld_host.on('go', (m) => { __celld_host.notify('t.out', { n: m.n }); });
"""


async def _isolate() -> Isolate:
    isolate = Isolate(pool().pick(), Limits())
    await isolate.load((*runtime_scripts(), Script("sender.js", _SENDER)))
    return isolate


async def _warm_up(host: IsolateHost, out: list[int]) -> None:
    """A first turn with the gate open (the runtime asks for its entropy then)."""
    host.post({"k": "go", "n": 0})
    await _until(lambda: out == [0], "the first turn")
    await host.wait_idle()


async def _until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_real_isolates_messages_wait_at_its_gate() -> None:
    isolate = await _isolate()
    out: list[int] = []
    turns: list[int] = []
    host = IsolateHost(isolate, {**isolate_ops(), "t.out": lambda m: out.append(m["n"])})
    try:
        await _warm_up(host, out)
        host.turn_callback = lambda: turns.append(len(out))
        write = PendingWrite("instance")
        host.gate.told(write)
        host.post({"k": "go", "n": 1})
        await _until(lambda: host.gate.waiting == 1, "the message to reach the gate")
        await host.wait_idle()
        assert out == [0] and host.busy  # held, and held work keeps the host busy
        assert turns == []  # its owner hears of the turn's end once it is dispatched
        write.landed()
        assert out == [0, 1] and turns == [2] and not host.busy
    finally:
        await host.close()
        await isolate.close()


async def test_a_reused_isolate_carries_its_pending_write_to_the_next_host() -> None:
    isolate = await _isolate()
    seen: list[int] = []
    first = IsolateHost(isolate, {**isolate_ops(), "t.out": lambda m: seen.append(m["n"])})
    await _warm_up(first, seen)
    write = PendingWrite("first instance")
    first.gate.told(write)
    await first.detach()
    out: list[int] = []
    second = IsolateHost(isolate, {**isolate_ops(), "t.out": lambda m: out.append(m["n"])})
    try:
        second.post({"k": "go", "n": 7})
        await _until(lambda: second.gate.waiting == 1, "the message to reach the gate")
        assert out == []
        write.landed()
        assert out == [7]
    finally:
        await second.close()
        await isolate.close()


async def test_a_failed_write_faults_the_isolate_and_keeps_it_out_of_the_pool() -> None:
    isolate = await _isolate()
    faults: list[IsolateFault] = []
    out: list[int] = []
    host = IsolateHost(
        isolate, {**isolate_ops(), "t.out": lambda m: out.append(m["n"])}, on_fault=faults.append
    )
    try:
        await _warm_up(host, out)
        write = PendingWrite("instance")
        host.gate.told(write)
        host.post({"k": "go", "n": 1})
        await _until(lambda: host.gate.waiting == 1, "the message to reach the gate")
        await host.wait_idle()
        write.failed(OSError("disk full"))
        assert out == [0]
        assert isolate.fault is not None and isolate.fault.lost_write
        assert [f.lost_write for f in faults] == [True]  # the idle owner heard at once
        warm = WarmIsolates(capacity=4)
        assert warm.give(isolate) is isolate  # handed back to be closed, never reused
        assert warm.take() is None
    finally:
        await host.close()
        await isolate.close()
