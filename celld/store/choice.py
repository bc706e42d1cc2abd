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
    # KV namespaces and R2 buckets live in the shared database (celld/bindings/pgkv.py,
    # pgr2.py). D1 databases and Durable Objects still have one SQLite file per database or
    # object under --persist-to and no placement on one node at a time: refused.
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
            ("D1", bindings.d1),
            ("Durable Object", bindings.objects.bindings),
        )
        if found
    ]
    if kinds:
        raise ValueError(
            f"--store {redact(spec)} (several nodes on one database) cannot be combined with "
            f"{', '.join(kinds)} bindings yet: celld keeps D1 databases and Durable Object "
            "storage in files under --persist-to on each node, so nodes would each see "
            "different data (and run the same object twice). KV and R2 bindings do work on a "
            "shared store. Run this project on the default SQLite store (one node), or move "
            "those bindings to a service every node reaches and remove them from the config."
        )


def open_store(spec: str | None, persist_to: Path, synchronous: str) -> Store:
    """The store `spec` names (not opened yet)."""
    if is_postgres(spec):
        assert spec is not None
        return PostgresStore(spec, lease_ms=lease_from_environment())
    return SqliteStore(persist_to / "celld.sqlite3", synchronous=synchronous)
