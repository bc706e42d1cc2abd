"""Durable local storage for the bindings: SQLite files served by a thread, durable file writes.

Every write a binding acknowledges to JS is on disk first: SQLite runs in WAL mode with
``synchronous=FULL`` (a commit returns after its fsync), and R2 object files are written to a
temporary name, fsynced, renamed into place and their folder fsynced. SQLite and file I/O
block, so each file gets one worker thread of its own and the event loop only awaits it
(celld/store keeps the workflow journal the same way). One thread per file also serialises
that file's transactions, which is what D1 and KV promise.

A file that holds a Worker's own SQL (D1) is opened ``guarded``: through
celld/bindings/sqlguard.py, whose authorizer refuses what D1 refuses; celld's own statements
there (setup, BEGIN/COMMIT) run inside ``trusted()``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from celld.bindings import sqlguard

T = TypeVar("T")

SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


class SqliteFile:
    """One SQLite file and the thread that runs everything done to it."""

    def __init__(
        self, path: Path, *, schema: str = "", synchronous: str = "FULL", guarded: bool = False
    ) -> None:
        if synchronous.upper() not in SYNC_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(SYNC_MODES)}")
        self.path = path
        self.schema = schema
        self.synchronous = synchronous.upper()
        self.guarded = guarded
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None

    def _open(self) -> None:
        # Autocommit: every statement is its own transaction unless BEGIN is issued.
        conn: sqlite3.Connection
        if self.guarded:
            conn = sqlguard.connect(self.path)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        with sqlguard.trusted(conn):
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA foreign_keys=ON")
            if self.schema:
                conn.executescript(self.schema)
        self._conn = conn

    async def open(self) -> SqliteFile:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"sqlite-{self.path.name}")
            await self.run_blocking(self._open)
        return self

    def open_sync(self) -> sqlite3.Connection:
        """Open for a command-line tool (no event loop): the connection itself."""
        self._open()
        assert self._conn is not None
        return self._conn

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._executor is not None, f"{self.path} is not open"
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` on this file's thread."""

        def call() -> T:
            assert self._conn is not None
            return fn(self._conn, *args)

        return await self.run_blocking(call)

    async def close(self) -> None:
        if self._executor is None:
            return
        if self._conn is not None:
            await self.run_blocking(self._conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)
        self._executor = None


def transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn`` inside one IMMEDIATE transaction: all of it commits, or none of it. (On a
    guarded connection, BEGIN, COMMIT and ROLLBACK are celld's own; ``fn`` is not trusted.)"""
    with sqlguard.trusted(conn):
        conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
    except BaseException:
        with sqlguard.trusted(conn):
            conn.execute("ROLLBACK")
        raise
    with sqlguard.trusted(conn):
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            # A COMMIT refused (a deferred foreign key still violated) leaves the transaction
            # open: undo it, so the next one can begin.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return result


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path: Path, chunks: list[bytes]) -> None:
    """Write a file so that once this returns it survives a crash, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:
        for chunk in chunks:
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_dir(path.parent)
