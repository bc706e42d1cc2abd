"""The PostgreSQL schema as versioned migrations, and applying them once.

Each migration is applied in its own transaction and recorded in `celld_migrations`.
Several nodes may start together against a fresh database: they take one session-level
advisory lock before looking at the version, so exactly one of them applies a migration
and the others see it recorded when the lock comes to them.
"""

from __future__ import annotations

import logging

import asyncpg

log = logging.getLogger("celld.store")

#: pg_advisory_lock key of celld's migrations ("celld" + "mig" as bytes, fits a bigint).
MIGRATION_LOCK = 0x63656C6C646D6967

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
CREATE TABLE instances (
    workflow TEXT NOT NULL,
    id TEXT NOT NULL,
    status TEXT NOT NULL,
    params TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    output TEXT,
    error TEXT,
    started_at BIGINT,
    finished_at BIGINT,
    paused_at BIGINT,
    success_retention_ms BIGINT NOT NULL,
    error_retention_ms BIGINT NOT NULL,
    expires_at BIGINT,
    generation INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    next_event_seq INTEGER NOT NULL,
    next_wake BIGINT,
    runnable INTEGER NOT NULL,
    PRIMARY KEY (workflow, id)
);
CREATE INDEX instances_by_wake_key ON instances (next_wake, workflow, id)
    WHERE next_wake IS NOT NULL;
CREATE INDEX instances_by_expiry ON instances (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX instances_runnable ON instances (workflow, id) WHERE runnable = 1;
CREATE TABLE steps (
    workflow TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    type TEXT NOT NULL,
    name TEXT NOT NULL,
    count INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    config TEXT,
    value TEXT,
    error TEXT,
    wake_at BIGINT,
    event_type TEXT,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    PRIMARY KEY (workflow, instance_id, type, name, count)
);
CREATE TABLE events (
    workflow TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    timestamp BIGINT NOT NULL,
    consumed_by TEXT,
    PRIMARY KEY (workflow, instance_id, seq)
);
CREATE TABLE celld_probe (id INTEGER PRIMARY KEY, at TIMESTAMPTZ NOT NULL);
""",
    ),
    (
        2,
        """
-- Nodes sharing the database. A node's token is its fencing token: never reused, and
-- an instance is run only by the node whose token is in its `owner` column.
CREATE TABLE celld_nodes (
    token BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL,
    lease_until TIMESTAMPTZ NOT NULL
);
ALTER TABLE instances ADD COLUMN owner BIGINT;
CREATE INDEX instances_by_owner ON instances (owner);
CREATE INDEX instances_orphaned ON instances (workflow, id)
    WHERE owner IS NULL AND (runnable = 1 OR next_wake IS NOT NULL);
-- Operations sent to the node that owns an instance (any node accepts them).
CREATE TABLE celld_inbox (
    seq BIGSERIAL PRIMARY KEY,
    target BIGINT NOT NULL,
    sender BIGINT NOT NULL,
    body TEXT NOT NULL,
    taken BOOLEAN NOT NULL DEFAULT false,
    reply TEXT
);
CREATE INDEX celld_inbox_by_target ON celld_inbox (target) WHERE NOT taken;
""",
    ),
    (
        3,
        """
-- The Worker version an instance started on; each instance's event log (subscribe);
-- the last cron tick handled per schedule.
ALTER TABLE instances ADD COLUMN version TEXT;
CREATE TABLE instance_log (
    event_id BIGSERIAL PRIMARY KEY,
    workflow TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    timestamp BIGINT NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX instance_log_by_instance ON instance_log (workflow, instance_id, event_id);
CREATE TABLE schedule_ticks (
    workflow TEXT NOT NULL,
    expression TEXT NOT NULL,
    tick BIGINT NOT NULL,
    PRIMARY KEY (workflow, expression)
);
""",
    ),
    (
        4,
        """
-- Serialized values as bytes: step values, event payloads and params hold either UTF-8
-- JSON text or, for a value with binary data, a NUL, its JSON, a NUL and its bytes
-- (celld/engine/binary.py), so ArrayBuffers are stored as themselves, not as base64.
-- The rows already there are text, kept as its UTF-8 (the tables are rewritten once).
ALTER TABLE steps ALTER COLUMN value TYPE BYTEA USING convert_to(value, 'UTF8');
ALTER TABLE events ALTER COLUMN payload TYPE BYTEA USING convert_to(payload, 'UTF8');
ALTER TABLE instances ALTER COLUMN params TYPE BYTEA USING convert_to(params, 'UTF8');
""",
    ),
]

LATEST = MIGRATIONS[-1][0]


async def migrate(connection: asyncpg.Connection) -> int:
    """Bring the schema to the latest version; returns how many migrations this call
    applied (0 when another node, or an earlier start, already did)."""
    applied = 0
    await connection.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
    try:
        await connection.execute(
            "CREATE TABLE IF NOT EXISTS celld_migrations ("
            "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        current = await connection.fetchval(
            "SELECT COALESCE(MAX(version), 0) FROM celld_migrations"
        )
        if current > LATEST:
            raise RuntimeError(
                f"the database's celld schema is version {current}, newer than this celld "
                f"knows ({LATEST}): upgrade celld on this node"
            )
        for version, sql in MIGRATIONS:
            if version <= current:
                continue
            async with connection.transaction():
                await connection.execute(sql)
                await connection.execute(
                    "INSERT INTO celld_migrations (version) VALUES ($1)", version
                )
            applied += 1
            log.info("applied celld schema migration %d", version)
    finally:
        await connection.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)
    return applied
