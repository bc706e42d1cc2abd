"""The sandbox of a Worker's SQL: one SQLite authorizer and one set of limits for D1 databases
(celld/bindings/d1.py, ``celld d1``) and Durable Object SQL storage (celld/objects/storage.py).

Why: SQLite can reach far beyond its own file. ``ATTACH '/any/path' AS x`` opens or creates any
file the celld process may write, and through it celld's own workflow store (forged step
outputs) or another project's databases; ``VACUUM INTO`` writes a copy anywhere; a ``file:``
name is a URI with options of its own (the SQLite that Python links here is built with
``SQLITE_USE_URI``, so any name starting ``file:`` is read as one); ``PRAGMA database_list``
names the state folder; ``PRAGMA writable_schema`` lets SQL rewrite the schema into a corrupt
file; ``fts3_tokenizer()`` hands out (and with two arguments takes) native function pointers.
Cloudflare runs D1 and SQL storage alike under workerd's authorizer
(``src/workerd/util/sqlite.c++``: ``isAuthorized``, ``setupSecurity``), and ``wrangler dev``
runs the same one; celld applies the same rules, so SQL that works on Cloudflare works here
and SQL that Cloudflare refuses is refused here with the same error.

What a connection gets (:func:`connect`):

* its file by absolute path, never as a URI: a name that looks like one (``file:...``,
  ``:memory:``) is refused with a ValueError before SQLite sees it;
* extension loading off (``enable_load_extension(False)`` where Python offers it; the
  ``load_extension()`` SQL function then fails with SQLite's ``not authorized``);
* workerd's limits (see :data:`LIMITS`): no attached database at all
  (``SQLITE_LIMIT_ATTACHED`` = 0, a second wall behind the authorizer), 100 columns, 100 bound
  parameters, 100,000 bytes of SQL per statement, 5 terms per compound SELECT, expression depth
  100, LIKE patterns of 50 bytes, trigger depth 10, no helper threads;
* statements prepared for celld's own work are never reused for a Worker's: the first Worker
  statement after celld's own expires every prepared statement (setting the authorizer again
  does that), so a cached one is prepared, and authorized, again in Worker mode;
* the authorizer below for its whole life, in *Worker* mode unless celld's own code enters
  :meth:`GuardedConnection.trusted`.

Rules in Worker mode (each refusal is SQLite's ``not authorized`` with code ``SQLITE_AUTH``;
D1 words it ``D1_ERROR: not authorized: SQLITE_AUTH``, as wrangler dev does):

* only the ``main`` database: ``ATTACH`` and ``DETACH`` are refused, and so are ``VACUUM`` and
  ``VACUUM INTO`` (SQLite vacuums by attaching a database: ``authorization denied``; D1 and SQL
  storage run each query in a transaction, where SQLite's ``cannot VACUUM from within a
  transaction`` answers first, as under wrangler dev);
  ``temp`` may only be read (``CREATE TEMP ...`` is refused: temp objects live in files of
  their own);
* PRAGMAs: D1's documented list and nothing else. Read or set (``on``/``off``/``true``/...):
  ``case_sensitive_like``, ``foreign_keys``, ``defer_foreign_keys``,
  ``ignore_check_constraints``, ``legacy_alter_table``, ``recursive_triggers``,
  ``reverse_unordered_selects``; with a table or index name: ``table_info``, ``table_xinfo``,
  ``index_info``, ``index_list``, ``index_xinfo``, ``foreign_key_list``; ``foreign_key_check``
  with or without one; ``quick_check`` with a name, a number or nothing; ``optimize`` with a
  number or nothing; ``table_list``; and, read-only, ``data_version`` and ``page_size`` (FTS5
  and R*Tree read them). Everything else (``database_list``, ``writable_schema``,
  ``journal_mode``, ``integrity_check``, ``page_count``, ``pragma_list``, unknown names, and
  the ``pragma_*`` table-valued functions of all of them) is refused;
* functions: workerd's list (:data:`FUNCTIONS`: core, date, aggregate, window, math, JSON,
  FTS5, ``rtreecheck``, and the helpers ALTER TABLE calls); ``sqlite_version()``,
  ``fts3_tokenizer()``, ``sqlite_compileoption_*()`` and anything newer are refused with
  ``not authorized to use function: NAME`` (code ``SQLITE_ERROR``, as SQLite reports it);
* virtual tables only of the modules ``fts5``, ``fts5vocab``, ``rtree`` and ``rtree_i32``;
* names starting ``_cf_`` (any case) are reserved: SQL storage keeps its key-value pairs in
  ``_cf_KV``; creating, reading, writing or dropping such a table, or renaming a table into
  that namespace, is refused;
* ``BEGIN``, ``COMMIT``, ``ROLLBACK``, ``SAVEPOINT`` and ``RELEASE`` are refused: D1 and SQL
  storage decide where transactions begin and end (the refusal is worded by the caller with
  workerd's ``To execute a transaction, please use ...`` message).

Trusted mode (celld's own BEGIN/COMMIT, the key-value table, page counts, migration
bookkeeping) allows everything but another database than ``main`` or ``temp``.

Known differences from workerd's SQLite, none of which reaches a file: Python links SQLite 3.40,
which has the ``dbstat`` and ``sqlite_stmt`` virtual tables (they describe only this
connection's own database and statements; an authorizer cannot see reads of them) and FTS3
(``CREATE VIRTUAL TABLE ... USING fts3`` is refused all the same), and words syntax errors
without workerd's ``at offset N``.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

#: workerd's setupSecurity() limits, minus two that wrangler dev does not enforce as written:
#: SQLITE_LIMIT_LENGTH (it stores values over 4 MiB) and SQLITE_LIMIT_VDBE_OP (it runs an
#: 8,000-row INSERT, well over 25,000 instructions).
LIMITS: dict[int, int] = {
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 100_000,
    sqlite3.SQLITE_LIMIT_COLUMN: 100,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 100,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 5,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 127,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 50,
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: 100,
    sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 10,
    sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
}

#: workerd's words for a transaction a Worker's SQL tried to begin or end (D1 and SQL storage).
TRANSACTION_MESSAGE = (
    "To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements. The JavaScript API is safer because it will automatically roll back on "
    "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
    "write coalescing."
)

#: SQLite's word for a statement over SQLITE_LIMIT_SQL_LENGTH (Python refuses it before SQLite
#: sees it, with "query string is too large").
TOO_LONG = "statement too long: SQLITE_TOOBIG"
_PYTHON_TOO_LONG = "query string is too large"

# sqlite3.h authorizer action codes (Python 3.11 exports only some of them).
_CREATE_INDEX, _CREATE_TABLE, _CREATE_TEMP_INDEX, _CREATE_TEMP_TABLE = 1, 2, 3, 4
_CREATE_TEMP_TRIGGER, _CREATE_TEMP_VIEW, _CREATE_TRIGGER, _CREATE_VIEW = 5, 6, 7, 8
_DELETE, _DROP_INDEX, _DROP_TABLE, _DROP_TEMP_INDEX, _DROP_TEMP_TABLE = 9, 10, 11, 12, 13
_DROP_TEMP_TRIGGER, _DROP_TEMP_VIEW, _DROP_TRIGGER, _DROP_VIEW = 14, 15, 16, 17
_INSERT, _PRAGMA, _READ, _SELECT, _TRANSACTION, _UPDATE = 18, 19, 20, 21, 22, 23
_ATTACH, _DETACH, _ALTER_TABLE, _REINDEX, _ANALYZE = 24, 25, 26, 27, 28
_CREATE_VTABLE, _DROP_VTABLE, _FUNCTION, _SAVEPOINT, _COPY, _RECURSIVE = 29, 30, 31, 32, 0, 33

#: Actions on one named object (the name in the first argument).
_NAMED = frozenset(
    {_CREATE_TABLE, _DELETE, _DROP_TABLE, _INSERT, _CREATE_VIEW, _DROP_VIEW, _REINDEX}
)
#: Actions on an object of a table (both names in the arguments).
_NAMED_PAIR = frozenset({_CREATE_INDEX, _DROP_INDEX, _CREATE_TRIGGER, _DROP_TRIGGER})
TRANSACTION_ACTIONS = frozenset({_TRANSACTION, _SAVEPOINT})

_NO_ARG, _BOOLEAN, _NAME, _OPTIONAL_NAME, _OPTIONAL_NUMBER, _OPTIONAL_NUMBER_OR_NAME = range(6)
#: D1's documented PRAGMAs (developers.cloudflare.com/d1/sql-api/sql-statements) as workerd's
#: ALLOWED_PRAGMAS checks their arguments; table_list, table_info and table_xinfo are below.
PRAGMAS: dict[str, int] = {
    "data_version": _NO_ARG,
    "page_size": _NO_ARG,
    "case_sensitive_like": _BOOLEAN,
    "foreign_keys": _BOOLEAN,
    "defer_foreign_keys": _BOOLEAN,
    "ignore_check_constraints": _BOOLEAN,
    "legacy_alter_table": _BOOLEAN,
    "recursive_triggers": _BOOLEAN,
    "reverse_unordered_selects": _BOOLEAN,
    "foreign_key_check": _OPTIONAL_NAME,
    "foreign_key_list": _NAME,
    "index_info": _NAME,
    "index_list": _NAME,
    "index_xinfo": _NAME,
    "quick_check": _OPTIONAL_NUMBER_OR_NAME,
    "optimize": _OPTIONAL_NUMBER,
}
# workerd compares the first letters only (strncasecmp), so "onion" and "12" pass.
_BOOLEAN_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0")
_INTEGER_RE = re.compile(r"^\s*[+-]?(0[xX][0-9a-fA-F]+|[0-9]+)$")

#: workerd's ALLOWED_SQLITE_FUNCTIONS.
FUNCTIONS = frozenset(
    """
    abs changes char coalesce concat concat_ws format glob hex ifnull iif instr
    last_insert_rowid length like likelihood likely load_extension lower ltrim max_scalar
    min_scalar nullif octet_length printf quote random randomblob replace round rtrim sign
    soundex substr substring total_changes trim typeof unhex unicode unlikely upper zeroblob
    date time datetime julianday unixepoch strftime timediff current_date current_time
    current_timestamp
    avg count group_concat max min string_agg sum total
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
    nth_value
    acos acosh asin asinh atan atan2 atanh ceil cos cosh degrees exp floor ln log log2 mod pi
    pow radians sin sinh sqrt tan tanh trunc
    json jsonb json_array jsonb_array json_array_length json_extract jsonb_extract -> ->>
    json_insert jsonb_insert json_object jsonb_object json_patch jsonb_patch json_remove
    jsonb_remove json_replace jsonb_replace json_set jsonb_set json_type json_valid json_quote
    json_group_array jsonb_group_array json_group_object jsonb_group_object json_each json_tree
    match highlight bm25 snippet
    rtreecheck
    sqlite_rename_column sqlite_rename_table sqlite_rename_test sqlite_drop_column
    sqlite_rename_quotefix
    """.split()  # noqa: SIM905 - grouped by SQLite's documentation pages, as workerd lists them
)
#: Virtual table modules a Worker may use (compared without case).
MODULES = frozenset({"fts5", "fts5vocab", "rtree", "rtree_i32"})
RESERVED_PREFIX = "_cf_"


def allowed_name(name: str | None) -> bool:
    """False for the reserved ``_cf_`` namespace (any case)."""
    return name is None or name[:4].lower() != RESERVED_PREFIX.lower()


def _boolean(value: str) -> bool:
    if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
        value = value[1:-1]
    return value.lower().startswith(_BOOLEAN_WORDS)


def _integer(value: str, low: int, high: int) -> bool:
    if not _INTEGER_RE.match(value):
        return False
    number = int(value.strip(), 0) if "x" in value.lower() else int(value)
    return low <= number <= high


def _pragma(name: str, argument: str | None) -> bool:
    if name == "table_list":
        return True
    if name in ("table_info", "table_xinfo"):
        return argument is not None and allowed_name(argument)
    kind = PRAGMAS.get(name)
    if kind is None:
        return False
    if argument is None:
        return kind not in (_NAME,)
    if kind == _NO_ARG:
        return False
    if kind == _BOOLEAN:
        return _boolean(argument)
    if kind in (_NAME, _OPTIONAL_NAME):
        return allowed_name(argument)
    if kind == _OPTIONAL_NUMBER:
        return _integer(argument, -(2**31), 2**31 - 1)
    return _integer(argument, 0, 2**32 - 1) or allowed_name(argument)


class Authorizer:
    """The authorizer callback of one connection and its mode.

    Kept apart from the connection so that the connection does not hold a reference to
    itself through its callback."""

    def __init__(self) -> None:
        self.trusted = 0  # depth of GuardedConnection.trusted() blocks
        self.denied: int | None = None  # the action last refused, for the caller's wording
        self.altered: list[str] = []  # tables a Worker's ALTER TABLE touched

    def __call__(
        self,
        action: int,
        arg1: str | None,
        arg2: str | None,
        database: str | None,
        trigger: str | None,
    ) -> int:
        allowed = self.allows(action, arg1, arg2, database)
        if not allowed:
            self.denied = action
            return sqlite3.SQLITE_DENY
        if action == _ALTER_TABLE and not self.trusted and arg2 is not None:
            self.altered.append(arg2)
        return sqlite3.SQLITE_OK

    def allows(self, action: int, arg1: str | None, arg2: str | None, db: str | None) -> bool:
        if action in (_ALTER_TABLE, _DETACH):
            # SQLite passes the database name first for these two (workerd swaps them too).
            db, arg1 = arg1, arg2
        if db == "temp":
            return action in (_READ, _UPDATE) and allowed_name(arg1)
        if db is not None and db != "main":
            return False
        if self.trusted:
            return True
        return self.worker_allows(action, arg1, arg2)

    @staticmethod
    def worker_allows(action: int, arg1: str | None, arg2: str | None) -> bool:
        """workerd's isAuthorized() for a Worker's statement in ``main``."""
        if action in (_SELECT, _RECURSIVE, _ANALYZE):
            # ANALYZE with no table analyses every table, the reserved ones included; workerd
            # allows it because sqlite_stat1 holds statistics, not rows.
            return True
        if action in _NAMED or action in (_READ, _UPDATE, _ALTER_TABLE):
            return allowed_name(arg1)
        if action in _NAMED_PAIR:
            return allowed_name(arg1) and allowed_name(arg2)
        if action == _PRAGMA:
            return arg1 is not None and _pragma(arg1.lower(), arg2)
        if action == _FUNCTION:
            return arg2 in FUNCTIONS
        if action in (_CREATE_VTABLE, _DROP_VTABLE):
            return (arg2 or "").lower() in MODULES and allowed_name(arg1)
        # ATTACH, DETACH, BEGIN/COMMIT/ROLLBACK, SAVEPOINT/RELEASE, everything TEMP, COPY and
        # any action this list does not know.
        return False


class GuardedConnection(sqlite3.Connection):
    """A connection whose every statement passes :class:`Authorizer`; see the module doc."""

    def __init__(self, path: str, *, timeout: float = 5.0) -> None:
        super().__init__(
            path,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        if hasattr(self, "enable_load_extension"):
            self.enable_load_extension(False)
        for category, value in LIMITS.items():
            self.setlimit(category, value)
        if hasattr(self, "setconfig"):  # Python 3.12+: no schema writes, even trusted
            self.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)  # type: ignore[attr-defined]
        self.authorizer = Authorizer()
        self.set_authorizer(self.authorizer)
        self._trusted_since_run = False
        #: Reserved names celld itself created in this file (SQL storage's _cf_KV).
        self.owned: set[str] = set()

    @contextmanager
    def trusted(self) -> Iterator[GuardedConnection]:
        """celld's own statements: anything in ``main`` (never a Worker's SQL)."""
        self.authorizer.trusted += 1
        try:
            yield self
        finally:
            self.authorizer.trusted -= 1
            self._trusted_since_run = True

    def run(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        """Execute one statement of a Worker's SQL in Worker mode.

        Raises sqlite3 errors as SQLite words them (a statement over the length limit is
        Python's DataError, which :func:`sqlite_words` words as SQLite does); a rename into
        the reserved namespace is undone and refused as SQLite refuses the rest."""
        if self.authorizer.trusted:
            raise RuntimeError("a Worker's SQL must not run inside trusted()")
        if self._trusted_since_run:
            # Setting an authorizer expires every prepared statement: one that celld prepared
            # for itself and that sits in Python's statement cache under the same text is
            # prepared, and authorized, again before it runs for the Worker.
            self.set_authorizer(self.authorizer)
            self._trusted_since_run = False
        self.authorizer.denied = None
        self.authorizer.altered.clear()
        cursor = self.execute(sql, parameters)
        if self.authorizer.altered:
            self._undo_reserved_renames(list(self.authorizer.altered))
        return cursor

    def refused_transaction(self) -> bool:
        """Whether the last refusal was of BEGIN/COMMIT/ROLLBACK/SAVEPOINT/RELEASE."""
        return self.authorizer.denied in TRANSACTION_ACTIONS

    def _undo_reserved_renames(self, tables: list[str]) -> None:
        # SQLite tells an authorizer the table an ALTER TABLE renames, not the new name, so
        # look for reserved names celld did not create; no other statement can make one.
        with self.trusted():
            rows = self.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND lower(substr(name, 1, 4))"
                " = ?",
                (RESERVED_PREFIX.lower(),),
            ).fetchall()
            strays = [name for (name,) in rows if name not in self.owned]
            for stray, old in zip(strays, tables, strict=False):
                self.execute(f"ALTER TABLE {quote(stray)} RENAME TO {quote(old)}")
        if strays:
            self.authorizer.denied = _ALTER_TABLE
            raise refusal()


def refusal() -> sqlite3.DatabaseError:
    """The error SQLite raises for a statement its authorizer refused."""
    error = sqlite3.DatabaseError("not authorized")
    error.sqlite_errorcode = sqlite3.SQLITE_AUTH  # type: ignore[attr-defined]
    error.sqlite_errorname = "SQLITE_AUTH"  # type: ignore[attr-defined]
    return error


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def looks_like_uri(name: str) -> bool:
    return name in ("", ":memory:") or name[:5].lower() == "file:"


def connect(path: Path) -> GuardedConnection:
    """Open `path` as a Worker's database (see the module doc); the parent folder is created."""
    name = os.fspath(path)
    if looks_like_uri(name):
        raise ValueError(f"celld: {name!r} is not a database file path (URIs are refused)")
    absolute = os.path.abspath(name)
    Path(absolute).parent.mkdir(parents=True, exist_ok=True)
    return GuardedConnection(absolute)


def trusted(conn: sqlite3.Connection) -> Any:
    """`conn.trusted()` for a guarded connection, nothing for any other (KV, R2)."""
    if isinstance(conn, GuardedConnection):
        return conn.trusted()
    return nullcontext(conn)


def sqlite_words(error: sqlite3.Error) -> str:
    """SQLite's message and code as workerd words them: ``msg: SQLITE_CONSTRAINT (extended:
    SQLITE_CONSTRAINT_PRIMARYKEY)``."""
    if isinstance(error, sqlite3.DataError) and str(error) in (TOO_LONG, _PYTHON_TOO_LONG):
        return TOO_LONG
    name = getattr(error, "sqlite_errorname", None) or "SQLITE_ERROR"
    parts = name.split("_")
    primary = "_".join(parts[:2])
    if primary != name:
        return f"{error}: {primary} (extended: {name})"
    return f"{error}: {name}"
