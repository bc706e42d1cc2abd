"""A real PostgreSQL for the tests: the cluster `.ci/run` started (CELLD_TEST_POSTGRES), or
one started here for the session (tests/pgcluster.py), and a fresh database per test.

Without PostgreSQL on the machine the tests that need it skip, saying why; in CI
(CI=true) a missing cluster is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from tests import pgcluster


def require_cluster() -> None:
    """Skip (fail in CI) unless a cluster of a test's own can be started here."""
    why = pgcluster.available()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required in CI: {why}")
        pytest.skip(f"PostgreSQL is not available: {why}")


@pytest.fixture
def own_cluster() -> Iterator[Path]:
    """A cluster of the test's own (which it may crash and restart), started; its DSN is
    in the folder's `dsn` file."""
    require_cluster()
    folder = pgcluster.new_folder()
    try:
        pgcluster.start(folder)
        yield folder
    finally:
        pgcluster.stop(folder, "immediate")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """DSN of a PostgreSQL server where the tests may create databases."""
    dsn = os.environ.get("CELLD_TEST_POSTGRES")
    if dsn:
        yield dsn
        return
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but CELLD_TEST_POSTGRES is not set: .ci/run starts the cluster")
    why = pgcluster.available()
    if why:
        pytest.skip(f"PostgreSQL is not available: {why}")
    folder = pgcluster.new_folder()
    try:
        yield pgcluster.start(folder)
    finally:
        pgcluster.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)


def database_dsn(server: str, name: str) -> str:
    return server.rsplit("/", 1)[0] + "/" + name


async def create_database(server: str) -> str:
    """A new, empty database on `server`; returns its DSN."""
    name = f"celld_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return database_dsn(server, name)


async def drop_database(server: str, dsn: str) -> None:
    name = dsn.rsplit("/", 1)[1]
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def postgres_dsn(postgres_server: str) -> AsyncIterator[str]:
    """A DSN to a new, empty database, dropped after the test."""
    dsn = await create_database(postgres_server)
    try:
        yield dsn
    finally:
        await drop_database(postgres_server, dsn)
