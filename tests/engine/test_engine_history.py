"""Finished history leaves memory once committed, and comes back exactly when needed."""

from __future__ import annotations

import pytest

from celld.engine.machine import HistoryDropped
from tests.engine._engine_helpers import T0, FakeStore, do_key, new_machine


def run_some_steps(store: FakeStore):  # type: ignore[no-untyped-def]
    m = new_machine()
    for n in range(1, 6):
        m.step_do("s", n, n, None, T0)
        m.attempt_succeeded(do_key("s", n), 1, str(n), T0)
    m.send_event("go", '"x"', T0)
    m.step_wait("w", 1, "go", 60_000, T0)  # takes the buffered event
    m.step_do("open", 1, 6, None, T0)  # still running
    store.commit(m.take_changes())
    return m


def test_forgetting_keeps_only_unfinished_work() -> None:
    store = FakeStore()
    m = run_some_steps(store)
    m.forget_finished()
    assert m.history_dropped
    assert [row.name for row in m.unfinished_steps()] == ["open"]
    with pytest.raises(HistoryDropped):
        m.steps()
    with pytest.raises(HistoryDropped):
        m.start_run(T0 + 1)
    with pytest.raises(HistoryDropped):
        m.restart(T0 + 1, {"name": "s", "count": 2})
    # The live run goes on as before.
    assert m.attempt_succeeded(do_key("open"), 1, "7", T0 + 1) is not None


def test_dirty_rows_are_never_forgotten() -> None:
    store = FakeStore()
    m = run_some_steps(store)
    m.attempt_succeeded(do_key("open"), 1, "7", T0 + 1)  # finished, not committed yet
    m.forget_finished()
    changes = m.take_changes()
    assert [row.name for row in changes.steps] == ["open"]


def test_restoring_gives_the_same_journal_as_a_fresh_load() -> None:
    store = FakeStore()
    m = run_some_steps(store)
    m.forget_finished()
    fresh = store.load()
    m.restore_history(list(store.steps.values()), list(store.events.values()))  # type: ignore[arg-type]
    assert not m.history_dropped
    assert m.start_run(T0 + 5).journal == fresh.start_run(T0 + 5).journal
    assert m.steps() == fresh.steps() and m.events() == fresh.events()


def test_a_view_merges_disk_and_memory_without_restoring() -> None:
    store = FakeStore()
    m = run_some_steps(store)
    m.forget_finished()
    m.attempt_succeeded(do_key("open"), 1, "7", T0 + 1)
    steps, events = m.merged_history(list(store.steps.values()), list(store.events.values()))  # type: ignore[arg-type]
    assert [row.name for row in steps][-1] == "open" and steps[-1].value == "7"
    assert len(steps) == 7 and len(events) == 1
    assert m.history_dropped


def test_a_full_restart_needs_no_history() -> None:
    store = FakeStore()
    m = run_some_steps(store)
    m.forget_finished()
    m.restart(T0 + 1)
    assert not m.history_dropped and m.steps() == []
