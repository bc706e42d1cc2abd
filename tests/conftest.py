"""Fixtures shared by every test folder: a real PostgreSQL for the tests that need one."""

from __future__ import annotations

from tests.postgres_fixtures import own_cluster, postgres_dsn, postgres_server

__all__ = ["own_cluster", "postgres_dsn", "postgres_server"]
