"""D1 databases: each one a real SQLite file, every statement committed before it answers.

What crosses the bridge: a statement is ``{"sql": str, "params": [value]}`` where a value is
null, a number, a string or ``{"$blob": base64}`` (JS turns booleans into 1/0 and refuses
other types with D1's D1_TYPE_ERROR, as workerd does before anything reaches SQLite). A result
is ``{"columns": [...], "rows": [[value]], "meta": {...}}`` with blobs as ``{"$blob": ...}``;
js/bindings/d1.js shapes it into objects, raw arrays or a first row.

Rules:

* A single statement runs in autocommit mode: it is one transaction, durable when it answers.
* ``batch()`` runs its statements in one IMMEDIATE transaction: any failure rolls all of them
  back (and nothing of it is on disk after a crash), as D1 promises.
* ``exec()`` splits its text into complete statements with SQLite's own tokenizer rule
  (``sqlite3.complete_statement``) and runs them one by one without parameters.
* Errors carry SQLite's message as D1 words it: ``D1_ERROR: <message>: SQLITE_<CODE>``.
* ``meta.rows_read`` and ``meta.rows_written`` are estimates: SQLite does not report the
  rows a statement scanned to Python, so rows_read counts rows returned (at least 1 for a
  statement that touched a row) and rows_written counts changed rows.
"""

from __future__ import annotations

import base64
import sqlite3
import time
from pathlib import Path
from typing import Any

from celld.bindings.storage import SqliteFile, transaction
from celld.isolate.host import HostError

Value = None | int | float | str | dict[str, str]


def d1_error(error: sqlite3.Error, prefix: str = "D1_ERROR") -> HostError:
    code = getattr(error, "sqlite_errorname", None) or "SQLITE_ERROR"
    return HostError(f"{prefix}: {error}: {code}")


def _bind(value: Any) -> Any:
    if isinstance(value, dict) and "$blob" in value:
        return base64.b64decode(value["$blob"])
    if value is None or isinstance(value, int | float | str):
        return value
    raise HostError(f"D1_TYPE_ERROR: Type '{type(value).__name__}' not supported for value")


def _wire(value: Any) -> Value:
    if isinstance(value, bytes):
        return {"$blob": base64.b64encode(value).decode("ascii")}
    return value  # type: ignore[no-any-return]


def split_statements(text: str) -> list[str]:
    """Complete statements of `text`, in order (comments and blank tails dropped)."""
    statements: list[str] = []
    current = ""
    for line in text.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    tail = current.strip()
    if tail and not _only_comments(tail):
        statements.append(tail)
    return [s for s in statements if not _only_comments(s)]


def _only_comments(text: str) -> bool:
    lines = [line.strip() for line in text.splitlines()]
    return all(not line or line.startswith("--") or line == ";" for line in lines)


class D1Database:
    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        self.file = SqliteFile(path, synchronous=synchronous)

    async def open(self) -> D1Database:
        await self.file.open()
        return self

    async def close(self) -> None:
        await self.file.close()

    @staticmethod
    def _size(conn: sqlite3.Connection) -> int:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(size)

    @classmethod
    def run_one(cls, conn: sqlite3.Connection, statement: dict[str, Any]) -> dict[str, Any]:
        sql = statement.get("sql")
        if not isinstance(sql, str):
            raise HostError("D1_ERROR: the statement's SQL must be a string", "TypeError")
        params = [_bind(v) for v in statement.get("params") or []]
        started = time.perf_counter()
        before = conn.total_changes
        try:
            cursor = conn.execute(sql, params)
            rows = cursor.fetchall()
        except sqlite3.ProgrammingError as error:
            raise HostError(f"D1_ERROR: {error}") from None
        except sqlite3.Error as error:
            raise d1_error(error) from None
        elapsed = (time.perf_counter() - started) * 1000
        changes = conn.total_changes - before
        columns = [d[0] for d in cursor.description or ()]
        last_row_id = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        return {
            "columns": columns,
            "rows": [[_wire(v) for v in row] for row in rows],
            "meta": {
                "duration": elapsed,
                "changes": changes if changes > 0 else 0,
                "last_row_id": last_row_id,
                "changed_db": changes > 0,
                "size_after": cls._size(conn),
                "rows_read": max(len(rows), 1 if changes else 0),
                "rows_written": changes,
            },
        }

    async def query(self, statements: list[dict[str, Any]], *, batch: bool) -> list[Any]:
        """One statement, or a batch in one transaction; the results in order."""
        if batch:
            return await self.file.run(
                lambda conn: transaction(conn, lambda c: [self.run_one(c, s) for s in statements])
            )
        return [await self.file.run(self.run_one, statements[0])]

    async def exec(self, text: str) -> dict[str, Any]:
        if not isinstance(text, str):
            raise HostError("D1_EXEC_ERROR: exec() takes a string of SQL", "TypeError")

        def run(conn: sqlite3.Connection) -> dict[str, Any]:
            started = time.perf_counter()
            statements = split_statements(text)
            for line, sql in enumerate(statements, start=1):
                try:
                    conn.execute(sql)
                except sqlite3.Error as error:
                    code = getattr(error, "sqlite_errorname", None) or "SQLITE_ERROR"
                    raise HostError(
                        f"D1_EXEC_ERROR: Error in line {line}: {sql}: {error}: {code}"
                    ) from None
            return {"count": len(statements), "duration": (time.perf_counter() - started) * 1000}

        return await self.file.run(run)
