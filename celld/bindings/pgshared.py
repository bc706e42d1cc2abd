"""The PostgreSQL connection pool of a project's KV namespaces and R2 buckets when their
data lives in a store shared by several nodes (`celld run --store postgresql://...`).

The bindings keep a pool of their own, apart from the workflow store's: a project may
bind KV or R2 without having any workflow, and a long R2 stream must not take the
connections workflow commits wait for. The schema is the store's (celld/store/pgschema.py),
migrated here too, so whichever opens first creates the tables.

Failures to reach the database reach the Worker as an error naming the operation; nothing
is retried behind its back (a put that failed may be retried by the Worker, and puts are
idempotent by key).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg

from celld.isolate.host import HostError
from celld.store.pgnodes import DEFAULT_LEASE_MS, session_settings
from celld.store.pgschema import migrate
from celld.store.postgres import redact

#: Seconds a statement may take (a chunk of 256 KiB, a page of a list) before it fails.
STATEMENT_TIMEOUT_S = 30.0
UNREACHABLE = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)


class SharedPool:
    """Connections to the shared database for the storage bindings of one project."""

    def __init__(self, dsn: str, *, size: int = 8) -> None:
        self.dsn = dsn
        self.size = size
        self._pool: asyncpg.Pool | None = None

    async def open(self) -> SharedPool:
        if self._pool is not None:
            return self
        try:
            connection = await asyncpg.connect(self.dsn, timeout=STATEMENT_TIMEOUT_S)
            try:
                await migrate(connection)
            finally:
                await connection.close()
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=self.size,
                command_timeout=STATEMENT_TIMEOUT_S,
                timeout=STATEMENT_TIMEOUT_S,
                server_settings=session_settings(
                    DEFAULT_LEASE_MS, int(STATEMENT_TIMEOUT_S * 1000), "bindings"
                ),
            )
        except UNREACHABLE as error:
            raise RuntimeError(
                f"cannot open the shared store at {redact(self.dsn)} for KV and R2: {error}"
            ) from error
        return self

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), STATEMENT_TIMEOUT_S)
        except (TimeoutError, *UNREACHABLE):
            pool.terminate()

    @contextlib.asynccontextmanager
    async def connection(self, what: str) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection; a database failure becomes an error naming `what` (the
        operation as the Worker called it)."""
        if self._pool is None:
            raise HostError(f"{what}: the shared store is not open")
        try:
            async with self._pool.acquire(timeout=STATEMENT_TIMEOUT_S) as connection:
                yield connection
        except asyncpg.PostgresError as error:
            raise HostError(
                f"{what}: the shared store refused it ({type(error).__name__}: {error})"
            ) from error
        except UNREACHABLE as error:
            raise HostError(
                f"{what}: the shared store could not be reached ({type(error).__name__}: {error})"
            ) from error
