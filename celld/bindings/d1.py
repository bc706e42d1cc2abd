"""D1 databases: each one a real SQLite file, every statement committed before it answers.

What crosses the bridge: a statement is ``{"sql": str, "params": [value]}`` where a value is
null, a number (bound as REAL, as D1 binds JS numbers), a string or ``{"$blob": base64}``; JS
turns booleans into 1/0 and refuses other types with D1's D1_TYPE_ERROR, as workerd does
before anything reaches SQLite. A result is ``{"columns": [...], "rows": [[value]],
"meta": {...}}`` with blobs as ``{"$blob": ...}``; js/bindings/d1.js shapes it into objects,
raw arrays or a first row.

Rules:

* Every query runs in a transaction of its own, as D1 (and wrangler dev's D1, a Durable Object
  running each query in ``storage.transaction()``) runs it: durable when it answers, undone
  whole when any part fails. A prepared text holding several statements runs them all; the
  last one's rows answer. PRAGMAs that SQLite ignores inside a transaction
  (``foreign_keys``) are ignored here too, as D1 documents.
* A Worker's SQL runs under celld/bindings/sqlguard.py: what D1 refuses (ATTACH, VACUUM,
  PRAGMAs beyond D1's list, temp tables, ``_cf_`` names, functions beyond workerd's list) is
  refused with SQLite's ``not authorized``, and no statement reaches a file but the
  database's own.
* ``batch()`` runs its statements in one IMMEDIATE transaction: any failure rolls all of them
  back (and nothing of it is on disk after a crash), as D1 promises.
* ``exec()`` runs each non-blank, non-comment line (a line may hold several statements,
  split with ``sqlite3.complete_statement``), all in one transaction, and counts the lines.
* Errors carry SQLite's message as D1 words it: ``D1_ERROR: <message>: SQLITE_<CODE>``, with
  ``(extended: SQLITE_<CODE>_<DETAIL>)`` for extended codes; ``BEGIN``, ``COMMIT``,
  ``ROLLBACK``, ``SAVEPOINT`` and ``RELEASE`` are refused with workerd's message.
* ``meta.rows_read`` is an estimate: SQLite does not report the rows a statement scanned to
  Python, so it counts rows returned by a query (0 for INSERT and for SELECT without FROM,
  the changed rows for UPDATE and DELETE); ``rows_written`` counts the last statement's
  changed rows.
"""

from __future__ import annotations

import base64
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from celld.bindings.sqlguard import TRANSACTION_MESSAGE, GuardedConnection, sqlite_words, trusted
from celld.bindings.storage import SqliteFile, transaction
from celld.isolate.host import HostError

Value = None | int | float | str | dict[str, str]


NO_STATEMENTS = "No SQL statements detected."
WRONG_BINDINGS = "Wrong number of parameter bindings for SQL query."
_FROM_RE = re.compile(r"\bFROM\b", re.IGNORECASE)


class StatementError(Exception):
    """A statement failed; `text` is D1's wording without the D1_ERROR prefix."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def run_statement(conn: sqlite3.Connection, sql: str, params: list[Any]) -> sqlite3.Cursor:
    """One statement of a Worker's SQL, under the D1 sandbox; errors in D1's words."""
    if not isinstance(conn, GuardedConnection):
        raise RuntimeError("celld: D1 SQL must run on a guarded connection (sqlguard.connect)")
    try:
        return conn.run(sql, params)
    except sqlite3.ProgrammingError as error:
        if "bindings" in str(error):
            raise StatementError(WRONG_BINDINGS) from None
        raise StatementError(str(error)) from None
    except sqlite3.Error as error:
        if conn.refused_transaction():
            raise StatementError(TRANSACTION_MESSAGE) from None
        raise StatementError(sqlite_words(error)) from None


def open_file(path: Path, *, synchronous: str = "FULL") -> SqliteFile:
    """The file of a D1 database (guarded: see celld/bindings/sqlguard.py)."""
    return SqliteFile(path, synchronous=synchronous, guarded=True)


def _bind(value: Any) -> Any:
    if isinstance(value, dict) and "$blob" in value:
        return base64.b64decode(value["$blob"])
    if isinstance(value, int | float) and not isinstance(value, bool):
        # A JS number is a double, and D1 binds it as REAL (typeof(?) is 'real' for 2 and for
        # true); columns with INTEGER affinity still store whole values as integers.
        return float(value)
    if value is None or isinstance(value, str):
        return value
    raise HostError(f"D1_TYPE_ERROR: Type '{type(value).__name__}' not supported for value")


def _wire(value: Any) -> Value:
    if isinstance(value, bytes):
        return {"$blob": base64.b64encode(value).decode("ascii")}
    return value  # type: ignore[no-any-return]


def split_statements(text: str) -> list[str]:
    """Complete statements of `text`, in order (comments and blank tails dropped); an
    unfinished tail is kept, so SQLite reports it as incomplete."""
    statements: list[str] = []
    current = ""
    for char in text:
        current += char
        if char == ";" and sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    tail = current.strip()
    if tail:
        statements.append(tail)
    return [s for s in statements if not _only_comments(s)]


def _only_comments(text: str) -> bool:
    lines = [line.strip() for line in text.splitlines()]
    return all(not line or line.startswith("--") or line == ";" for line in lines)


class D1Database:
    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        self.file = open_file(path, synchronous=synchronous)

    async def open(self) -> D1Database:
        await self.file.open()
        return self

    async def close(self) -> None:
        await self.file.close()

    @staticmethod
    def _size(conn: sqlite3.Connection) -> int:
        with trusted(conn):
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(size)

    @classmethod
    def run_one(cls, conn: sqlite3.Connection, statement: dict[str, Any]) -> dict[str, Any]:
        """One prepared statement. Its text may hold several statements: all run, the last
        one's rows are the result and `changes` counts them all (as local D1 does)."""
        sql = statement.get("sql")
        if not isinstance(sql, str):
            raise HostError("D1_ERROR: the statement's SQL must be a string", "TypeError")
        params = [_bind(v) for v in statement.get("params") or []]
        parts = split_statements(sql)
        if not parts:
            raise HostError(f"D1_ERROR: {NO_STATEMENTS}")
        started = time.perf_counter()
        before = conn.total_changes
        try:
            for index, part in enumerate(parts):
                last_before = conn.total_changes
                cursor = run_statement(conn, part, params if index == len(parts) - 1 else [])
                rows = cursor.fetchall()
        except StatementError as error:
            raise HostError(f"D1_ERROR: {error.text}") from None
        elapsed = round((time.perf_counter() - started) * 1000)
        changes = conn.total_changes - before
        written = conn.total_changes - last_before
        columns = [d[0] for d in cursor.description or ()]
        with trusted(conn):
            last_row_id = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        verb = parts[-1].lstrip().split(None, 1)[0].upper() if parts[-1].strip() else ""
        if verb in ("UPDATE", "DELETE"):
            rows_read = written
        elif verb == "INSERT" or not columns or not _FROM_RE.search(parts[-1]):
            rows_read = 0
        else:
            rows_read = len(rows)
        return {
            "columns": columns,
            "rows": [[_wire(v) for v in row] for row in rows],
            "meta": {
                "duration": elapsed,
                "changes": changes,
                "last_row_id": last_row_id,
                "changed_db": changes > 0,
                "size_after": cls._size(conn),
                "rows_read": rows_read,
                "rows_written": written,
            },
        }

    async def query(self, statements: list[dict[str, Any]], *, batch: bool) -> list[Any]:
        """One statement, or a batch, in one transaction; the results in order."""
        todo = statements if batch else statements[:1]

        def run(conn: sqlite3.Connection) -> list[Any]:
            try:
                return transaction(conn, lambda c: [self.run_one(c, s) for s in todo])
            except sqlite3.Error as error:  # the COMMIT (a deferred foreign key still violated)
                raise HostError(f"D1_ERROR: {sqlite_words(error)}") from None

        return await self.file.run(run)

    async def exec(self, text: str) -> dict[str, Any]:
        """`exec()`: each non-blank line is run as SQL (it may hold several statements), all
        in one transaction; `count` is the number of lines run."""
        if not isinstance(text, str):
            raise HostError("D1_EXEC_ERROR: exec() takes a string of SQL", "TypeError")
        written = [line.strip() for line in text.split("\n") if line.strip()]
        lines = [line for line in written if not _only_comments(line)]
        if not lines:
            first = written[0] if written else ""
            raise HostError(f"D1_EXEC_ERROR: Error in line 1: {first}: {NO_STATEMENTS}")

        def run_lines(conn: sqlite3.Connection) -> None:
            for number, line in enumerate(lines, start=1):
                try:
                    for sql in split_statements(line):
                        run_statement(conn, sql, []).fetchall()
                except StatementError as error:
                    raise HostError(
                        f"D1_EXEC_ERROR: Error in line {number}: {line}: {error.text}"
                    ) from None

        def run(conn: sqlite3.Connection) -> dict[str, Any]:
            started = time.perf_counter()
            try:
                transaction(conn, run_lines)
            except sqlite3.Error as error:  # the COMMIT
                raise HostError(f"D1_EXEC_ERROR: {sqlite_words(error)}") from None
            return {"count": len(lines), "duration": round((time.perf_counter() - started) * 1000)}

        return await self.file.run(run)
