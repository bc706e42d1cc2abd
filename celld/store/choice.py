"""Which store `celld run` uses: embedded SQLite under --persist-to (the default), or a
PostgreSQL database shared by several nodes (`--store postgresql://...`, CELLD_STORE).
The PostgreSQL modules (and asyncpg, ~2.7 MB of an idle server's RSS) are imported only
when the store is PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from celld.project.bindings import BindingsConfig
from celld.store.base import Store
from celld.store.sqlite import SqliteStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(spec: str | None) -> bool:
    return bool(spec) and spec.startswith(POSTGRES_SCHEMES)  # type: ignore[union-attr]


def check_store(spec: str | None, bindings: BindingsConfig) -> None:
    """Refuse what cannot work, at start, with what to do instead (ValueError)."""
    if spec in (None, "", "sqlite"):
        return
    from celld.store.pgnodes import lease_from_environment
    from celld.store.postgres import redact

    lease_from_environment()  # a bad CELLD_NODE_LEASE_MS fails the start too
    if not is_postgres(spec):
        raise ValueError(
            f"--store must be 'sqlite' or a postgresql://USER@HOST:PORT/DB URL, not {spec!r}"
        )
    # KV namespaces and R2 buckets live in the shared database (celld/bindings/pgkv.py,
    # pgr2.py); Durable Objects and D1 databases are placed on one node at a time, their
    # pages in the database (celld/objects/placement.py); queue messages are rows of the
    # database, each queue consumed by one node (celld/queues/pgqueues.py). Class renames
    # and deletions are migrations of files under --persist-to and do not reach the shared
    # pages: refused.
    moved = [m.tag for m in bindings.objects.migrations if m.renamed_classes or m.deleted_classes]
    if moved:
        raise ValueError(
            f"--store {redact(spec)} (several nodes on one database) cannot apply the Durable "
            f"Object migrations {', '.join(moved)} (renamed_classes/deleted_classes) yet: "
            "their objects' storage lives in the shared database, which those migrations do "
            "not move. Apply them on the default SQLite store, or start with new class names."
        )


#: Connections of a node's store when it also places objects and D1 databases: their page
#: writes and forwarded calls share the pool with workflow commits.
PLACEMENT_POOL_SIZE = 10


def open_store(
    spec: str | None, persist_to: Path, synchronous: str, *, placement: bool = False
) -> Store:
    """The store `spec` names (not opened yet)."""
    if is_postgres(spec):
        assert spec is not None
        from celld.store.pgnodes import lease_from_environment
        from celld.store.postgres import PostgresStore

        return PostgresStore(
            spec,
            lease_ms=lease_from_environment(),
            **({"pool_size": PLACEMENT_POOL_SIZE} if placement else {}),
        )
    return SqliteStore(persist_to / "celld.sqlite3", synchronous=synchronous)
