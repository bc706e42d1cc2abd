"""What only the PostgreSQL store has to show: migrations applied once when several nodes
start together, and a database that goes away (a crash, then a restart) surfacing as
StoreUnavailable and working again once it is back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from celld.engine import Machine, Status
from celld.project.bindings import BindingsConfig, D1DatabaseConfig, KvNamespaceConfig
from celld.project.objects import DurableObjectBinding, DurableObjectsConfig
from celld.store.base import InstanceRef, StoreUnavailable, Write
from celld.store.choice import check_store
from celld.store.pgschema import LATEST, MIGRATIONS
from celld.store.postgres import PostgresStore
from tests import pgcluster

T0 = 1_700_000_000_000


def write_of(machine: Machine) -> Write:
    return Write(
        InstanceRef("wf", machine.state.id),
        machine.take_changes(),
        machine.next_wake(),
        machine.status in (Status.QUEUED, Status.RUNNING),
    )


async def test_nodes_starting_together_apply_each_migration_once(postgres_dsn: str) -> None:
    stores = [PostgresStore(postgres_dsn) for _ in range(5)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        connection = await asyncpg.connect(postgres_dsn)
        try:
            versions = await connection.fetch("SELECT version FROM celld_migrations")
        finally:
            await connection.close()
        assert sorted(r["version"] for r in versions) == list(range(1, LATEST + 1))
        await stores[0].write(write_of(Machine.create("wf", "a", "{}", T0)))
        assert await stores[4].exists(InstanceRef("wf", "a"))
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_text_values_of_an_older_schema_read_the_same_after_migration(
    postgres_dsn: str,
) -> None:
    """A database at schema 3 (value columns as TEXT) with rows in it: opening it moves
    those columns to BYTEA, and every value reads back as the same text."""
    params, value, payload = '{"a":"é\\u0000"}', '{"$":"Date","v":1}', '["x",1]'
    connection = await asyncpg.connect(postgres_dsn)
    try:
        await connection.execute(
            "CREATE TABLE celld_migrations (version INTEGER PRIMARY KEY, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for version, sql in MIGRATIONS[:3]:
            await connection.execute(sql)
            await connection.execute("INSERT INTO celld_migrations (version) VALUES ($1)", version)
        await connection.execute(
            "INSERT INTO instances (workflow, id, status, params, created_at, "
            "success_retention_ms, error_retention_ms, generation, next_seq, next_event_seq, "
            "runnable) VALUES ('wf', 'old', 'waiting', $1, $2, 1, 1, 1, 2, 2, 0)",
            params,
            T0,
        )
        await connection.execute(
            "INSERT INTO steps (workflow, instance_id, type, name, count, seq, state, "
            "attempts, value, started_at) VALUES ('wf', 'old', 'do', 's', 1, 1, 'done', 0, "
            "$1, $2)",
            value,
            T0,
        )
        await connection.execute(
            "INSERT INTO events (workflow, instance_id, seq, type, payload, timestamp) "
            "VALUES ('wf', 'old', 1, 'e', $1, $2)",
            payload,
            T0,
        )
    finally:
        await connection.close()
    store = PostgresStore(postgres_dsn)
    await store.open()
    try:
        loaded = await store.load(InstanceRef("wf", "old"))
    finally:
        await store.close()
    assert loaded is not None
    assert loaded.state.params == params
    assert [step.value for step in loaded.steps] == [value]
    assert [event.payload for event in loaded.events] == [payload]


async def test_an_unreachable_database_fails_open_with_its_address() -> None:
    store = PostgresStore("postgresql://celld:secret@127.0.0.1:1/none")
    with pytest.raises(StoreUnavailable, match=r"postgresql://celld@127\.0\.0\.1:1/none"):
        await store.open()


async def test_a_database_crash_is_unavailable_until_it_is_back(own_cluster: Path) -> None:
    store = PostgresStore((own_cluster / "dsn").read_text())
    await store.open()
    try:
        await store.write(write_of(Machine.create("wf", "before", "{}", T0)))
        await asyncio.to_thread(pgcluster.stop, own_cluster, "immediate")
        with pytest.raises(StoreUnavailable):
            await store.write(write_of(Machine.create("wf", "during", "{}", T0)))
        assert not store.health.healthy
        with pytest.raises(StoreUnavailable):
            await store.load(InstanceRef("wf", "before"))
        await asyncio.to_thread(pgcluster.restart, own_cluster)
        await asyncio.wait_for(store.health.wait_healthy(store.probe), 30)
        assert store.health.healthy
        await store.write(write_of(Machine.create("wf", "after", "{}", T0)))
        assert await store.exists(InstanceRef("wf", "before"))
        assert not await store.exists(InstanceRef("wf", "during"))
        assert await store.exists(InstanceRef("wf", "after"))
    finally:
        await store.close()


def test_d1_bindings_are_refused_with_a_shared_database_and_kv_is_not() -> None:
    kv = (KvNamespaceConfig(binding="CACHE", id="c"),)
    check_store("postgresql://celld@db:5432/celld", BindingsConfig(kv=kv))
    bindings = BindingsConfig(
        kv=kv,
        d1=(D1DatabaseConfig("DB", "db", "db-id", Path("m"), "d1_migrations"),),
    )
    with pytest.raises(ValueError, match=r"with D1 \(DB\) bindings yet.*default SQLite store"):
        check_store("postgresql://celld@db:5432/celld", bindings)
    check_store(None, bindings)  # one node on SQLite keeps its storage bindings
    check_store("postgresql://celld@db:5432/celld", BindingsConfig())
    with pytest.raises(ValueError, match="must be 'sqlite' or a postgresql://"):
        check_store("mysql://x", BindingsConfig())


def test_durable_object_bindings_are_refused_with_a_shared_database() -> None:
    objects = DurableObjectsConfig(bindings=(DurableObjectBinding("COUNTER", "Counter"),))
    with pytest.raises(ValueError, match=r"Durable Object \(COUNTER\).*run the same object"):
        check_store("postgresql://celld@db:5432/celld", BindingsConfig(objects=objects))
