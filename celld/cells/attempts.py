"""Time and CPU of the attempts a run has in flight, kept by the host.

Every attempt handed to JS gets a deadline (the engine's `Run.timeout_ms`), and one
timer per run waits for the earliest: a handle per attempt would cost a heap entry each.
Past it, an attempt still in flight is told (`wf.timeout`): JS abandons it and reports it
as timed out. Nothing is armed in JS per attempt.

Each attempt in flight is also charged an even share of every turn's CPU of its isolate
(its own budget is `limits.cpu_ms`, counted over all its turns and jobs, microtasks
included); one past it condemns the isolate, which fails the attempts it was running
(they are retried on a fresh isolate).
"""

from __future__ import annotations

from collections.abc import Callable

from celld.cells.clock import Cancellable, Clock
from celld.engine import Machine, Run, StepKey
from celld.isolate.isolate import CPU_LIMIT_REASON, IsolateFault
from celld.isolate.tenant import Tenant


class AttemptWatch:
    def __init__(
        self, machine: Machine, host: Tenant, clock: Clock, now: Callable[[], int]
    ) -> None:
        self.machine = machine
        self.host = host
        self.clock = clock
        self.now = now
        #: deadline (ms) and attempt number of each attempt in flight
        self._deadlines: dict[StepKey, tuple[int, int]] = {}
        self._timer: Cancellable | None = None
        self._timer_at: int | None = None
        #: CPU charged to each attempt in flight (ms)
        self._cpu: dict[StepKey, float] = {}

    def arm(self, key: StepKey, decision: Run) -> None:
        """`decision`'s attempt of `key` is handed to JS now."""
        deadline = self.now() + decision.timeout_ms
        self._deadlines[key] = (deadline, decision.attempt)
        self._cpu[key] = 0.0
        if self._timer_at is None or deadline < self._timer_at:
            self._arm_timer(deadline)

    def reported(self, key: StepKey) -> None:
        """An attempt of `key` reported back: its deadline and CPU account go (the timer
        finds it gone)."""
        self._deadlines.pop(key, None)
        self._cpu.pop(key, None)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None
        self._deadlines.clear()
        self._cpu.clear()

    def charge(self, ms: float) -> None:
        """Charge a turn's CPU evenly to the attempts in flight."""
        if not self._cpu:
            return
        share = ms / len(self._cpu)
        isolate = self.host.isolate
        limit = isolate.limits.cpu_ms
        for key in self._cpu:
            self._cpu[key] += share
            if self._cpu[key] > limit and isolate.fault is None:
                fault = IsolateFault(
                    CPU_LIMIT_REASON,
                    f"step {key.name!r} used {self._cpu[key]:.0f} ms of CPU "
                    f"(limits.cpu_ms is {limit})",
                )
                fault.culprit = self.host  # the other runs of the isolate only move
                isolate.fault = fault

    def _arm_timer(self, when: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self.clock.call_at(when, self._due)

    def _due(self) -> None:
        """Tell JS of every attempt still in flight past its timeout; wait for the next."""
        self._timer = self._timer_at = None
        now = self.now()
        due = [(key, attempt) for key, (at, attempt) in self._deadlines.items() if at <= now]
        for key, attempt in due:
            del self._deadlines[key]
            in_flight = self.machine.attempts_in_flight().get(
                key
            ) == attempt or self.machine.rollback_in_flight() == (key, attempt)
            if in_flight:
                self.host.post(
                    {"k": "wf.timeout", "g": self.machine.generation, "key": str(key),
                     "attempt": attempt}
                )  # fmt: skip
        if self._deadlines:
            self._arm_timer(min(at for at, _ in self._deadlines.values()))
