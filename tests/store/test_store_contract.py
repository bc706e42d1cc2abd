"""The store contract (celld/store/base.py), on every backend: the real SQLite store in a
temp folder and the real PostgreSQL store on a fresh database (tests/postgres_fixtures.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from celld.engine import Machine, Status, StepKey
from celld.store.base import DuplicateInstance, InstanceRef, StoreUnavailable, Write
from celld.store.postgres import PostgresStore
from celld.store.sqlite import SqliteStore

T0 = 1_700_000_000_000
AnyStore = SqliteStore | PostgresStore


def new(instance_id: str, now: int = T0, **kw: object) -> Machine:
    return Machine.create("wf", instance_id, "{}", now, **kw)  # type: ignore[arg-type]


def write_of(machine: Machine) -> Write:
    changes = machine.take_changes()
    return Write(
        InstanceRef("wf", machine.state.id),
        changes,
        machine.next_wake(),
        machine.status in (Status.QUEUED, Status.RUNNING, Status.WAITING_FOR_PAUSE),
    )


def disk_full() -> None:
    raise sqlite3.OperationalError("database or disk is full")


async def test_create_twice_is_a_duplicate_and_keeps_the_first(store: AnyStore) -> None:
    first = new("a")
    first.start_run(T0)
    await store.write(write_of(first))
    with pytest.raises(DuplicateInstance):
        await store.write(write_of(new("a", T0 + 1)))
    loaded = await store.load(InstanceRef("wf", "a"))
    assert loaded is not None and loaded.state.status is Status.RUNNING


async def test_batch_skips_taken_ids_and_commits_the_rest(store: AnyStore) -> None:
    await store.write(write_of(new("a")))
    skipped = await store.write_many([write_of(new(i)) for i in ("a", "b", "c")])
    assert skipped == {InstanceRef("wf", "a")}
    for instance_id in ("b", "c"):
        assert await store.exists(InstanceRef("wf", instance_id))


async def test_two_creates_of_one_id_in_one_group_commit(store: AnyStore) -> None:
    import asyncio

    results = await asyncio.gather(
        store.write(write_of(new("x"))),
        store.write_many([write_of(new("x")), write_of(new("y"))]),
        return_exceptions=True,
    )
    duplicates = [r for r in results if isinstance(r, DuplicateInstance)] + [
        r for r in results if isinstance(r, set) and InstanceRef("wf", "x") in r
    ]
    assert len(duplicates) == 1  # exactly one of the two creates of "x" won
    assert await store.exists(InstanceRef("wf", "y"))


async def test_an_expired_instance_gives_its_id_back(store: AnyStore) -> None:
    old = new("a", retention={"successRetention": "1 second"})
    await store.write(write_of(old))
    old.start_run(T0)
    old.step_do("s", 1, 1, None, T0)
    old.attempt_succeeded(old.steps()[0].key, 1, "1", T0)
    old.run_succeeded("1", T0)
    await store.write(write_of(old))
    with pytest.raises(DuplicateInstance):
        await store.write(write_of(new("a", T0 + 500)))
    await store.write(write_of(new("a", T0 + 2_000)))
    loaded = await store.load(InstanceRef("wf", "a"))
    assert loaded is not None
    assert loaded.state.status is Status.QUEUED and loaded.steps == []


async def test_a_failed_commit_changes_nothing_and_is_reported(store: AnyStore) -> None:
    await store.write(write_of(new("a")))
    store.fault = disk_full
    with pytest.raises(StoreUnavailable, match="database or disk is full"):
        await store.write(write_of(new("b")))
    assert not store.health.healthy and store.health.failing_since is not None
    store.fault = None
    assert not await store.exists(InstanceRef("wf", "b"))
    await store.probe()
    assert store.health.healthy
    await store.write(write_of(new("b")))
    assert await store.exists(InstanceRef("wf", "b"))


async def test_every_writer_of_a_failed_group_learns_it(store: AnyStore) -> None:
    import asyncio

    store.fault = disk_full
    results = await asyncio.gather(
        *(store.write(write_of(new(f"i{n}"))) for n in range(20)), return_exceptions=True
    )
    assert all(isinstance(r, StoreUnavailable) for r in results)
    store.fault = None
    assert await store.counts() == {}


async def test_a_dead_writer_fails_its_writers_and_is_replaced(store: AnyStore) -> None:
    class WriterKilled(BaseException):
        pass

    def kill() -> None:
        raise WriterKilled()

    store.fault = kill
    with pytest.raises(StoreUnavailable, match="writer stopped"):
        await store.write(write_of(new("a")))
    store.fault = None
    await store.write(write_of(new("b")))
    assert store.writer_restarts == 1
    assert await store.exists(InstanceRef("wf", "b"))
    assert not await store.exists(InstanceRef("wf", "a"))


async def test_runnable_instances_page_by_key(store: AnyStore) -> None:
    await store.write_many([write_of(new(f"i{n:03}")) for n in range(25)])
    done = new("zz")
    done.terminate(T0)
    await store.write(write_of(done))
    seen: list[InstanceRef] = []
    after = None
    while True:
        page = await store.runnable(10, after)
        seen.extend(page)
        if len(page) < 10:
            break
        after = page[-1]
    assert [r.id for r in seen] == [f"i{n:03}" for n in range(25)]


async def test_delete_expired_spares_an_id_reused_meanwhile(store: AnyStore) -> None:
    old = new("a", retention={"errorRetention": "1 second"})
    old.terminate(T0)
    await store.write(write_of(old))
    stale = await store.expired(T0 + 5_000, 10)
    assert stale == [InstanceRef("wf", "a")]
    await store.write(write_of(new("a", T0 + 5_000)))  # the id is taken again
    await store.delete_expired(stale, T0 + 5_000)
    loaded = await store.load(InstanceRef("wf", "a"))
    assert loaded is not None and loaded.state.status is Status.QUEUED


async def test_an_acknowledged_write_is_seen_by_the_next_read_while_others_read(
    store: AnyStore,
) -> None:
    """Reads in flight never pin an old snapshot for the reads that follow a commit: a
    create that was acknowledged is found by the next load, however reads interleave."""
    import asyncio

    await store.write_many([write_of(new(f"old-{n}")) for n in range(200)])
    stop = asyncio.Event()

    async def keep_reading() -> None:
        while not stop.is_set():
            await store.runnable(500)
            await store.load(InstanceRef("wf", "old-7"))

    readers = [asyncio.create_task(keep_reading()) for _ in range(3)]
    try:
        missed = []
        for n in range(150):
            ref = InstanceRef("wf", f"new-{n}")
            await store.write(write_of(new(ref.id)))
            if not await store.exists(ref) or await store.load(ref) is None:
                missed.append(ref.id)
        assert missed == []
    finally:
        stop.set()
        await asyncio.gather(*readers)


async def test_schedule_ticks_are_per_expression_and_never_move_back(
    store: AnyStore, tmp_path: Path
) -> None:
    assert await store.schedule_ticks("wf") == {}
    await store.record_tick("wf", "0 * * * *", T0)
    await store.record_tick("wf", "*/5 * * * *", T0 + 5)
    await store.record_tick("other", "0 * * * *", T0 + 9)
    await store.record_tick("wf", "0 * * * *", T0 - 1)  # an older tick does not win
    assert await store.schedule_ticks("wf") == {"0 * * * *": T0, "*/5 * * * *": T0 + 5}
    await store.close()
    reopened: AnyStore = (
        SqliteStore(tmp_path / "state.sqlite3")
        if isinstance(store, SqliteStore)
        else PostgresStore(store.dsn)
    )
    await reopened.open()
    try:
        assert await reopened.schedule_ticks("other") == {"0 * * * *": T0 + 9}
    finally:
        await reopened.close()


async def test_a_state_file_without_the_version_column_is_upgraded(tmp_path: Path) -> None:
    """State folders from before version pinning: the column is added, old rows read None."""
    from celld.store.rows import SCHEMA

    path = tmp_path / "old.sqlite3"
    old_schema = SCHEMA.replace("    version TEXT,\n", "")
    with sqlite3.connect(path) as connection:
        connection.executescript(old_schema)
        connection.execute(
            "INSERT INTO instances (workflow, id, status, params, created_at, "
            "success_retention_ms, error_retention_ms, generation, next_seq, next_event_seq, "
            "runnable) VALUES ('wf', 'old', 'queued', '{}', ?, 1, 1, 0, 1, 1, 1)",
            (T0,),
        )
    upgraded = SqliteStore(path)
    await upgraded.open()
    try:
        loaded = await upgraded.load(InstanceRef("wf", "old"))
        assert loaded is not None and loaded.state.version is None
        fresh = new("new", version="0123456789abcdef")
        await upgraded.write(write_of(fresh))
        again = await upgraded.load(InstanceRef("wf", "new"))
        assert again is not None and again.state.version == "0123456789abcdef"
    finally:
        await upgraded.close()


async def test_a_light_claim_leaves_finished_steps_to_the_journal(store: AnyStore) -> None:
    """What a run starts from after a light claim (unfinished rows in memory, finished ones
    as journal text from the store) is the journal of the whole history."""
    import json

    from celld.engine import ErrorInfo

    m = new("j")
    m.start_run(T0)
    names = ["plain", 'quo"te\\back', "co:lon", "ünï\u2028code"]
    for i, name in enumerate(names):  # done, with a value, and its rollback registered
        m.step_do(name, 1, None, None, T0, rollback={"config": None, "dynamic": False})
        m.attempt_succeeded(StepKey("do", name, 1), 1, json.dumps({"i": i, "s": name}), T0)
    m.step_do("undefined", 1, None, None, T0)
    m.attempt_succeeded(StepKey("do", "undefined", 1), 1, '{"$":"undefined"}', T0)
    m.step_do("boom", 1, None, None, T0)
    m.attempt_failed(
        StepKey("do", "boom", 1), 1, ErrorInfo("TypeError", "no"), T0, nonretryable=True
    )
    for count in (1, 2):  # a name called twice: its second call is keyed
        m.step_do("again", count, None, None, T0)
        m.attempt_succeeded(StepKey("do", "again", count), 1, str(count), T0)
    m.step_sleep("nap", 1, T0, duration_ms=10)
    m.step_wait("late", 1, "never", "1 second", T0)
    m.step_wait("go", 1, "go", None, T0)  # takes the event below
    m.send_event("go", '{"p":1}', T0)
    m.step_sleep("long", 1, T0, duration_ms=10_000_000)  # unfinished
    m.wake(T0 + 2000)
    await store.write(write_of(m))
    full = await store.load(InstanceRef("wf", "j"))
    light = await store.claim(InstanceRef("wf", "j"))
    assert full is not None and light is not None and not full.history_dropped

    whole = Machine(full.state, full.steps, full.events).start_run(T0 + 3000)
    if light.history_dropped:
        assert {r.key for r in light.steps} == {StepKey("sleep", "long", 1)} | {
            StepKey("rollback", n, 1) for n in names
        }
        assert all(e.consumed_by is None for e in light.events)
        machine = Machine(light.state, light.steps, light.events, history_dropped=True)
        recorded = await store.journal(InstanceRef("wf", "j"))
        started = machine.start_run(T0 + 3000, recorded)
    else:  # a store whose claim reads everything
        started = Machine(light.state, light.steps, light.events).start_run(T0 + 3000)
    expected = json.loads(whole.journal_json())
    assert json.loads(started.journal_json()) == expected
    # first step.do calls by name; every other finished step by its key
    first, keyed = expected["first"], expected["keyed"]
    assert sorted(first) == sorted([*names, "undefined", "boom", "again"]), sorted(first)
    assert sorted(keyed) == [
        "do:2:again",
        "sleep:1:nap",
        "waitForEvent:1:go",
        "waitForEvent:1:late",
    ]
    assert first['quo"te\\back'] == {"i": 1, "s": 'quo"te\\back'}
    assert first["ünï\u2028code"] == {"i": 3, "s": "ünï\u2028code"}
    assert first["again"] == 1 and keyed["do:2:again"] == 2
    assert first["undefined"] == keyed["sleep:1:nap"] == {"$": "undefined"}
    assert first["boom"] == {
        "$": "celld:error",
        "error": {"name": "TypeError", "message": "no"},
    }
    assert keyed["waitForEvent:1:late"]["error"]["name"] == "WorkflowTimeoutError"
    assert json.loads(keyed["waitForEvent:1:go"]["payload"]) == {"p": 1}


async def test_a_batch_claim_gives_what_each_claim_and_journal_give(store: AnyStore) -> None:
    """`claim_many` answers each instance found as its own `claim` would (and a journal
    read with it is the one `journal` gives); one that does not exist is left out."""
    import json

    refs = [InstanceRef("wf", i) for i in ("b1", "b2", "b3")]
    for n, ref in enumerate(refs):
        m = new(ref.id)
        m.start_run(T0)
        for i in range(n + 1):
            m.step_do(f"s{i}", 1, None, None, T0)
            m.attempt_succeeded(StepKey("do", f"s{i}", 1), 1, json.dumps(i), T0)
        m.step_sleep("long", 1, T0, duration_ms=10_000_000)
        await store.write(write_of(m))
    missing = InstanceRef("wf", "nobody")
    claimed = await store.claim_many([*refs, missing])
    assert set(claimed) == set(refs)
    for ref in refs:
        one = await store.claim(ref)
        batch = claimed[ref]
        assert one is not None and not isinstance(batch, Exception)
        assert batch.state == one.state
        assert batch.steps == one.steps and batch.events == one.events
        assert batch.history_dropped == one.history_dropped
        if isinstance(store, SqliteStore):  # it reads the journals with the batch
            assert batch.journal is not None and batch.journal.first
        if batch.journal is not None:
            assert batch.journal == await store.journal(ref)


async def _written_soon(store: AnyStore, writes: list[Write]) -> list[BaseException | None]:
    """`write_soon` every write in one pass of the loop; what each caller was told."""
    import asyncio

    loop = asyncio.get_running_loop()
    told: list[asyncio.Future[BaseException | None]] = [loop.create_future() for _ in writes]
    for write, future in zip(writes, told, strict=True):
        store.write_soon(write, future.set_result)
    return list(await asyncio.gather(*told))


async def test_writes_queued_in_one_pass_commit_together(store: AnyStore) -> None:
    """The step path's commit: callers are told through a callback, each after its rows
    are committed; a taken id is that caller's DuplicateInstance only."""
    await store.write(write_of(new("taken")))
    commits = store.commits
    outcome = await _written_soon(store, [write_of(new(i)) for i in ("a", "taken", "b", "c")])
    assert outcome[0] is None and outcome[2] is None and outcome[3] is None
    assert isinstance(outcome[1], DuplicateInstance)
    for instance_id in ("a", "b", "c"):
        assert await store.exists(InstanceRef("wf", instance_id))
    if isinstance(store, SqliteStore):
        assert store.commits == commits + 1  # one transaction for the whole pass


async def test_writes_queued_in_one_pass_all_learn_a_failure(store: AnyStore) -> None:
    store.fault = disk_full
    outcome = await _written_soon(store, [write_of(new(f"i{n}")) for n in range(5)])
    assert all(isinstance(error, StoreUnavailable) for error in outcome)
    store.fault = None
    assert await store.counts() == {}


async def test_a_peek_gives_the_status_a_full_load_gives(store: AnyStore) -> None:
    """`peek` reads the instance row and its rollback phase only: the status view built from
    it is the one a full load builds, for a finished instance and one rolling back."""
    done = new("done")
    done.start_run(T0)
    done.step_do("a", 1, None, None, T0)
    done.attempt_succeeded(StepKey("do", "a", 1), 1, '{"x":1}', T0)
    done.run_succeeded('{"out":2}', T0)
    rolling = new("rolling")
    rolling.start_run(T0)
    rolling.step_do("b", 1, None, None, T0, rollback={"config": None, "dynamic": False})
    rolling.attempt_succeeded(StepKey("do", "b", 1), 1, "1", T0)
    rolling.terminate(T0, rollback=True)
    for machine in (done, rolling):
        await store.write(write_of(machine))
    peeked_machines = {}
    for name in ("done", "rolling"):
        ref = InstanceRef("wf", name)
        full, peeked = await store.load(ref), await store.peek(ref)
        assert full is not None and peeked is not None
        assert peeked.history_dropped and not peeked.events
        machine = Machine(peeked.state, peeked.steps, [], history_dropped=True)
        assert machine.status_view() == Machine(full.state, full.steps, full.events).status_view()
        peeked_machines[name] = machine
    assert peeked_machines["done"].status_view() == {"status": "complete", "output": '{"out":2}'}
    assert peeked_machines["rolling"].rolling_back  # its phase row came along
    assert await store.peek(InstanceRef("wf", "nope")) is None


async def test_listing_searches_ids_ignoring_case_with_wildcards_taken_literally(
    store: AnyStore,
) -> None:
    for n, instance_id in enumerate(("Order_1", "order-2", "orderX3", "other")):
        await store.write(write_of(new(instance_id, T0 + n)))
    found = await store.list_instances("wf", id_contains="ORDER")
    assert [s.id for s in found] == ["orderX3", "order-2", "Order_1"]  # newest first
    assert await store.count_instances("wf", id_contains="ORDER") == 3
    # `_` and `%` are characters here, not LIKE's wildcards
    assert [s.id for s in await store.list_instances("wf", id_contains="r_")] == ["Order_1"]
    assert await store.count_instances("wf", id_contains="%") == 0
    page = await store.list_instances("wf", id_contains="o", limit=1, offset=1)
    assert [s.id for s in page] == ["orderX3"]
