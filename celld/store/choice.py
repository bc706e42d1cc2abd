"""Which store `celld run` uses: embedded SQLite under --persist-to (the default), or a
PostgreSQL database shared by several nodes (`--store postgresql://...`, CELLD_STORE)."""

from __future__ import annotations

from pathlib import Path

from celld.project.bindings import BindingsConfig
from celld.store.base import Store
from celld.store.pgnodes import lease_from_environment
from celld.store.postgres import PostgresStore, redact
from celld.store.sqlite import SqliteStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(spec: str | None) -> bool:
    return bool(spec) and spec.startswith(POSTGRES_SCHEMES)  # type: ignore[union-attr]


def check_store(spec: str | None, bindings: BindingsConfig) -> None:
    """Refuse what cannot work, at start, with what to do instead (ValueError)."""
    if spec in (None, "", "sqlite"):
        return
    lease_from_environment()  # a bad CELLD_NODE_LEASE_MS fails the start too
    if not is_postgres(spec):
        raise ValueError(
            f"--store must be 'sqlite' or a postgresql://USER@HOST:PORT/DB URL, not {spec!r}"
        )
    if not bindings.queues.empty:
        raise ValueError(
            f"--store {redact(spec)} (several nodes on one database) cannot be combined with "
            "Queues yet: celld keeps queue messages in a SQLite file under --persist-to "
            "(queues.sqlite3) and has no PostgreSQL table for them, so nodes would each hold "
            "different messages. Run this project on the default SQLite store (one node)."
        )
    kinds = [
        f"{kind} ({', '.join(b.binding for b in found)})"
        for kind, found in (
            ("KV", bindings.kv),
            ("D1", bindings.d1),
            ("R2", bindings.r2),
            ("Durable Object", bindings.objects.bindings),
        )
        if found
    ]
    if kinds:
        raise ValueError(
            f"--store {redact(spec)} (several nodes on one database) cannot be combined with "
            f"{', '.join(kinds)} bindings: celld keeps KV, D1, R2 and Durable Object data in "
            "files under --persist-to on each node, so nodes sharing workflows would each see "
            "different data (and run the same object twice). Run this project on the default "
            "SQLite store (one node), or move its storage bindings to a service every node "
            "reaches and remove them from the config."
        )


def open_store(spec: str | None, persist_to: Path, synchronous: str) -> Store:
    """The store `spec` names (not opened yet)."""
    if is_postgres(spec):
        assert spec is not None
        return PostgresStore(spec, lease_ms=lease_from_environment())
    return SqliteStore(persist_to / "celld.sqlite3", synchronous=synchronous)
