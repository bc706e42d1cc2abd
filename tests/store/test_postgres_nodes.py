"""Several nodes on one PostgreSQL database, at the store: fencing, takeover, forwarding.

Each node is a real PostgresStore on a fresh database; a node "freezes" by having its
lease loop stopped (as a node cut off from the database, or stopped by the OS, would).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import pytest

from celld.engine import Machine, Status
from celld.store.base import (
    Claimed,
    Fenced,
    InstanceRef,
    NotDone,
    OwnedElsewhere,
    StoreUnavailable,
)
from celld.store.pgnodes import log_payloads, read_log_payload
from celld.store.postgres import PostgresStore
from tests.store.test_postgres import write_of

T0 = 1_700_000_000_000
LEASE_MS = 1_000


class Events:
    """A node's side of the store: records what it took over, echoes forwarded operations."""

    def __init__(self) -> None:
        self.claimed: list[Claimed] = []
        self.forwarded: list[dict[str, Any]] = []
        self.logged: list[list[InstanceRef] | None] = []

    def instances_claimed(self, claimed: list[Claimed]) -> None:
        self.claimed.extend(claimed)

    def log_written(self, refs: list[InstanceRef] | None) -> None:
        self.logged.append(refs)

    async def run_forwarded(self, message: dict[str, Any]) -> Any:
        self.forwarded.append(message)
        if message.get("fail"):
            raise ValueError("refused by the owner")
        return {"done": message["id"]}


@pytest.fixture
async def nodes(postgres_dsn: str) -> AsyncIterator[list[PostgresStore]]:
    opened: list[PostgresStore] = []
    for _ in range(3):
        store = PostgresStore(postgres_dsn, lease_ms=LEASE_MS)
        await store.open()
        opened.append(store)
    try:
        yield opened
    finally:
        for store in opened:
            await store.close()


def freeze(store: PostgresStore) -> None:
    """The node stops renewing its lease and reaping (it still tries to commit)."""
    for task in (store.nodes._renewer, store.nodes._task):
        assert task is not None
        task.cancel()


async def until(predicate: Any, timeout: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_a_batch_claim_answers_each_instance_as_its_own_claim(
    nodes: list[PostgresStore],
) -> None:
    """`claim_many` on a shared store: each instance is answered as its own `claim`
    would be (its load, or OwnedElsewhere while a live node owns it); one that does not
    exist is left out."""
    a, b, _ = nodes
    refs = [InstanceRef("wf", i) for i in ("m", "t")]
    missing = InstanceRef("wf", "none")
    for ref in refs:
        await a.write(write_of(Machine.create("wf", ref.id, "{}", T0)))  # a owns them
    elsewhere = await b.claim_many([*refs, missing])
    assert set(elsewhere) == set(refs)
    for ref in refs:
        owned = elsewhere[ref]
        assert isinstance(owned, OwnedElsewhere) and owned.owner == a.node
    claimed = await a.claim_many([*refs, missing])
    assert set(claimed) == set(refs)
    for ref in refs:
        loaded = claimed[ref]
        assert not isinstance(loaded, OwnedElsewhere) and loaded.state.id == ref.id
        assert loaded.journal is None  # (its runs read their journals themselves)


async def test_a_taken_over_owner_cannot_commit(nodes: list[PostgresStore]) -> None:
    a, b, _ = nodes
    ref = InstanceRef("wf", "x")
    machine = Machine.create("wf", "x", "{}", T0)
    await a.write(write_of(machine))
    loaded = await a.claim(ref)
    assert loaded is not None
    with pytest.raises(OwnedElsewhere) as elsewhere:
        await b.claim(ref)  # a is alive: b may not take it
    assert elsewhere.value.owner == a.node

    freeze(a)
    events = Events()
    await b.serve(events)
    await until(lambda: any(r == ref for r, _, _ in events.claimed))  # a's lease ran out
    assert (await b.claim(ref)) is not None

    machine.start_run(T0 + 1)
    with pytest.raises(StoreUnavailable) as refused:  # the old owner's write is refused
        await a.write(write_of(machine))
    assert "taken over" in str(refused.value)
    loaded = await b.load(ref)
    assert loaded is not None and loaded.state.status is Status.QUEUED

    taken = Machine(loaded.state, loaded.steps, loaded.events)
    taken.terminate(T0 + 2)
    await b.write(write_of(taken))
    assert (await a.load(ref)).state.status is Status.TERMINATED  # type: ignore[union-attr]


async def test_a_write_to_an_instance_owned_elsewhere_is_fenced(
    nodes: list[PostgresStore],
) -> None:
    a, b, _ = nodes
    machine = Machine.create("wf", "y", "{}", T0)
    await a.write(write_of(machine))
    copy = Machine(machine.state, machine.steps(), machine.events())
    copy.terminate(T0 + 1)
    with pytest.raises(Fenced, match="owned by another node"):
        await b.write(write_of(copy))
    assert b.health.healthy  # one instance's verdict, not an outage of the store
    assert (await a.load(InstanceRef("wf", "y"))).state.status is Status.QUEUED  # type: ignore[union-attr]


async def test_a_dead_nodes_instances_are_shared_by_the_survivors(
    nodes: list[PostgresStore],
) -> None:
    a, b, c = nodes
    await a.write_many([write_of(Machine.create("wf", f"i{n:03}", "{}", T0)) for n in range(60)])
    freeze(a)
    on_b, on_c = Events(), Events()
    await b.serve(on_b)
    await c.serve(on_c)
    await until(lambda: len(on_b.claimed) + len(on_c.claimed) == 60)
    refs_b = {r for r, _, _ in on_b.claimed}
    refs_c = {r for r, _, _ in on_c.claimed}
    assert not refs_b & refs_c  # each instance went to exactly one node
    assert all(runnable for _, _, runnable in on_b.claimed + on_c.claimed)
    mine_b = await b.runnable(100)
    assert set(mine_b) == refs_b  # a node pages in only what it owns


async def test_a_node_that_leaves_hands_its_instances_over_at_once(postgres_dsn: str) -> None:
    leaving = PostgresStore(postgres_dsn, lease_ms=60_000)
    staying = PostgresStore(postgres_dsn, lease_ms=60_000)
    await leaving.open()
    await staying.open()
    try:
        await leaving.write(write_of(Machine.create("wf", "z", "{}", T0)))
        events = Events()
        await staying.serve(events)
        await leaving.close()  # long before its lease would run out
        # Well under the 20 s between lease ticks (a third of 60 s): only the notification
        # the leaving node sends can make it in time, even on a loaded machine.
        await until(lambda: len(events.claimed) == 1, timeout=15)
    finally:
        await staying.close()


async def test_operations_are_forwarded_to_the_owner(nodes: list[PostgresStore]) -> None:
    a, b, _ = nodes
    owner = Events()
    await a.serve(owner)
    reply = await b.forward(a.node, {"id": "x", "method": "pause"})
    assert reply == {"ok": {"done": "x"}}
    assert owner.forwarded == [{"id": "x", "method": "pause"}]
    reply = await b.forward(a.node, {"id": "x", "fail": True})
    assert reply["error"] == "refused by the owner"
    connection = await asyncpg.connect(a.dsn)
    try:
        assert await connection.fetchval("SELECT count(*) FROM celld_inbox") == 0
    finally:
        await connection.close()


async def test_an_operation_for_a_dead_owner_is_withdrawn(nodes: list[PostgresStore]) -> None:
    a, b, _ = nodes
    freeze(a)  # a takes nothing from its inbox and its lease runs out
    await b.serve(Events())
    with pytest.raises(NotDone):
        await asyncio.wait_for(b.forward(a.node, {"id": "x", "method": "pause"}), 15)


# -- the lease a node obeys itself (celld/store/lease.py) ------------------------------------


def thaw(store: PostgresStore) -> None:
    """The node renews and reaps again (as a node continued after a stop)."""
    loop = asyncio.get_running_loop()
    store.nodes._renewer = loop.create_task(store.nodes._renew_loop())
    store.nodes._task = loop.create_task(store.nodes._maintain_loop())


async def test_a_node_that_stops_renewing_stops_acting(
    nodes: list[PostgresStore], caplog: pytest.LogCaptureFixture
) -> None:
    a = nodes[0]
    assert a.lease.allows_effects()
    lapsed = asyncio.Event()
    a.lease.on_change(lambda allowed: None if allowed else lapsed.set())
    freeze(a)
    await asyncio.wait_for(lapsed.wait(), 10)
    assert not a.lease.allows_effects()
    # before the database could reap it: the margin is kept in hand
    lease_until = await a.pool.fetchval(
        "SELECT lease_until > clock_timestamp() FROM celld_nodes WHERE token = $1", a.node
    )
    assert lease_until is True
    assert "lease lapsed" in caplog.text


async def test_failed_renewals_are_logged_with_the_time_left(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="celld.nodes")
    a = PostgresStore(postgres_dsn, lease_ms=6_000)  # seconds to spare at the first failure
    await a.open()
    blocker = await asyncpg.connect(a.dsn)
    try:
        # a's row locked by someone else: its renewal gives up at its short lock timeout
        async with blocker.transaction():
            await blocker.execute(
                "SELECT token FROM celld_nodes WHERE token = $1 FOR UPDATE", a.node
            )
            await until(lambda: "could not renew its lease" in caplog.text)
        failed = next(r for r in caplog.records if "could not renew its lease" in r.getMessage())
        assert failed.levelname == "WARNING"
        assert "lock timeout" in failed.getMessage()
        assert "s left before its cells stop" in failed.getMessage()
        renewed = a.lease.time_left()
        await until(lambda: a.lease.time_left() > renewed)  # renewed once the lock went
    finally:
        await blocker.close()
        await a.close()


async def test_a_node_taken_over_rejoins_and_what_it_loaded_stays_shut(
    nodes: list[PostgresStore],
) -> None:
    a, b, _ = nodes
    ref = InstanceRef("wf", "r")
    await a.write(write_of(Machine.create("wf", "r", "{}", T0)))
    old_token, old_fence = a.node, a.lease.fence()
    assert old_fence is not None and old_fence.allows_effects()
    rejoined: list[tuple[int, int, bool]] = []
    a.lease.on_epoch(lambda old, new: rejoined.append((old, new, a.lease.allows_effects())))
    freeze(a)
    events = Events()
    await b.serve(events)
    await until(lambda: any(r == ref for r, _, _ in events.claimed))  # reaped, taken over
    with pytest.raises(Fenced, match="taken over"):  # no claim under the lost token
        await a.claim(ref)
    thaw(a)
    await until(lambda: a.lease.allows_effects())
    assert rejoined == [(old_token, a.node, False)]  # told before it was valid again
    assert a.node != old_token
    assert old_fence.stale and not old_fence.allows_effects()
    with pytest.raises(OwnedElsewhere):  # and b keeps what it took
        await a.claim(ref)


async def test_a_node_stopped_inside_a_transaction_cannot_stop_the_others(
    nodes: list[PostgresStore],
) -> None:
    """A node stopped with a commit open holds its row locked: the others do not wait for
    it (their renewals and reaping go on), the database ends its session, and its
    instances are taken over."""
    a, b, _ = nodes
    ref = InstanceRef("wf", "t")
    await a.write(write_of(Machine.create("wf", "t", "{}", T0)))
    b_token = b.node
    connection = await a.pool.acquire()
    try:
        transaction = connection.transaction()
        await transaction.start()
        await a.nodes.hold(connection, a.node)  # as a commit does first
        freeze(a)  # ... and the node stops there
        events = Events()
        await b.serve(events)
        await until(lambda: any(r == ref for r, _, _ in events.claimed), timeout=30)
        assert b.node == b_token and b.lease.allows_effects()  # b never lost its lease
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError)):
            await connection.fetchval("SELECT 1")  # the database ended a's session
    finally:
        await a.pool.release(connection)


async def test_a_commit_that_logs_wakes_the_other_nodes(nodes: list[PostgresStore]) -> None:
    """The commit's notification names the instances whose log grew; the other nodes are
    told, the committing node is not (it woke its own subscribers)."""
    a, b, _ = nodes
    told_a, told_b = Events(), Events()
    await a.serve(told_a)
    await b.serve(told_b)
    await until(lambda: all(n.nodes._listener is not None for n in (a, b)))  # listening
    refs = [InstanceRef("wf", f"log-{n}") for n in range(3)]
    for ref in refs:
        write = write_of(Machine.create("wf", ref.id, "{}", T0))
        await a.write(replace(write, log=((T0, "workflow_queued", "{}"),)))
    await until(lambda: {r for refs in told_b.logged if refs for r in refs} == set(refs))
    assert [refs for refs in told_a.logged if refs is not None] == []


def test_log_notifications_stay_within_the_payload_limit() -> None:
    refs = [InstanceRef("wf", f"{n:0>90}") for n in range(500)]
    payloads = log_payloads(7, refs + refs[:10])
    assert len(payloads) > 1 and all(len(p.encode()) < 8000 for p in payloads)
    read = [read_log_payload(p) for p in payloads]
    assert {token for token, _ in read} == {7}
    assert [ref for _, refs in read for ref in refs] == refs  # each once, in order
