"""One object's durable storage: a SQLite file of its own, used from the object's JS thread.

Why a file per object: an object of a SQLite-backed class creates its own tables with
``ctx.storage.sql``, and those must never meet another object's; ``deleteAll()`` and
``databaseSize`` are per object too. A file per object makes all three exact, lets an
evicted object cost nothing but its file, and keeps one object's writes from waiting on
another's. Key-value pairs live in the table ``_cf_KV`` of the same file (as in workerd),
which user SQL may not touch.

Why synchronous: ``sql.exec`` and ``transactionSync`` return their results at once, and JS
reaches the host synchronously only through a function the isolate calls in place (see
``celld/objects/live.py``). Every call runs on the object's JS thread, so nothing else
touches the connection while JS runs, and a storage call never lets another event in:
the input gate holds by construction.

Output gate: writes open a transaction that commits once per turn of the isolate, before
the turn's outgoing messages (responses, RPC results, fetches) leave it. A commit that
fails breaks the object (its isolate is dropped, callers get an error) and nothing that
depended on the lost writes was released. On a store shared by several nodes the commit
also writes the pages it changed to PostgreSQL before the turn ends (``shared``,
celld/objects/placement.py), so an acknowledged write survives its node.

Sandbox: the file is opened through celld/bindings/sqlguard.py, the same authorizer and limits
as D1 (workerd runs one for both). ``sql.exec()`` runs in its Worker mode; everything else
here (the turn's BEGIN/COMMIT, savepoints, ``_cf_KV``, sizes) is celld's own and runs inside
``trusted()``.
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from celld.bindings.sqlguard import TRANSACTION_MESSAGE, GuardedConnection, sqlite_words
from celld.bindings.storage import SqliteFile

if TYPE_CHECKING:
    from celld.objects.placement import SharedFile

MAX_KEY_BYTES = 2048
# Created by the first write of the key-value API, as in workerd (before that, user SQL that
# names it finds no such table).
SCHEMA = "CREATE TABLE IF NOT EXISTS _cf_KV (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID"


class StorageError(Exception):
    def __init__(self, message: str, js_name: str = "Error") -> None:
        super().__init__(message)
        self.js_name = js_name


def _split(query: str) -> list[str]:
    """The statements of `query`, in order (a `;` inside a string or comment is kept)."""
    statements: list[str] = []
    current = ""
    for piece in query.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \t\r\n;"):
                statements.append(current)
            current = ""
    if current.strip(" \t\r\n;"):
        statements.append(current)
    return statements


def _binding(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict) and isinstance(value.get("b64"), str):
        return base64.b64decode(value["b64"])
    if value is None or isinstance(value, int | float | str):
        return value
    raise StorageError(
        f"SQL bindings must be strings, numbers, null or ArrayBuffers, got {value!r}", "TypeError"
    )


def _cell(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode("ascii")}
    return value


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise StorageError("Durable Object storage keys must be strings", "TypeError")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise StorageError(f"Keys cannot be larger than {MAX_KEY_BYTES} bytes.", "RangeError")
    return key


class ObjectStorage:
    """The storage of one object; `alarms` handles ``alarm.*`` calls (manager.py)."""

    def __init__(
        self,
        path: Path,
        *,
        sqlite: bool,
        alarms: Callable[[str, dict[str, Any]], Any],
        synchronous: str = "FULL",
        shared: SharedFile | None = None,
    ) -> None:
        """`shared`: on a store shared by several nodes, where each commit's pages go
        before the turn ends (celld/objects/placement.py)."""
        self.path = path
        self.shared = shared
        self.sqlite = sqlite
        self.alarms = alarms
        self.synchronous = synchronous
        self._conn: GuardedConnection | None = None
        self._depth = 0  # open transaction()/transactionSync() savepoints
        self._kv = False  # the _cf_KV table exists
        self.writes = 0  # committed turns that wrote (for metrics and tests)

    def open(self) -> None:
        # The bindings' SQLite setup: WAL, this synchronous mode, foreign keys enforced; guarded.
        conn = SqliteFile(self.path, synchronous=self.synchronous, guarded=True).open_sync()
        assert isinstance(conn, GuardedConnection)
        self._conn = conn
        if self.shared is not None:
            self.shared.attach(conn)
        self._set_kv(self._has_kv_table(conn))

    @staticmethod
    def _has_kv_table(conn: GuardedConnection) -> bool:
        with conn.trusted():
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = '_cf_KV'").fetchone()
        return found is not None

    def _set_kv(self, exists: bool) -> None:
        """Whether celld's _cf_KV table exists (the one reserved name a Worker's SQL may meet)."""
        self._kv = exists
        if self._conn is not None:
            self._conn.owned = {"_cf_KV"} if exists else set()

    def close(self) -> None:
        """Drop the connection; a transaction not yet committed is rolled back."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> GuardedConnection:
        if self._conn is None:
            raise StorageError("this Durable Object's storage is closed")
        return self._conn

    # -- the turn's transaction ------------------------------------------------------

    def _begin(self) -> GuardedConnection:
        conn = self.conn
        if not conn.in_transaction:
            with conn.trusted():
                conn.execute("BEGIN")
        return conn

    def end_turn(self) -> None:
        """Commit what the turn wrote (called on the JS thread before its outbox leaves)."""
        conn = self._conn
        if conn is not None and conn.in_transaction and self._depth == 0:
            changed = conn.total_changes
            with conn.trusted():
                conn.execute("COMMIT")
            if changed:
                self.writes += 1
            if self.shared is not None:
                # The pages go to the shared store before the turn ends: nothing the turn
                # sends is released before every node can read what it wrote. A failure
                # faults the object (nothing of the turn leaves).
                changes = self.shared.changes(conn)
                if changes is not None:
                    self.shared.ship_blocking(changes)
                    self.shared.shipped(conn)

    # -- the bridge ------------------------------------------------------------------

    def call(self, text: str) -> str:
        """One synchronous call from JS: JSON in, ``{"v": ...}`` or ``{"e": {...}}`` out."""
        try:
            message = orjson.loads(text)
            value = self._dispatch(str(message.get("op")), message)
            return orjson.dumps({"v": value}).decode()
        except StorageError as error:
            shape = {"name": error.js_name, "message": str(error)}
        except sqlite3.Error as error:
            shape = {"name": "Error", "message": f"{error}: SQLITE_ERROR"}
        except (KeyError, TypeError, ValueError, orjson.JSONDecodeError) as error:
            # A malformed call (the runtime's own JS builds them): a clear error, not a crash.
            shape = {"name": "TypeError", "message": f"celld: bad storage call: {error!r}"}
        return orjson.dumps({"e": shape}).decode()

    def _dispatch(self, op: str, m: dict[str, Any]) -> Any:
        if op.startswith("alarm."):
            return self.alarms(op, m)
        handler = getattr(self, "op_" + op.replace(".", "_"), None)
        if handler is None:
            raise StorageError(f"celld: Durable Object storage has no operation {op!r}")
        if op == "sql":
            return handler(m)  # a Worker's SQL: the sandbox's Worker mode
        with self.conn.trusted():
            return handler(m)

    # -- key-value API ---------------------------------------------------------------

    def _kv_table(self, create: bool) -> sqlite3.Connection | None:
        """The connection, in the turn's transaction; None while there is no _cf_KV table
        and `create` is false (a read or delete of an object that never wrote a key)."""
        conn = self._begin()
        if not self._kv:
            if not create:
                return None
            conn.execute(SCHEMA)
            self._set_kv(True)
        return conn

    def op_get(self, m: dict[str, Any]) -> list[str | None]:
        conn = self._kv_table(False)
        if conn is None:
            return [None for key in m["keys"] if _key(key) is not None]
        out = []
        for key in m["keys"]:
            row = conn.execute("SELECT value FROM _cf_KV WHERE key = ?", (_key(key),)).fetchone()
            out.append(None if row is None else row[0])
        return out

    def op_put(self, m: dict[str, Any]) -> None:
        conn = self._kv_table(True)
        assert conn is not None
        rows = [(_key(k), v) for k, v in m["entries"]]
        conn.executemany("INSERT OR REPLACE INTO _cf_KV (key, value) VALUES (?, ?)", rows)

    def op_delete(self, m: dict[str, Any]) -> int:
        conn = self._kv_table(False)
        if conn is None:
            return 0
        count = 0
        for key in m["keys"]:
            count += conn.execute("DELETE FROM _cf_KV WHERE key = ?", (_key(key),)).rowcount
        return count

    def op_list(self, m: dict[str, Any]) -> list[list[str]]:
        limit = m.get("limit")
        if limit is not None and (not isinstance(limit, int) or limit <= 0):
            raise StorageError("List limit must be positive.", "RangeError")
        conn = self._kv_table(False)
        if conn is None:
            return []
        where, args = [], []
        if m.get("start") is not None:
            where.append("key >= ?")
            args.append(str(m["start"]))
        if m.get("startAfter") is not None:
            where.append("key > ?")
            args.append(str(m["startAfter"]))
        if m.get("end") is not None:
            where.append("key < ?")
            args.append(str(m["end"]))
        prefix = m.get("prefix")
        if prefix:
            where.append("key >= ? AND substr(key, 1, ?) = ?")
            args.extend([prefix, len(prefix), prefix])
        sql = "SELECT key, value FROM _cf_KV"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY key " + ("DESC" if m.get("reverse") else "ASC")
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [[k, v] for k, v in conn.execute(sql, args)]

    def op_deleteAll(self, m: dict[str, Any]) -> None:  # noqa: N802 - the JS method's name
        conn = self._begin()
        if self._kv:
            conn.execute("DELETE FROM _cf_KV")
        if self.sqlite:
            rows = conn.execute(
                "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
                "AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND type IN ('table', 'view')"
            ).fetchall()
            for kind, name in rows:
                quoted = '"' + name.replace('"', '""') + '"'
                conn.execute(f"DROP {kind.upper()} IF EXISTS {quoted}")

    # -- transactions ----------------------------------------------------------------

    def op_txn_begin(self, m: dict[str, Any]) -> None:
        conn = self._begin()
        self._depth += 1
        conn.execute(f"SAVEPOINT celld_{self._depth}")

    def op_txn_commit(self, m: dict[str, Any]) -> None:
        if self._depth == 0:
            raise StorageError("celld: no transaction is open")
        self.conn.execute(f"RELEASE celld_{self._depth}")
        self._depth -= 1

    def op_txn_rollback(self, m: dict[str, Any]) -> None:
        if self._depth == 0:
            raise StorageError("celld: no transaction is open")
        self.conn.execute(f"ROLLBACK TO celld_{self._depth}")
        self.conn.execute(f"RELEASE celld_{self._depth}")
        self._depth -= 1
        self._set_kv(self._has_kv_table(self.conn))  # the rollback may have dropped it

    # -- SQL API ---------------------------------------------------------------------

    def op_sql(self, m: dict[str, Any]) -> dict[str, Any]:
        if not self.sqlite:
            raise StorageError(
                "SQL is not enabled for this Durable Object class. Declare it in "
                "new_sqlite_classes of a migration in your wrangler config."
            )
        query = m.get("query")
        if not isinstance(query, str):
            raise StorageError("sql.exec() takes the query as a string", "TypeError")
        bindings = [_binding(v) for v in m.get("bindings") or []]
        statements = _split(query)
        if not statements:
            raise StorageError("sql.exec(): the query has no statement", "Error")
        conn = self._begin()
        before = conn.total_changes
        try:
            columns: list[str] = []
            rows: list[list[Any]] = []
            for index, statement in enumerate(statements):
                last = index == len(statements) - 1
                cursor = conn.run(statement, bindings if last else ())
                if last:
                    columns = [d[0] for d in cursor.description or ()]
                    rows = [[_cell(v) for v in row] for row in cursor.fetchall()]
        except sqlite3.Error as error:
            if conn.refused_transaction():
                raise StorageError(TRANSACTION_MESSAGE) from None
            raise StorageError(self._words(error)) from None
        written = conn.total_changes - before
        return {"columns": columns, "rows": rows, "read": len(rows), "written": written}

    @staticmethod
    def _words(error: sqlite3.Error) -> str:
        """workerd's ``message: SQLITE_CODE`` for a refusal or an oversized statement;
        ``message: SQLITE_ERROR`` for the rest, as before."""
        if getattr(error, "sqlite_errorname", None) == "SQLITE_AUTH" or isinstance(
            error, sqlite3.DataError
        ):
            return sqlite_words(error)
        return f"{error}: SQLITE_ERROR"

    def op_size(self, m: dict[str, Any]) -> int:
        conn = self.conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int(pages * size)

    def op_sync(self, m: dict[str, Any]) -> None:
        return None
