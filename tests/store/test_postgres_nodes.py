"""Several nodes on one PostgreSQL database, at the store: fencing, takeover, forwarding.

Each node is a real PostgresStore on a fresh database; a node "freezes" by having its
lease loop stopped (as a node cut off from the database, or stopped by the OS, would).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
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
from celld.store.postgres import PostgresStore
from tests.store.test_postgres import write_of

T0 = 1_700_000_000_000
LEASE_MS = 1_000


class Events:
    """A node's side of the store: records what it took over, echoes forwarded operations."""

    def __init__(self) -> None:
        self.claimed: list[Claimed] = []
        self.forwarded: list[dict[str, Any]] = []

    def instances_claimed(self, claimed: list[Claimed]) -> None:
        self.claimed.extend(claimed)

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
