"""Rule 15: replay is deterministic.

A simulated JS side runs random sequential programs (step.do with scripted failures, sleeps,
waits with events from a fixed outside schedule) against the machine, committing every change
to a fake store. At random suspends and in-flight attempts it "crashes": the machine is thrown
away, rebuilt from the store and the program replays from the top with the journal. Whatever
the crash pattern, every step's outcome must equal the crash-free run's, and a machine rebuilt
after completion must answer every call of the program with the same outcome.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from _engine_helpers import T0, FakeStore

from celld.engine import (
    ErrorInfo,
    Fail,
    Machine,
    Reject,
    Resolve,
    Run,
    Status,
    StepKey,
    Suspend,
)


@dataclass
class Op:
    kind: str  # do | sleep | wait
    name: str
    fails: int = 0  # do: attempts that fail before success
    config: dict | None = None
    ms: int = 0  # sleep duration / wait timeout
    event_type: str = "t"


@dataclass
class World:
    """The outside world: events sent at fixed times, each sent exactly once."""

    schedule: list[tuple[int, str, str]] = field(default_factory=list)
    sent: int = 0

    def next_time(self) -> int | None:
        return self.schedule[self.sent][0] if self.sent < len(self.schedule) else None


def random_program(rng: random.Random) -> tuple[list[Op], World]:
    ops = []
    names = ["a", "b", "c"]
    for _ in range(rng.randint(3, 9)):
        kind = rng.choice(["do", "do", "sleep", "wait"])
        name = rng.choice(names)
        if kind == "do":
            limit = rng.randint(0, 3)
            backoff = rng.choice(["constant", "linear", "exponential"])
            ops.append(
                Op(
                    "do",
                    name,
                    fails=rng.randint(0, 4),
                    config={
                        "retries": {
                            "limit": limit,
                            "delay": rng.choice([0, 500, 2000]),
                            "backoff": backoff,
                        }
                    },
                )  # fmt: skip
            )
        elif kind == "sleep":
            ops.append(Op("sleep", name, ms=rng.choice([0, 1000, 60_000])))
        else:
            ops.append(Op("wait", name, ms=rng.choice([1000, 30_000]), event_type="t"))
    times = sorted(T0 + rng.randint(0, 200_000) for _ in range(rng.randint(0, 4)))
    world = World([(t, "t", json.dumps(f"event@{t}")) for t in times])
    return ops, world


def outcome(decision) -> tuple:
    if isinstance(decision, Resolve):
        return ("value", decision.value)
    assert isinstance(decision, Reject), decision
    return ("error", decision.error.name, decision.error.message)


def journal_outcome(entry) -> tuple:
    kind, data = entry
    if kind == "value":
        return ("value", data)
    return ("error", data.name, data.message)


class Crash(Exception):
    pass


class Sim:
    def __init__(self, ops, world, rng: random.Random | None, crash_p: float = 0.0):
        self.ops, self.world, self.rng, self.crash_p = ops, world, rng, crash_p
        self.store = FakeStore()
        self.now = T0
        self.crashes = 0
        m = Machine.create("wf", "p", "{}", T0)
        self.store.commit(m.take_changes())

    def crash_now(self) -> bool:
        return self.rng is not None and self.rng.random() < self.crash_p

    def commit(self, m):
        self.store.commit(m.take_changes())

    def advance(self, m: Machine | None, until: int | None) -> list:
        """Move time to the next thing that happens (an event or ``until``)."""
        nxt = self.world.next_time()
        if nxt is not None and (until is None or nxt < until):
            self.now = max(self.now, nxt)
            _, type_, payload = self.world.schedule[self.world.sent]
            self.world.sent += 1
            target = m if m is not None else self.store.load()
            out = target.send_event(type_, payload, self.now)
            self.commit(target)
            return out if m is not None else []
        assert until is not None, "deadlock: nothing can happen"
        self.now = max(self.now, until)
        if m is None:
            return []
        out = m.wake(self.now)
        self.commit(m)
        return out

    def run(self) -> list[tuple]:
        while True:
            try:
                return self.run_once()
            except Crash:
                self.crashes += 1

    def run_once(self) -> list[tuple]:
        m = self.store.load()
        start = m.start_run(self.now)
        self.commit(m)
        journal = dict(start.journal)
        counts: dict[tuple[str, str], int] = {}
        results = []
        for op in self.ops:
            step_type = {"do": "do", "sleep": "sleep", "wait": "waitForEvent"}[op.kind]
            count = counts[(step_type, op.name)] = counts.get((step_type, op.name), 0) + 1
            key = StepKey(step_type, op.name, count)
            if str(key) in journal:
                results.append(journal_outcome(journal.pop(str(key))))
                continue
            if op.kind == "do":
                d = m.step_do(op.name, count, None, op.config, self.now)
            elif op.kind == "sleep":
                d = m.step_sleep(op.name, count, self.now, duration_ms=op.ms)
            else:
                d = m.step_wait(op.name, count, op.event_type, op.ms, self.now)
            self.commit(m)
            while not isinstance(d, Resolve | Reject):
                assert not isinstance(d, Fail), d
                if isinstance(d, Run):
                    if self.crash_now():
                        raise Crash  # lost the attempt: it reruns on replay
                    if d.attempt <= op.fails:
                        err = ErrorInfo("Error", f"{op.name} failed attempt {d.attempt}")
                        d = m.attempt_failed(key, d.attempt, err, self.now)
                    else:
                        d = m.attempt_succeeded(key, d.attempt, json.dumps(op.name), self.now)
                    self.commit(m)
                    continue
                assert isinstance(d, Suspend)
                m.idle(self.now)
                self.commit(m)
                if self.crash_now():
                    self.advance(None, d.until)
                    raise Crash
                got = dict(self.advance(m, d.until))
                d = got.get(key, d)
            results.append(outcome(d))
        m.run_succeeded(json.dumps(len(results)), self.now)
        self.commit(m)
        assert m.status is Status.COMPLETE
        return results


def replay_after_completion(sim: Sim) -> list[tuple]:
    """Rebuild from the store and ask for every step: all finished, all identical."""
    m = sim.store.load()
    rows = {str(r.key): r for r in m.steps()}
    state = m.state
    state.status = Status.RUNNING  # simulate an extra replay of a live instance
    m2 = Machine(state, m.steps(), m.events())
    journal = m2.start_run(sim.now + 10**9).journal
    assert set(journal) == set(rows)
    counts: dict[tuple[str, str], int] = {}
    out = []
    for op in sim.ops:
        step_type = {"do": "do", "sleep": "sleep", "wait": "waitForEvent"}[op.kind]
        count = counts[(step_type, op.name)] = counts.get((step_type, op.name), 0) + 1
        if op.kind == "do":
            d = m2.step_do(op.name, count, None, {"timeout": 1}, sim.now)
        elif op.kind == "sleep":
            d = m2.step_sleep(op.name, count, sim.now, duration_ms=123)
        else:
            d = m2.step_wait(op.name, count, op.event_type, 5000, sim.now)
        out.append(outcome(d))
        assert outcome(d) == journal_outcome(journal[str(StepKey(step_type, op.name, count))])
    assert not m2.take_changes().steps  # answering from the journal writes nothing
    return out


def test_replay_is_deterministic_under_random_crashes():
    crashes = 0
    kinds: set[str] = set()
    for seed in range(150):
        rng = random.Random(seed)
        ops, world = random_program(rng)
        baseline_world = World(list(world.schedule))
        baseline = Sim(ops, baseline_world, None)
        expected = baseline.run()
        assert replay_after_completion(baseline) == expected
        for crash_seed in range(3):
            sim = Sim(ops, World(list(world.schedule)), random.Random(seed * 100 + crash_seed), 0.4)
            assert sim.run() == expected, (seed, crash_seed)
            assert replay_after_completion(sim) == expected
            crashes += sim.crashes
        kinds.update(o[0] if o[0] == "value" else o[1] for o in expected)
    # the property is only as good as its coverage: crashes happened, every outcome occurred
    assert crashes > 100
    assert kinds >= {"value", "Error", "WorkflowTimeoutError"}
