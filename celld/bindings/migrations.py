"""D1 migrations as wrangler keeps them: ``.sql`` files in ``migrations_dir``, applied in name
order, each recorded in the ``migrations_table`` (default ``d1_migrations``) with wrangler's
schema, so a database migrated by one tool is seen as migrated by the other.

A migration's statements and its record commit in one transaction: a failing migration leaves
the database as it was and stops the run; the ones before it stay applied. A migration is the
project's SQL, so it runs under D1's sandbox (celld/bindings/sqlguard.py) like a Worker's
statement, as wrangler applies migrations through D1; only the bookkeeping is celld's own.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from celld.bindings.d1 import StatementError, run_statement, split_statements
from celld.bindings.sqlguard import trusted
from celld.bindings.storage import transaction

_TABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Migration:
    name: str
    path: Path


class MigrationError(Exception):
    """A migration failed; the message names it and carries SQLite's error."""


def _table(name: str) -> str:
    if not _TABLE_RE.match(name):
        raise MigrationError(f"migrations_table {name!r} is not a plain SQL table name")
    return name


def ensure_table(conn: sqlite3.Connection, table: str) -> None:
    with trusted(conn):
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_table(table)} ("
            "id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, "
            "applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL)"
        )


def found(folder: Path) -> list[Migration]:
    if not folder.is_dir():
        return []
    return [Migration(p.name, p) for p in sorted(folder.glob("*.sql"))]


def applied(conn: sqlite3.Connection, table: str) -> list[str]:
    ensure_table(conn, table)
    with trusted(conn):
        return [row[0] for row in conn.execute(f"SELECT name FROM {_table(table)} ORDER BY id")]


def pending(conn: sqlite3.Connection, folder: Path, table: str) -> list[Migration]:
    done = set(applied(conn, table))
    return [m for m in found(folder) if m.name not in done]


def apply(conn: sqlite3.Connection, migration: Migration, table: str) -> None:
    apply_text(conn, migration.name, migration.path.read_text(encoding="utf-8"), table)


def apply_text(conn: sqlite3.Connection, name: str, text: str, table: str) -> None:
    """Apply one migration given as its SQL (a migration read elsewhere: a node that owns
    the database on a shared store), recorded under `name`, in one transaction."""
    statements = split_statements(text)

    def run(c: sqlite3.Connection) -> None:
        for sql in statements:
            try:
                run_statement(c, sql, []).fetchall()
            except StatementError as error:
                raise MigrationError(f"{name}: {error.text}") from None
        with trusted(c):
            c.execute(f"INSERT INTO {_table(table)} (name) VALUES (?)", (name,))

    transaction(conn, run)
