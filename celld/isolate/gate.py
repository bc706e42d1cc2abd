"""The output gate: nothing leaves an isolate ahead of a write it has been told of.

celld may tell JS a result before the write that records it has landed (a step's result
answered ahead of its commit: celld/cells/run.py). From that moment JS can act on the
result: send it in a `fetch`, store it in a KV namespace, log it, keep it in module
state that a later run of the same isolate reads. If the process died before the write
landed, the step would run again and draw a different result, and the outside world
would hold a value the journal contradicts. The gate makes that impossible, for every
message of every caller, in this one place:

1. Whoever tells an isolate something before it is durable registers the write with
   the isolate's gate first (`told(pending)`), where `pending` is settled by the commit
   that makes it durable (`PendingWrite.landed` / `PendingWrite.failed`).
2. Every message the isolate sends goes through `send`. While any write the isolate has
   been told of is still pending, the message waits in the gate, behind every message
   that waits already (order is kept). Once every write told before the message was
   sent has landed, it goes on.
   A run may also tell itself: JS resolves a step with its own value where the engine's
   rules allow (celld/engine/local.py). The host then registers the write at the place
   of that report among the messages the turn sent (celld/isolate/host.py, `_turn_done`),
   so everything sent after the report waits for it as if it had been told before.
3. A message that only tells the engine what a run does next (a step protocol message)
   may pass at once, but only when nothing waits ahead of it and every pending write
   belongs to the same commit stream (the same instance) as the run it is for: what it
   changes is written by that instance's later commits, which land after the earlier
   ones, and its answer comes back only once they have.
4. A write that fails never becomes durable: what waits on it is dropped, and the
   isolate is condemned (its memory may hold the lost result), so it is never handed
   to another run, request or instance again.
5. While the fence of the run the isolate serves says no (the node's lease lapsed,
   celld/store/lease.py), nothing leaves either: messages wait in order until it allows
   again, and for good if it never does (a fence from an older lease never allows again).
6. The gate belongs to the isolate, not to the run or request it serves: an isolate
   handed to another run, or serving several, carries its pending writes along, and
   what the next user sends waits for them too. Messages still waiting when their
   sender is detached are dropped with it, and so is whatever a turn still under way
   then sends afterwards (the run or request that sent them is over: a run dropped
   after a failed commit must not report a result that will run again).

What is not registered, because no crash can make the journal contradict it: the
answer to a step's first attempt (attempt starts are not written; a crash runs it
again, as before) and a sleep or retry delay that came due (a crash leaves its row with
the deadline past, and the replay decides the same way).

Tests: tests/isolate/test_gate.py (the rules, attacked one by one) and
tests/e2e/test_effects_after_commits.py (a recorder that kills celld the moment an
effect arrives).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celld.store.lease import EffectFence

#: Where a message goes once the gate lets it through.
Sink = Callable[[dict[str, Any]], None]


class PendingWrite:
    """A write an isolate was told of before it landed; settled by that write's commit."""

    __slots__ = ("stream", "number", "_gate", "_state")

    def __init__(self, stream: object) -> None:
        #: the commit stream (an instance's cell) whose writes land in order
        self.stream = stream
        self.number = 0  # given by the gate it is told to
        self._gate: OutputGate | None = None
        self._state = "pending"

    @property
    def settled(self) -> bool:
        return self._state != "pending"

    def landed(self) -> None:
        """The write is durable."""
        self._settle("landed", None)

    def failed(self, error: BaseException) -> None:
        """The write will never be durable."""
        self._settle("failed", error)

    def _settle(self, state: str, error: BaseException | None) -> None:
        if self._state != "pending":
            return
        self._state = state
        gate, self._gate = self._gate, None
        if gate is not None:
            gate._settled(self, error)


class OutputGate:
    """One isolate's gate (see the module docstring for its rules)."""

    __slots__ = (
        "_pending", "_told", "_waiting", "_sink", "_on_condemned", "_condemn_isolate",
        "condemned", "_fence", "_unsubscribe", "_on_unfenced",
    )  # fmt: skip

    def __init__(self, condemn_isolate: Callable[[BaseException], None] | None = None) -> None:
        #: marks the isolate unusable when a write it was told of fails (see rule 4)
        self._condemn_isolate = condemn_isolate
        self._pending: dict[int, PendingWrite] = {}  # told and not landed yet, by number
        self._told = 0  # numbers given so far
        #: messages waiting, each with the highest number told before it was sent
        self._waiting: deque[tuple[int, dict[str, Any]]] = deque()
        self._sink: Sink | None = None
        self._on_condemned: Callable[[BaseException], None] | None = None
        #: a write this isolate was told of failed: it must never be used again
        self.condemned: BaseException | None = None
        self._fence: EffectFence | None = None  # rule 5
        self._unsubscribe: Callable[[], None] | None = None
        self._on_unfenced: Callable[[], None] | None = None

    # -- who is told what ----------------------------------------------------------------

    def told(self, pending: PendingWrite) -> None:
        """The isolate is about to be told something that `pending`'s write records."""
        if pending.settled:
            return
        self._told += 1
        pending.number = self._told
        pending._gate = self
        self._pending[pending.number] = pending

    @property
    def open(self) -> bool:
        """Nothing is pending and nothing waits: every message goes straight through."""
        return not self._pending and not self._waiting

    @property
    def accepts(self) -> bool:
        """A message sent now is let through or kept (not dropped: rules 4 and 6)."""
        return self.condemned is None and self._sink is not None

    @property
    def waiting(self) -> int:
        """Messages held back right now."""
        return len(self._waiting)

    # -- who sends -----------------------------------------------------------------------

    def attach(
        self,
        sink: Sink,
        on_condemned: Callable[[BaseException], None],
        on_unfenced: Callable[[], None] | None = None,
    ) -> None:
        """The host serving the isolate now: released messages go to `sink`, and it hears
        of a failed write at once (`on_condemned`)."""
        self._sink = sink
        self._on_condemned = on_condemned
        self._on_unfenced = on_unfenced

    def detach(self) -> int:
        """The host stops serving the isolate: what its senders left waiting is dropped
        (their run or request is over). PendingWrite writes stay: the next user waits for them.
        Returns how many messages were dropped."""
        dropped = len(self._waiting)
        self._waiting.clear()
        self._sink = None
        self._on_condemned = None
        self._on_unfenced = None
        self.fence_with(None)
        return dropped

    def fence_with(self, fence: EffectFence | None) -> None:
        """The lease fence of the run the isolate serves now (rule 5); None: no fence."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._fence = fence

    def fenced(self) -> bool:
        """The fence says no now: nothing leaves, and the host's turns wait too. Once it
        allows again, what waits goes on and the host hears of it (`on_unfenced`)."""
        fence = self._fence
        if fence is None or fence.allows_effects():
            return False
        if self._unsubscribe is None:
            self._unsubscribe = fence.on_change(self._fence_changed)
        return True

    def _fence_changed(self, allowed: bool) -> None:
        if allowed and self._fence is not None and self._fence.allows_effects():
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
            self._release()
            if self._on_unfenced is not None:
                self._on_unfenced()

    def send(self, message: dict[str, Any], inward_stream: object = None) -> bool:
        """Let `message` through now (True: the caller dispatches it) or keep it until the
        writes told before it have landed (False: it reaches the sink later).

        `inward_stream`: the message only tells the engine what a run does next, and that
        run's writes are this commit stream (rule 3)."""
        if self.condemned is not None or self._sink is None:
            return False  # dropped: a condemned isolate, or its sender is gone (rule 6)
        if not self.fenced():
            if not self._pending and not self._waiting:
                return True
            if (
                inward_stream is not None
                and not self._waiting
                and all(p.stream is inward_stream for p in self._pending.values())
            ):
                return True
        self._waiting.append((self._told, message))
        return False

    # -- writes landing ----------------------------------------------------------------------

    def _settled(self, pending: PendingWrite, error: BaseException | None) -> None:
        del self._pending[pending.number]
        if error is not None:
            self._condemn(error)
            return
        self._release()

    def _release(self) -> None:
        """Send every waiting message whose writes have all landed, in order."""
        oldest = min(self._pending) if self._pending else None
        while self._waiting and (oldest is None or self._waiting[0][0] < oldest):
            if self.fenced():
                return  # `_fence_changed` goes on once the lease allows again
            _, message = self._waiting.popleft()
            if self._sink is not None:
                self._sink(message)
            if self.condemned is not None:
                return

    def _condemn(self, error: BaseException) -> None:
        self.condemned = error
        self._waiting.clear()
        if self._condemn_isolate is not None:
            self._condemn_isolate(error)
        callback = self._on_condemned
        if callback is not None:
            callback(error)
