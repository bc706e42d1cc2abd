"""A group commit's callers are told through the loop's inline slices (celld/store/batch.py
`fan_out`): the event loop runs its other callbacks between them, and each caller still
hears only after its commit, in the batch's order."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from celld.engine import Machine, Status
from celld.isolate import inline
from celld.store.base import InstanceRef, Write
from celld.store.sqlite import SqliteStore

T0 = 1_700_000_000_000


def write_of(instance_id: str) -> Write:
    machine = Machine.create("wf", instance_id, "{}", T0)
    return Write(
        InstanceRef("wf", instance_id),
        machine.take_changes(),
        machine.next_wake(),
        machine.status in (Status.QUEUED, Status.RUNNING),
    )


async def test_the_loop_runs_other_callbacks_between_a_commits_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inline, "BUDGET_S", 0.0)  # a slice runs one turn, then yields
    store = SqliteStore(tmp_path / "state.sqlite3")
    await store.open()
    try:
        loop = asyncio.get_running_loop()
        events: list[str] = []
        commits_before = store.commits
        commits_seen: list[int] = []
        told = loop.create_future()
        n = 20

        def done_of(i: int):  # noqa: ANN202 - a WriteDone
            def done(error: BaseException | None) -> None:
                assert error is None
                events.append(f"done {i}")
                commits_seen.append(store.commits)
                if i == 0:  # e.g. a request's task step, made ready while callers are told
                    loop.call_soon(events.append, "other callback")
                if i == n - 1:
                    told.set_result(None)

            return done

        for i in range(n):
            store.write_soon(write_of(f"i{i}"), done_of(i))
        await told
        dones = [e for e in events if e.startswith("done")]
        assert dones == [f"done {i}" for i in range(n)]  # the batch's order
        # one commit for all of them, landed before the first caller heard of it
        assert set(commits_seen) == {commits_before + 1}
        # the loop ran the other callback while the batch's callers were being told
        assert 0 < events.index("other callback") < events.index(f"done {n - 1}")
    finally:
        await store.close()


async def test_continuations_go_before_turns_already_waiting_and_keep_their_order() -> None:
    turns = inline.inline_turns()
    ran: list[str] = []
    turns.call(lambda: ran.append("turn queued first"))
    turns.call_first(lambda: ran.append("continuation 1"))
    turns.call_first(lambda: ran.append("continuation 2"))
    finished = asyncio.get_running_loop().create_future()
    turns.call(lambda: finished.set_result(None))
    await finished
    assert ran == ["continuation 1", "continuation 2", "turn queued first"]
