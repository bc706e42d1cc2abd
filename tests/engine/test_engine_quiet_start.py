"""A quiet start (a preload: a waiting instance brought in ahead of its deadline) keeps the
instance `waiting` while its replay only asks again for what it waits on."""

from _engine_helpers import T0, FakeStore, new_machine

from celld.engine import Machine, Resolve, Run, Status, Suspend


def _waiting_on_sleep(store: FakeStore) -> Machine:
    m = new_machine()
    m.step_sleep("nap", 1, T0, duration_ms="1 hour")
    m.idle(T0)
    assert m.status is Status.WAITING
    store.commit(m.take_changes())
    return store.load()


def test_replay_to_the_pending_sleep_stays_waiting_and_changes_nothing():
    store = FakeStore()
    m = _waiting_on_sleep(store)
    m.start_run(T0 + 10, quiet=True)
    assert m.status is Status.WAITING
    assert m.step_sleep("nap", 1, T0 + 10, duration_ms="1 hour") == Suspend(T0 + 3_600_000)
    m.idle(T0 + 10)
    assert m.status is Status.WAITING
    assert not m.take_changes()  # nothing to commit
    # the deadline wakes it as usual
    assert m.wake(T0 + 3_600_000)[0][1] == Resolve(None)
    assert m.status is Status.RUNNING


def test_anything_else_in_the_replay_makes_it_running():
    store = FakeStore()
    m = _waiting_on_sleep(store)
    m.start_run(T0 + 10, quiet=True)
    m.step_sleep("nap", 1, T0 + 10, duration_ms="1 hour")
    assert isinstance(m.step_do("other", 1, None, None, T0 + 10), Run)
    assert m.status is Status.RUNNING


def test_a_deadline_passed_before_the_start_makes_it_a_real_run():
    store = FakeStore()
    m = _waiting_on_sleep(store)
    start = m.start_run(T0 + 3_600_000, quiet=True)
    assert m.status is Status.RUNNING
    assert "sleep:1:nap" in start.journal


def test_a_normal_start_of_a_waiting_instance_reads_running():
    store = FakeStore()
    m = _waiting_on_sleep(store)
    m.start_run(T0 + 10)
    assert m.status is Status.RUNNING
