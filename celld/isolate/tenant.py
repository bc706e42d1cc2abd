"""One workflow run's share of an isolate that runs many (celld/isolate/host.py).

workerd runs many instances of a Workflow class in one isolate: each run is a promise
chain there, and module state is shared between them. celld does the same: an isolate's
`IsolateHost` serves several runs, each through a `Tenant`. The tenant is what a run's
owner (celld/cells/run.py) talks to as if it had the isolate to itself: it posts the
run's messages (stamped with its number `r`, so js/workflows/step.js routes them to that
run), handles the run's own operations (`ops`: the step protocol), and hears of the
turns that touched its run (`turn_callback`), of its share of their CPU
(`cpu_callback`) and of faults (`on_fault`). What stays the isolate's is shared: the
output gate (one for every run: a message waits for every write told before it, whoever
was told), the lease fence, the turn boundaries and the pump.

A run costs the isolate its JS state (a few kilobytes) and this object; joining a busy
isolate posts only the run's start, and leaving it only `wf.drop`: no isolate is taken
from a pool or audited per run (celld/cells/isolates.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celld.isolate.gate import OutputGate
    from celld.isolate.host import IsolateHost, OpHandler
    from celld.isolate.isolate import Isolate, IsolateFault
    from celld.store.lease import EffectFence


#: The operations of a run (js/workflows/step.js): only their messages carry the run's
#: number `r` and are routed by it (other messages' fields are the caller's own: a
#: `r` there means something else, such as scrypt's block size).
RUN_OPS = frozenset(
    {
        "wf.do", "wf.begin", "wf.attempt", "wf.sleep", "wf.wait", "wf.timer", "wf.replayed",
        "wf.done", "wf.fatal", "wf.rbReport",
    }
)  # fmt: skip


class Tenant:
    """A run in a shared isolate: the parts of `IsolateHost` a run's owner uses."""

    __slots__ = (
        "host", "r", "ops", "inward_ops", "inward_stream", "turn_callback", "cpu_callback",
        "_on_fault", "_missed_fault", "pending_ops", "tasks", "touched", "wanted", "left",
    )  # fmt: skip

    def __init__(self, host: IsolateHost, r: int) -> None:
        self.host = host
        #: the run's number in this isolate (every message of the run carries it)
        self.r = r
        #: the run's own operations (looked up before the host's shared ones)
        self.ops: Mapping[str, OpHandler] = {}
        #: operations that only tell the engine what this run does next, and its commit
        #: stream (rule 3 of celld/isolate/gate.py)
        self.inward_ops: frozenset[str] = frozenset()
        self.inward_stream: object = None
        #: after a turn that touched this run ran the isolate's jobs to the end
        self.turn_callback: Callable[[], None] | None = None
        #: this run's share of a turn's CPU (ms)
        self.cpu_callback: Callable[[float], None] | None = None
        #: told of the isolate's fault (see `on_fault`), and a fault told before it was set
        self._on_fault: Callable[[IsolateFault], None] | None = None
        self._missed_fault: IsolateFault | None = None
        #: host operations of this run still working for JS, by op name
        self.pending_ops: dict[str, int] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        #: something was delivered to this run, or sent by it, since its turn callback
        self.touched = False
        #: the number of the batch of messages that delivers the last one posted to it
        self.wanted = 0
        self.left = False

    @property
    def on_fault(self) -> Callable[[IsolateFault], None] | None:
        """Told of the isolate's fault, once. Every run of a faulted isolate hears of it,
        also one whose owner subscribes only after the fault: a run joins an isolate
        before it has read its journal (an await), and the isolate may be condemned by a
        co-tenant meanwhile; unheard, such a run would wait for ever for an isolate
        that never turns again."""
        return self._on_fault

    @on_fault.setter
    def on_fault(self, callback: Callable[[IsolateFault], None] | None) -> None:
        self._on_fault = callback
        missed = self._missed_fault
        if callback is not None and missed is not None:
            self._missed_fault = None
            callback(missed)

    def hear_fault(self, fault: IsolateFault) -> None:
        """The isolate faulted (`IsolateHost` tells every run): tell the owner, or keep
        the fault for the owner that subscribes later."""
        if self._on_fault is None:
            self._missed_fault = fault
        else:
            self._on_fault(fault)

    @property
    def isolate(self) -> Isolate:
        return self.host.isolate

    @property
    def gate(self) -> OutputGate:
        return self.host.gate

    @property
    def fence(self) -> EffectFence | None:
        return self.host.fence

    @property
    def faulted(self) -> bool:
        return self.host.faulted

    @property
    def co_tenants(self) -> int:
        """Other runs in the isolate now."""
        return len(self.host.tenants) - (0 if self.left else 1)

    @property
    def turn_pending(self) -> bool:
        """True while something for this run waits for a turn or a turn that touched it
        has not ended yet (an answer JS has not run yet)."""
        return not self.host.delivered(self.wanted)

    @property
    def outstanding(self) -> int:
        """Host requests of this run still working for JS (tasks and answers to come)."""
        return self.host.outstanding_for(self)

    async def wait_idle(self) -> None:
        """Until the isolate has no turn running or queued."""
        await self.host.wait_idle()

    def touch(self) -> None:
        """Hear of the next end of the isolate's turns (`turn_callback`)."""
        if not self.left and not self.touched:
            self.touched = True
            self.host._touched[self] = None

    def post(self, message: dict[str, Any]) -> None:
        """Queue a message for this run (stamped with its number)."""
        if self.left:
            return
        message["r"] = self.r
        self.host._post_for(self, message)

    def at_turn_boundary(self, callback: Callable[[], None]) -> None:
        self.host.at_turn_boundary(callback)

    def after_next_turn(self, callback: Callable[[], None]) -> None:
        self.host.after_next_turn(callback)

    def after_turn_seeing(self, callback: Callable[[], None]) -> None:
        self.host.after_turn_seeing(callback)
