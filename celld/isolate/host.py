"""The host side of the bridge: pumps an isolate's turns and serves its requests.

JS queues messages (see js/host.js); after each turn the host dispatches them to
operation handlers. A message with a ticket (`t`) is a request: the handler's
result, or its exception turned into a JS error shape, goes back as a `settle`
message in a later turn. Python exceptions never reach QuickJS as such.

Every message JS sends passes the isolate's output gate (celld/isolate/gate.py) before it
is dispatched. A host may also have a `fence` (a workflow run's: the node's lease,
celld/store/lease.py): it is asked right before each turn starts, and the gate asks it
before each message leaves. While it says no, the pump waits (the inbox keeps what
arrives) and the messages wait in order; both go on when it allows again, and never if it
does not. The operations a dispatch starts carry the fence with them (`OUTGOING_FENCE`),
so a fetch asks it once more as its bytes are written (celld/isolate/outbound.py).

A host may serve many workflow runs at once (`Tenant`, celld/isolate/tenant.py): each run
is a promise chain in the one isolate, and its messages carry its number `r` both ways.
A message of a run is handled by that run's operations first; its answers, its turn's
end and its share of the turn's CPU go to it alone; a fault reaches every run.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from celld.isolate.gate import PendingWrite
from celld.isolate.inline import InlineTurns, inline_turns
from celld.isolate.isolate import CO_TENANT_STOPPED_REASON, Isolate, IsolateFault
from celld.isolate.outbound import OUTGOING_FENCE
from celld.isolate.tenant import RUN_OPS, Tenant

if TYPE_CHECKING:
    from celld.store.lease import EffectFence

log = logging.getLogger("celld.isolate")

#: An operation handler gets the message and may return a value or an awaitable.
OpHandler = Callable[[dict[str, Any]], Any]


#: How long closing waits for the host operations it cancelled to unwind.
STOP_GRACE_S = 1.0


class HostError(Exception):
    """An error meant for JS: `js_name` becomes the JS error's name."""

    def __init__(self, message: str, js_name: str = "Error") -> None:
        super().__init__(message)
        self.js_name = js_name


class AnswerWithdrawn(Exception):  # noqa: N818 - it is a signal, not an error
    """Raised by an operation whose answer is no longer wanted (the run it served is
    over): nothing is sent back and nothing is logged."""


def error_shape(error: BaseException) -> dict[str, str]:
    """The {name, message} a host exception becomes in JS."""
    name = getattr(error, "js_name", None) or "Error"
    return {"name": name, "message": str(error) or type(error).__name__}


#: How a `Later` ended: ("v", value), ("e", exception) or ("w", None) for withdrawn.
Outcome = tuple[str, Any]


class Later:
    """An answer a host operation gives later, without a task of its own.

    A handler returns a `Later` and settles it from a callback (a commit landing, say)
    with `resolve`, `reject` or `withdraw`; the host posts the answer to JS at that
    moment. A task per request costs several event-loop callbacks (its steps and its
    done callbacks); this costs none.
    """

    __slots__ = ("_outcome", "_sinks")

    def __init__(self) -> None:
        self._outcome: Outcome | None = None
        self._sinks: list[Callable[[Outcome], None]] = []

    @property
    def settled(self) -> bool:
        return self._outcome is not None

    def resolve(self, value: Any) -> None:
        self._settle(("v", value))

    def reject(self, error: Exception) -> None:
        self._settle(("e", error))

    def withdraw(self) -> None:
        """The answer is no longer wanted: nothing is sent (see `AnswerWithdrawn`)."""
        self._settle(("w", None))

    def then(self, sink: Callable[[Outcome], None]) -> None:
        """Call `sink(outcome)` once settled (at once if it already is)."""
        if self._outcome is not None:
            sink(self._outcome)
        else:
            self._sinks.append(sink)

    def _settle(self, outcome: Outcome) -> None:
        if self._outcome is not None:
            return
        self._outcome = outcome
        sinks, self._sinks = self._sinks, []
        for sink in sinks:
            sink(outcome)


def _close_unstarted(work: Any) -> None:
    """An operation's coroutine whose task was cancelled before it ran is closed, not
    left to be collected unawaited."""
    if inspect.iscoroutine(work) and inspect.getcoroutinestate(work) == inspect.CORO_CREATED:
        work.close()


class IsolateHost:
    """Runs the message loop of one isolate."""

    def __init__(
        self,
        isolate: Isolate,
        ops: Mapping[str, OpHandler],
        on_fault: Callable[[IsolateFault], None] | None = None,
    ) -> None:
        self.isolate = isolate
        self.ops = dict(ops)
        self.on_fault = on_fault
        self._inbox: list[dict[str, Any]] = []
        self._pumping = False
        self._in_turn = False  # a batch has been taken and its outbox not yet dispatched
        self._at_boundary: list[Callable[[], None]] = []
        self._pump_task: asyncio.Task[None] | None = None
        self._inline: InlineTurns | None = None  # the loop's inline slices, once used
        self._pump_waiters: list[asyncio.Future[None]] = []  # `_stop` waiting for the pump
        self._tasks: set[asyncio.Task[Any]] = set()
        self._by_ticket: dict[int, tuple[asyncio.Task[Any], Awaitable[Any]]] = {}
        #: answers still to come, with their ticket and the run they are for
        self._laters: dict[Later, tuple[int | None, Tenant | None]] = {}
        #: the runs this host serves, by number (see `Tenant`)
        self.tenants: dict[int, Tenant] = {}
        self._last_r = 0
        #: runs something was delivered to or sent by since their turn callback last ran
        self._touched: dict[Tenant, None] = {}
        #: an answer to a request of no run was delivered: every run counts as touched
        self._touch_all = False
        #: batches of messages taken for a turn, and the last whose turn has ended
        self._taken = 0
        self._ended = 0
        #: host work started by requests of no run (a fetch, a timer), still outstanding
        self._unowned = 0
        #: a run left while such work was outstanding: no new run joins (`remove_tenant`)
        self.draining = False
        #: host operations still working for JS, by op name
        self.pending_ops: dict[str, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        #: Called when the isolate has nothing to run and no host work outstanding.
        self.idle_callback: Callable[[], None] | None = None
        #: Called after each turn that ran the isolate's jobs to the end (not after a
        #: turn that ended its CPU slice with jobs still queued), once its outbox has
        #: been dispatched.
        self.turn_callback: Callable[[], None] | None = None
        #: Called after every turn with the CPU time (ms) it used; an owner charges it
        #: to the work the isolate serves and may set `isolate.fault` to stop it.
        self.cpu_callback: Callable[[float], None] | None = None
        #: Turns a client waits on (a Worker's requests): each starts on the JS thread as
        #: soon as it is asked for and its outbox is dispatched from the thread's answer
        #: (no pump task), and the loop's inline slices of workflow work hold back while
        #: it runs (`InlineTurns.hold`), so it gets the GIL instead of waiting for it.
        self.prompt = False
        #: Set by the owner of a prompt host: whether a batch may run its turn right here,
        #: on the event loop, instead of on the JS thread (asked only while the isolate
        #: has no host work outstanding and nothing on its thread). An inline turn is
        #: stopped at INLINE_LIMIT_MS with `LONG_TURN_REASON`, so the owner says yes only
        #: to work it can start over elsewhere (celld/isolate/worker_pool.py).
        self.prompt_inline: Callable[[list[dict[str, Any]]], bool] | None = None
        #: Called with every message JS sends, as it is dispatched (a Worker's pool tells
        #: from them whether its requests' turns could start over, `WorkerPool._may_inline`).
        self.sent_callback: Callable[[dict[str, Any]], None] | None = None
        #: a prompt host's turns so far: run on the event loop, and handed to the JS thread
        #: (each of those is a crossing to the thread and back; the owner reports them)
        self.turns_here = 0
        self.turns_away = 0
        self._holding = False
        self._closed = False
        #: every message JS sends passes the isolate's output gate (celld/isolate/gate.py)
        self.gate = isolate.gate
        self.gate.attach(self._released, self._condemned, self._unfenced)
        #: operations that only tell the engine what a run does next, and that run's
        #: commit stream: the gate may let them pass ahead of a pending write of the
        #: same stream (rule 3 of celld/isolate/gate.py)
        self.inward_ops: frozenset[str] = frozenset()
        self.inward_stream: object = None
        self._fence: EffectFence | None = None
        self._parked = False  # the pump waits for the fence (it still counts as pumping)

    @property
    def busy(self) -> bool:
        """True while a turn runs or a host operation is still working for JS."""
        return self._pumping or bool(self._tasks) or bool(self._laters) or bool(self.gate.waiting)

    @property
    def outstanding(self) -> int:
        """Host requests still working for JS (tasks and answers still to come)."""
        return len(self._tasks) + len(self._laters)

    def delivered(self, batch: int) -> bool:
        """The turn of the `batch`-th batch of messages has ended."""
        return self._ended >= batch

    def outstanding_for(self, tenant: Tenant) -> int:
        """Host requests of `tenant`'s run still working for JS."""
        laters = sum(1 for _, owner in self._laters.values() if owner is tenant)
        return laters + len(tenant.tasks)

    @property
    def turn_pending(self) -> bool:
        """True while a turn runs or inbound messages wait for one (an answer JS has not
        seen yet)."""
        return self._pumping or bool(self._inbox)

    @property
    def fence(self) -> EffectFence | None:
        """Asked before each turn and each message leaves (see the module's docstring)."""
        return self._fence

    @fence.setter
    def fence(self, fence: EffectFence | None) -> None:
        self._fence = fence
        self.gate.fence_with(fence)

    @property
    def fenced(self) -> bool:
        """True while the fence holds the pump or JS's messages back."""
        return self._parked or (self._fence is not None and not self._fence.allows_effects())

    @property
    def faulted(self) -> bool:
        return self.isolate.fault is not None

    def post(self, message: dict[str, Any]) -> None:
        """Queue an inbound message and make sure a turn will deliver it."""
        if self._closed:
            return
        if self.tenants and "r" not in message:
            self._touch_all = True
        self._inbox.append(message)
        self.kick()

    def _post_for(self, tenant: Tenant | None, message: dict[str, Any]) -> None:
        """Queue an answer for `tenant`'s run (None: for no run in particular)."""
        if tenant is None:
            self.post(message)
            return
        if self._closed or tenant.left:
            return
        tenant.touched = True
        tenant.wanted = self._taken + 1  # the batch that will deliver it
        self._touched[tenant] = None
        self._inbox.append(message)
        self.kick()

    # -- runs sharing the isolate ------------------------------------------------------------

    def add_tenant(self) -> Tenant:
        """A new run in this isolate: its share of the host (see `Tenant`)."""
        self._last_r += 1
        tenant = Tenant(self, self._last_r)
        self.tenants[tenant.r] = tenant
        if self.on_fault is None:
            self.on_fault = self._tenants_fault
        return tenant

    def remove_tenant(self, tenant: Tenant, *, quiet: bool = True) -> None:
        """The run left: nothing more reaches it, JS forgets it (`wf.drop`), and the host
        work it started for the step protocol stops. Work started by no run in particular
        (a fetch or timer of user code: JS cannot say whose) may belong to the run that
        left, and its answer would wake it. A `quiet` run (its run() ended, or it only
        waits for a sleep or an event) is not woken by it in any way that matters: if
        any is outstanding while others stay, the isolate takes no new runs (`draining`)
        and is reset once its last run leaves. A run stopped in the middle (terminated,
        deleted, moved) could be: the isolate is given up and the others start over
        elsewhere (celld/isolate/DECISIONS.md, "runs per isolate")."""
        if tenant.left:
            return
        tenant.left = True
        self.tenants.pop(tenant.r, None)
        self._touched.pop(tenant, None)
        tenant.turn_callback = None
        tenant.cpu_callback = None
        laters = [later for later, (_, owner) in self._laters.items() if owner is tenant]
        for later in laters:
            del self._laters[later]
            later.withdraw()
        current = asyncio.current_task()
        for task in list(tenant.tasks):
            if task is not current:  # (the run may be leaving from one of its own ops)
                task.cancel()
        tenant.pending_ops.clear()
        if not self.tenants or self._closed:
            return
        if self._unowned and not quiet:
            if self.isolate.fault is None:
                self.isolate.fault = IsolateFault(
                    CO_TENANT_STOPPED_REASON, "host work of no run was in flight"
                )
                if not self._pumping:
                    self._fail(self.isolate.fault)
            return
        if self._unowned:
            self.draining = True
        self.post({"k": "wf.drop", "r": tenant.r})

    def _tenants_fault(self, fault: IsolateFault) -> None:
        """A fault reaches every run of the isolate (each decides what it costs it)."""
        fault.tenants = len(self.tenants)
        for tenant in list(self.tenants.values()):
            tenant.hear_fault(fault)

    def _tenants_turn_ended(self) -> None:
        """JS ran its jobs to the end: the runs it touched hear of it."""
        if self._touch_all:
            self._touch_all = False
            touched = list(self.tenants.values())
            self._touched.clear()
        else:
            touched = list(self._touched)
            self._touched.clear()
        ended = self._ended
        for tenant in touched:
            if tenant.wanted > ended:
                # posted to during this turn's dispatch: the next turn delivers it
                self._touched[tenant] = None
            else:
                tenant.touched = False
            if tenant.turn_callback is not None:
                tenant.turn_callback()

    def _charge_tenants(self, ms: float) -> None:
        """A turn's CPU, shared evenly by the runs it touched."""
        touched = list(self.tenants.values()) if self._touch_all else list(self._touched)
        if not touched:
            return
        share = ms / len(touched)
        for tenant in touched:
            if tenant.cpu_callback is not None:
                tenant.cpu_callback(share)

    def queued(self, message: dict[str, Any]) -> bool:
        """True while `message` (posted earlier) waits for a turn to deliver it."""
        return any(m is message for m in self._inbox)

    def take_undelivered(self, kind: str) -> list[dict[str, Any]]:
        """Take back the queued inbound messages of `kind` that JS has not seen yet (to
        hand them to another isolate while this one is stuck in a long turn)."""
        taken = [m for m in self._inbox if m.get("k") == kind]
        if taken:
            self._inbox = [m for m in self._inbox if m.get("k") != kind]
        return taken

    def kick(self) -> None:
        """Make sure a turn runs soon, even with nothing to deliver."""
        if not self._pumping and not self.faulted:
            self._pumping = True
            self._idle.clear()
            self._pump_soon()

    def _pump_soon(self) -> None:
        """Queue the pump: an isolate turning on the event loop is pumped one turn at a
        time from the inline slices (no task, no future per turn); others by a task that
        awaits each turn on the isolate's JS thread."""
        if self.isolate.turns_inline:
            self._slices().call(self._pump_inline)
        elif self.prompt:
            self._prompt_turn()
        else:
            self._pump_task = asyncio.get_running_loop().create_task(self._pump())

    def at_turn_boundary(self, callback: Callable[[], None]) -> None:
        """Run `callback` between two turns: at once if no turn is in flight, otherwise as
        soon as the current turn's messages are dispatched and before the next turn takes
        its inbox, so that whatever it posts is the first thing JS sees next. Lifecycle
        changes that alter what JS may do on its own (a pause) take effect here."""
        if not self._in_turn:
            callback()
            return
        self._at_boundary.append(callback)

    def after_next_turn(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the next turn's messages are dispatched (or when the pump
        stops before one: a fault; at once if no turn will follow). A run's owner holds
        work back until JS has had its first turn with it."""
        if self._no_turn_follows:
            callback()
            return
        self._at_boundary.append(callback)

    def after_turn_seeing(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the turn that delivers what is posted now has been
        dispatched: the next turn's end, or the one after it when called while a turn's
        outbox is being dispatched (what is posted now waits for the turn after it)."""
        if self._no_turn_follows:
            callback()
            return
        if not self._in_turn:
            self._at_boundary.append(callback)
            return

        def at_this_turns_end() -> None:
            if self._closed or self.faulted:
                callback()  # no turn follows
            else:
                self._at_boundary.append(callback)

        self._at_boundary.append(at_this_turns_end)

    # -- the fence ------------------------------------------------------------------------

    def _fenced_now(self) -> bool:
        """Before a turn: True (and the pump parks, still counting as pumping) if the
        fence forbids turns now; the gate, which watches the fence, starts it again."""
        if self._fence is None or not self.gate.fenced():
            return False
        self._parked = True
        return True

    def _unfenced(self) -> None:
        """The fence allows again (the gate sent what waited): a parked pump goes on."""
        if self._parked and not self._closed:
            self._parked = False
            if self.faulted:
                self._pump_ended()
            else:
                self._pump_soon()

    @property
    def _no_turn_follows(self) -> bool:
        """The isolate will never turn again and no turn in flight is left to end: it is
        closed, or faulted after its last turn (the fault ran the boundary callbacks
        then). A callback that waits for a turn boundary runs at once instead of waiting
        for ever: a run joining an isolate that is condemned while it reads its journal
        must not hold its writes back for a turn that never comes."""
        return (self._closed or self.faulted) and not self._pumping

    def _run_boundary(self) -> None:
        callbacks, self._at_boundary = self._at_boundary, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - one failing callback must not stop the pump
                log.exception("turn-boundary callback failed")

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def _pump(self) -> None:
        try:
            while True:
                if self._fenced_now():
                    return
                batch, self._inbox = self._inbox, []
                self._taken += 1
                self._in_turn = True
                try:
                    outbox = await self.isolate.turn(batch)
                except Exception as error:  # noqa: BLE001 - a fault, or the bridge broke
                    self._turn_failed(error)
                    return
                if not self._turn_done(outbox):
                    return
        finally:
            if not self._parked:
                self._pump_ended()

    def _slices(self) -> InlineTurns:
        """The loop's inline slices, looked up once, on first use."""
        if self._inline is None:
            self._inline = inline_turns()
        return self._inline

    def _pump_inline(self) -> None:
        """One turn of the pump, run in an inline slice; queued again (behind the other
        isolates' turns) while there is more to do."""
        if not self.isolate.turns_inline:  # moved off the loop meanwhile
            self._pump_task = asyncio.get_running_loop().create_task(self._pump())
            return
        if self._fenced_now():
            return
        again = False
        try:
            batch, self._inbox = self._inbox, []
            self._taken += 1
            self._in_turn = True
            try:
                outbox = self.isolate.turn_now(batch)
            except Exception as error:  # noqa: BLE001 - a fault, or the bridge broke
                self._turn_failed(error)
                return
            again = self._turn_done(outbox)
        finally:
            if again:
                self._pump_soon()
            else:
                self._pump_ended()

    def _prompt_turn(self) -> None:
        """One turn of a prompt host, started now: on the event loop when its owner says
        the batch may turn there (`prompt_inline`), else on its JS thread (see `prompt`)."""
        if self._fenced_now():
            self._release_hold()
            return
        batch, self._inbox = self._inbox, []
        if self._may_turn_inline(batch):
            self._release_hold()
            # In a context of its own, as a turn's end on the JS thread is called back:
            # what its outbox starts must not inherit the poster's (an outgoing fence).
            contextvars.Context().run(self._prompt_turn_here, batch)
            return
        if not self._holding:
            self._holding = True
            self._slices().hold()
        self._taken += 1
        self._in_turn = True
        self.turns_away += 1
        self.isolate.turn_soon(batch, self._prompt_turn_done)

    def _prompt_turn_here(self, batch: list[dict[str, Any]]) -> None:
        """`batch`'s turn run here, on the event loop (see `prompt_inline`). What goes
        wrong after the turn is logged, as the loop logs a failing callback: the poster
        is not the one to hear of it."""
        self._taken += 1
        self._in_turn = True
        self.turns_here += 1
        try:
            outbox = self.isolate.turn_now(batch)
        except Exception as error:  # noqa: BLE001 - a fault, or the bridge broke
            outbox, failure = None, error
        else:
            failure = None
        try:
            self._prompt_turn_done(outbox, failure)
        except Exception:
            log.exception("the end of a Worker turn run on the event loop failed")

    def _may_turn_inline(self, batch: list[dict[str, Any]]) -> bool:
        """The owner lets `batch` turn on the loop, and nothing else of the isolate's is
        under way: no host work outstanding, nothing held by the gate, nothing of it on
        its JS thread."""
        return (
            self.prompt_inline is not None
            and not self._tasks
            and not self._laters
            and not self.gate.waiting
            and self.isolate.may_turn_here
            and self.prompt_inline(batch)
        )

    def _release_hold(self) -> None:
        if self._holding and self._inline is not None:
            self._holding = False
            self._inline.release()

    def _prompt_turn_done(
        self, outbox: list[dict[str, Any]] | None, error: BaseException | None
    ) -> None:
        again = False
        try:
            if error is not None:
                if not isinstance(error, Exception):
                    raise error
                self._turn_failed(error)
                return
            assert outbox is not None
            again = self._turn_done(outbox)
        finally:
            if again:
                self._prompt_turn()
            else:
                self._release_hold()
                self._pump_ended()

    def _turn_failed(self, error: Exception) -> None:
        self._ended = self._taken
        if not isinstance(error, IsolateFault):
            log.error("a turn failed outside JS; the isolate is dropped", exc_info=error)
            error = IsolateFault("isolate failure", f"{type(error).__name__}: {error}")
            self.isolate.fault = error
        self._fail(error)

    def _turn_done(self, outbox: list[dict[str, Any]]) -> bool:
        """Send a turn's outbox through the gate and tell the owner; True if another turn
        must follow. The owner hears of the turn's end once all of it is dispatched."""
        self._ended = self._taken
        gate = self.gate
        for message in outbox:
            stream = self._stream_of(message)
            accepted = gate.accepts
            passed = gate.send(message, stream)
            if accepted and stream is not None and message.get("local") is True:
                # JS resolved a step itself (celld/engine/local.py) and went on: what it
                # sent after this waits for the write that records it, told to the gate
                # here, at the report's place in the outbox (rule 1 of gate.py)
                pending = PendingWrite(stream)
                gate.told(pending)
                message["pending"] = pending
            if passed:
                self._dispatch(message)
        if self.tenants:
            self._charge_tenants(self.isolate.last_turn_cpu_ms)
            if not self.isolate.runnable and not gate.waiting:
                self._tenants_turn_ended()
        if self.cpu_callback is not None:
            self.cpu_callback(self.isolate.last_turn_cpu_ms)
        if self.turn_callback is not None and not self.isolate.runnable and not gate.waiting:
            self.turn_callback()
        self._in_turn = False
        self._run_boundary()
        if self.faulted:  # an owner's callback condemned the isolate
            try:
                if self.on_fault is not None and self.isolate.fault is not None:
                    self.on_fault(self.isolate.fault)
            finally:
                self._inbox.clear()
            return False
        # A turn that ended its slice with jobs left runs again, after the other
        # isolates queued on the same thread (or the loop's slices) have had theirs.
        return bool(self._inbox) or self.isolate.runnable

    def _stream_of(self, message: dict[str, Any]) -> object:
        r = message.get("r") if message.get("op") in RUN_OPS else None
        if r is not None:
            tenant = self.tenants.get(r)
            if tenant is None or message.get("op") not in tenant.inward_ops:
                return None
            if not tenant.touched:
                tenant.touched = True
                self._touched[tenant] = None
            return tenant.inward_stream
        return self.inward_stream if message.get("op") in self.inward_ops else None

    def _released(self, message: dict[str, Any]) -> None:
        """A message the gate held goes on (the writes it waited for landed); the owner
        hears of the turn's end once the last one is dispatched."""
        if self._closed or self.faulted:
            return
        self._dispatch(message)
        if not self.gate.waiting and not self._in_turn and not self.isolate.runnable:
            if self.tenants:
                self._tenants_turn_ended()
            if self.turn_callback is not None:
                self.turn_callback()
        self._maybe_idle()

    def _condemned(self, _: BaseException) -> None:
        """A write this isolate was told of failed: the gate dropped what waited and the
        isolate is faulted. A turn in flight ends with the fault; otherwise the owner
        hears of it now."""
        if self._closed or self._pumping or self.isolate.fault is None:
            return
        self._fail(self.isolate.fault)

    def _pump_ended(self) -> None:
        self._pumping = False
        self._in_turn = False
        self._run_boundary()
        self._idle.set()
        waiters, self._pump_waiters = self._pump_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        if (
            not self._tasks
            and not self._laters
            and not self.gate.waiting
            and self.idle_callback is not None
        ):
            self.idle_callback()

    def _fail(self, fault: IsolateFault) -> None:
        """The owner hears of the fault while what JS never saw is still queued (it may
        take such messages back, see `take_undelivered`); the rest is dropped."""
        self._in_turn = False
        self._run_boundary()
        try:
            if self.on_fault is not None:
                self.on_fault(fault)
        finally:
            self._inbox.clear()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if self._fence is None:
            self._dispatch_now(message)
            return
        token = OUTGOING_FENCE.set(self._fence)  # (tasks started here copy the context)
        try:
            self._dispatch_now(message)
        finally:
            OUTGOING_FENCE.reset(token)

    def _dispatch_now(self, message: dict[str, Any]) -> None:
        if self.sent_callback is not None:
            self.sent_callback(message)
        op = message.get("op")
        ticket = message.get("t")
        if op == "cancel":
            # JS no longer wants the answer to request `of` (a cleared timer, say): stop
            # the work so it neither runs on nor counts as pending host work.
            of = message.get("of")
            for later, (later_ticket, _) in list(self._laters.items()):
                if later_ticket is not None and later_ticket == of:
                    later.withdraw()
            pending = self._by_ticket.pop(of, None)
            if pending is not None:
                task, work = pending
                task.cancel()
                # Cancelled before it started: the task never awaits the work, so close it.
                if inspect.iscoroutine(work) and (
                    inspect.getcoroutinestate(work) == inspect.CORO_CREATED
                ):
                    work.close()
            return
        tenant: Tenant | None = None
        r = message.get("r") if op in RUN_OPS else None
        handler: OpHandler | None = None
        if r is not None and isinstance(op, str):
            tenant = self.tenants.get(r)
            if tenant is None:
                # the run left this isolate: what it still sends is dropped, and a result
                # it resolved itself was never written, so nothing may leave after it
                pending = message.get("pending")
                if isinstance(pending, PendingWrite):
                    pending.failed(RuntimeError("a run left before its local result was written"))
                return
            handler = tenant.ops.get(op)
        if handler is None:
            handler = self.ops.get(op) if isinstance(op, str) else None
        if handler is None:
            error = HostError(f"celld has no host operation named {op!r}")
            if ticket is not None:
                self._post_for(tenant, {"k": "settle", "t": ticket, "e": error_shape(error)})
            else:
                log.error("%s", error)
            return
        try:
            result = handler(message)
        except Exception as error:  # noqa: BLE001 - every failure is reported to JS
            self._settle_error(ticket, op, error, tenant)
            return
        if result is None:  # (a report: nothing more to do for most messages)
            if ticket is not None:
                self._post_for(tenant, {"k": "settle", "t": ticket, "v": None})
        elif isinstance(result, Later):
            self._adopt(ticket, op, result, tenant)
        elif isinstance(result, asyncio.Future) and result.done() and not result.cancelled():
            # answered already (a handler's fast path): no task, no trip through the loop
            error = result.exception()
            if error is not None:
                self._settle_error(ticket, op, error, tenant)  # type: ignore[arg-type]
            elif ticket is not None:
                self._post_for(tenant, {"k": "settle", "t": ticket, "v": result.result()})
        elif inspect.isawaitable(result):
            task = asyncio.get_running_loop().create_task(self._await(ticket, op, result, tenant))
            self._tasks.add(task)
            self._count_op(op, tenant, 1)
            if tenant is not None:
                tenant.tasks.add(task)
            # one done callback (each is a pass through the event loop of its own)
            task.add_done_callback(
                lambda t, o=op, k=ticket, w=result, n=tenant: self._op_task_done(t, o, k, w, n)
            )
            if ticket is not None:
                self._by_ticket[ticket] = (task, result)
        elif ticket is not None:
            self._post_for(tenant, {"k": "settle", "t": ticket, "v": result})

    def _count_op(self, op: str, tenant: Tenant | None, step: int) -> None:
        """Count host work in flight for JS (by op, and for its run or for no run)."""
        counts = self.pending_ops if tenant is None else tenant.pending_ops
        left = counts.get(op, 0) + step
        if left > 0:
            counts[op] = left
        else:
            counts.pop(op, None)
        if tenant is None and self.tenants is not None:
            self._unowned = max(0, self._unowned + step)

    def _adopt(self, ticket: int | None, op: str, later: Later, tenant: Tenant | None) -> None:
        """Count `later` as host work for JS until it settles, then answer with it."""
        if later.settled:
            self._answer(ticket, op, later, tenant)
            return
        self._laters[later] = (ticket, tenant)
        self._count_op(op, tenant, 1)

        def settled(_: Outcome) -> None:
            if later not in self._laters:
                return  # the host stopped, or its run left
            del self._laters[later]
            self._count_op(op, tenant, -1)
            self._answer(ticket, op, later, tenant)
            self._maybe_idle()

        later.then(settled)

    def _answer(self, ticket: int | None, op: str, later: Later, tenant: Tenant | None) -> None:
        kind, value = later._outcome or ("w", None)
        if kind == "e":
            self._settle_error(ticket, op, value, tenant)
        elif kind == "v" and ticket is not None and not self.faulted:
            self._post_for(tenant, {"k": "settle", "t": ticket, "v": value})

    def _op_task_done(
        self,
        task: asyncio.Task[Any],
        op: str,
        ticket: int | None,
        work: Awaitable[Any],
        tenant: Tenant | None,
    ) -> None:
        """An operation's task ended: it no longer counts as host work for JS."""
        if tenant is None or not tenant.left:
            self._count_op(op, tenant, -1)
        if tenant is not None:
            tenant.tasks.discard(task)
        if ticket is not None:
            self._by_ticket.pop(ticket, None)
        _close_unstarted(work)
        self._task_done(task)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        self._maybe_idle()

    def _maybe_idle(self) -> None:
        """No turn runs and no host work is outstanding: tell the owner."""
        idle = not self._tasks and not self._laters and not self._pumping and not self.gate.waiting
        if idle and self.idle_callback is not None:
            self.idle_callback()

    async def _await(
        self, ticket: int | None, op: str, awaitable: Awaitable[Any], tenant: Tenant | None
    ) -> None:
        try:
            value = await awaitable
        except asyncio.CancelledError:
            raise
        except AnswerWithdrawn:
            return
        except Exception as error:  # noqa: BLE001 - every failure is reported to JS
            self._settle_error(ticket, op, error, tenant)
            return
        if ticket is not None and not self.faulted:
            # The task's work is over: it no longer counts as outstanding, so the answer's
            # turn may run on the loop (`_may_turn_inline`) when it is posted, right here.
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]
            self._post_for(tenant, {"k": "settle", "t": ticket, "v": value})

    def _settle_error(
        self, ticket: int | None, op: str, error: Exception, tenant: Tenant | None = None
    ) -> None:
        if not isinstance(error, HostError):
            log.warning("host operation %s failed: %r", op, error)
        if ticket is not None and not self.faulted:
            self._post_for(tenant, {"k": "settle", "t": ticket, "e": error_shape(error)})

    async def close(self) -> None:
        """Stop serving the isolate and free it. Safe to call from one of its own op tasks:
        that task is left to finish (its answer is dropped)."""
        await self._stop()
        await self.isolate.close()

    async def detach(self) -> Isolate:
        """Stop serving the isolate but keep it alive (to be reused by another host). An
        isolate whose built-ins user code replaced is marked faulted on the way out, so no
        warm pool hands it to someone else: a last turn asks JS (`audit`, js/host.js),
        which costs no trip to a thread for an isolate turning on the event loop."""
        await self._stop()
        if self.isolate.fault is None and not self.isolate.tainted:
            try:
                await self.isolate.turn([{"k": "audit"}])
            except IsolateFault:
                pass  # turn() recorded it: the isolate is not reused
            except Exception as error:  # noqa: BLE001 - the bridge broke: not reused either
                self.isolate.fault = IsolateFault("isolate failure", f"{error!r}")
        if self.isolate.tainted and self.isolate.fault is None:
            self.isolate.fault = IsolateFault("built-ins were modified", "")
        return self.isolate

    async def _stop(self) -> None:
        self._closed = True
        self.gate.detach()
        if self._parked:  # a pump waiting for the fence ends here
            self._parked = False
            self._pump_ended()
        self.idle_callback = None
        self.turn_callback = None
        self.cpu_callback = None
        laters, self._laters = self._laters, {}
        for later in laters:
            later.withdraw()
        current = asyncio.current_task()
        cancelled = [task for task in self._tasks if task is not current]
        for task in cancelled:
            task.cancel()
        if cancelled:
            # Let them unwind now, while what they use is still open: a task left pending
            # when the loop ends is destroyed mid-await (and logged as such at shutdown).
            await asyncio.wait(cancelled, timeout=STOP_GRACE_S)
        if (
            self._pump_task is not None
            and self._pump_task is not current
            and not self._pump_task.done()
        ):
            try:
                await self._pump_task
            except Exception:  # noqa: BLE001 - the isolate is going away either way
                log.debug("pump ended with an error while closing", exc_info=True)
        elif self._pumping:  # pumped from the inline slices: its queued turn runs first
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._pump_waiters.append(waiter)
            await waiter
