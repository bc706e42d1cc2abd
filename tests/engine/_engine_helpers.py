"""Shared helpers for the engine tests: a dict-backed fake store and a started machine."""

from __future__ import annotations

import copy

from celld.engine import Changes, Machine, StepKey

T0 = 1_700_000_000_000


class FakeStore:
    """Applies :class:`Changes` the way the real store must (wipe, deletes, upserts)."""

    def __init__(self) -> None:
        self.instance = None
        self.steps: dict[StepKey, object] = {}
        self.events: dict[int, object] = {}
        self.commits = 0

    def commit(self, changes: Changes) -> None:
        self.commits += 1
        if changes.wiped:
            self.steps.clear()
            self.events.clear()
        for key in changes.deleted_steps:
            self.steps.pop(key, None)
        for seq in changes.deleted_events:
            self.events.pop(seq, None)
        if changes.instance is not None:
            self.instance = copy.copy(changes.instance)
        for row in changes.steps:
            self.steps[row.key] = copy.copy(row)
        for event in changes.events:
            self.events[event.seq] = copy.copy(event)

    def load(self, step_limit: int = 10_000) -> Machine:
        return Machine(
            copy.copy(self.instance),
            [copy.copy(r) for r in self.steps.values()],
            [copy.copy(e) for e in self.events.values()],
            step_limit=step_limit,
        )


def new_machine(
    now: int = T0, *, params: str = "{}", start: bool = True, step_limit: int = 10_000, **kw
) -> Machine:
    m = Machine.create("wf", "inst-1", params, now, step_limit=step_limit, **kw)
    if start:
        m.start_run(now)
    return m


def do_key(name: str, count: int = 1) -> StepKey:
    return StepKey("do", name, count)
