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
    (
        5,
        """
-- KV namespaces and R2 buckets shared by every node (celld/bindings/pgkv.py, pgr2.py).
-- Keys are their UTF-8 bytes: they sort bytewise, as on Cloudflare, and may hold NUL.
CREATE TABLE kv_entries (
    namespace TEXT NOT NULL,
    key BYTEA NOT NULL,
    value BYTEA NOT NULL,
    expiration BIGINT,
    metadata TEXT,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX kv_entries_expiring ON kv_entries (namespace, expiration)
    WHERE expiration IS NOT NULL;
-- An R2 body is a row here and its bytes in r2_chunks, one row per piece of at most
-- 256 KiB keyed by its offset. `state`: 'writing' (a streamed put still arriving),
-- 'live' (an object or a multipart part points at it) or 'dropped' (replaced or deleted,
-- kept a while for readers still streaming it); `touched` is when the state last changed
-- or a piece last arrived, by the database's clock.
CREATE TABLE r2_bodies (
    id BIGSERIAL PRIMARY KEY,
    state TEXT NOT NULL,
    touched TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX r2_bodies_not_live ON r2_bodies (state, touched) WHERE state <> 'live';
CREATE TABLE r2_chunks (
    body BIGINT NOT NULL REFERENCES r2_bodies (id) ON DELETE CASCADE,
    start BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (body, start)
);
-- Bodies are mostly incompressible: stored out of line without trying to compress them.
ALTER TABLE r2_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE TABLE r2_objects (
    bucket TEXT NOT NULL,
    key BYTEA NOT NULL,
    body BIGINT NOT NULL REFERENCES r2_bodies (id),
    size BIGINT NOT NULL,
    etag TEXT NOT NULL,
    version TEXT NOT NULL,
    uploaded BIGINT NOT NULL,
    http_metadata TEXT NOT NULL,
    custom_metadata TEXT NOT NULL,
    checksums TEXT NOT NULL,
    PRIMARY KEY (bucket, key)
);
CREATE TABLE r2_uploads (
    bucket TEXT NOT NULL,
    upload_id TEXT NOT NULL,
    key BYTEA NOT NULL,
    http_metadata TEXT NOT NULL,
    custom_metadata TEXT NOT NULL,
    PRIMARY KEY (bucket, upload_id)
);
CREATE TABLE r2_parts (
    bucket TEXT NOT NULL,
    upload_id TEXT NOT NULL,
    part_number INTEGER NOT NULL,
    body BIGINT NOT NULL REFERENCES r2_bodies (id),
    size BIGINT NOT NULL,
    etag TEXT NOT NULL,
    PRIMARY KEY (bucket, upload_id, part_number)
);
-- (Removing a body checks nothing points at it: these make that check an index probe.)
CREATE INDEX r2_objects_by_body ON r2_objects (body);
CREATE INDEX r2_parts_by_body ON r2_parts (body);
""",
    ),
    (
        6,
        """
-- Durable Objects and D1 databases on several nodes (celld/objects/placement.py): each is
-- owned by one node at a time (`owner`, a celld_nodes token; NULL or a token no longer
-- there: free to claim), keeps its SQLite file on its owner, and has here every page of
-- that file as of its last acknowledged commit (`version` counts the commits).
CREATE TABLE do_objects (
    namespace TEXT NOT NULL,
    object TEXT NOT NULL,
    owner BIGINT,
    version BIGINT NOT NULL DEFAULT 0,
    page_size INTEGER NOT NULL DEFAULT 0,
    page_count INTEGER NOT NULL DEFAULT 0,
    -- the object's alarm (ms since the epoch), its retries so far and the object's name
    alarm_at BIGINT,
    alarm_retries INTEGER NOT NULL DEFAULT 0,
    alarm_name TEXT,
    PRIMARY KEY (namespace, object)
);
CREATE INDEX do_objects_by_owner ON do_objects (owner);
CREATE INDEX do_objects_alarms ON do_objects (alarm_at) WHERE alarm_at IS NOT NULL;
CREATE TABLE do_pages (
    namespace TEXT NOT NULL,
    object TEXT NOT NULL,
    page_no INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (namespace, object, page_no)
);
""",
    ),
    (
        7,
        """
-- Queues on several nodes (celld/queues/pgqueues.py): each message a row from its send's
-- commit until it is acknowledged, dropped or moved to its dead letter queue; each
-- consumed queue consumed by the node whose fencing token `owner` names (NULL or a token
-- no longer in celld_nodes: free to claim).
CREATE TABLE queue_messages (
    seq BIGSERIAL PRIMARY KEY,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    timestamp_ms BIGINT NOT NULL,
    content_type TEXT NOT NULL,
    body BYTEA NOT NULL,
    visible_at BIGINT NOT NULL,
    failed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX queue_messages_by_queue ON queue_messages (queue, seq);
CREATE TABLE queue_consumers (
    queue TEXT PRIMARY KEY,
    owner BIGINT
);
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
