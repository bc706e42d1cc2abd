"""The `store` fixture the store tests share: every backend, each test on a fresh one (the
real SQLite store in a temp folder, the real PostgreSQL store on a fresh database,
tests/postgres_fixtures.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from celld.store.postgres import PostgresStore
from celld.store.sqlite import SqliteStore
from tests.postgres_fixtures import create_database, drop_database


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SqliteStore | PostgresStore]:
    opened: SqliteStore | PostgresStore
    server = dsn = None
    if request.param == "sqlite":
        opened = SqliteStore(tmp_path / "state.sqlite3")
    else:
        server = request.getfixturevalue("postgres_server")
        dsn = await create_database(server)
        opened = PostgresStore(dsn)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()
        if server and dsn:
            await drop_database(server, dsn)
