"""KV namespaces: one SQLite file per namespace, expiry by the service clock.

Limits and messages follow Cloudflare's (workerd and miniflare word them the same): keys are
1..512 UTF-8 bytes and not "." or "..", values at most 25 MiB, metadata at most 1024 bytes of
JSON, `expirationTtl` at least 60 s, `expiration` at least 60 s in the future, `list` limit
1..1000. An expired key reads as missing and is deleted lazily.
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celld.bindings.errors import kv_error, type_error
from celld.bindings.storage import SqliteFile
from celld.bindings.wire import to_wire

MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 25 * 1024 * 1024
MAX_METADATA_BYTES = 1024
MIN_EXPIRATION_TTL = 60
MAX_LIST_LIMIT = 1000
MAX_BULK_KEYS = 100

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    expiration INTEGER,
    metadata TEXT
) WITHOUT ROWID;
"""


def check_key(method: str, key: Any) -> str:
    if not isinstance(key, str):
        raise type_error(f"KV {method} failed: the key must be a string")
    if key == "":
        raise type_error("Key name cannot be empty.")
    if key in (".", ".."):
        raise type_error(f'"{key}" is not allowed as a key name.')
    size = len(key.encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise kv_error(
            method,
            414,
            f"UTF-8 encoded length of {size} exceeds key length limit of {MAX_KEY_BYTES}.",
        )
    return key


class KvNamespace:
    """One namespace's data; `now_ms` is the service clock (manual in tests)."""

    def __init__(self, path: Path, now_ms: Callable[[], int], *, synchronous: str = "FULL"):
        self.file = SqliteFile(path, schema=SCHEMA, synchronous=synchronous)
        self.now_ms = now_ms

    async def open(self) -> KvNamespace:
        await self.file.open()
        return self

    async def close(self) -> None:
        await self.file.close()

    def _now_s(self) -> int:
        return self.now_ms() // 1000

    # -- operations (each returns plain JSON for the bridge) ---------------------------------

    async def get(self, keys: list[str], *, bulk: bool) -> dict[str, Any]:
        check_get(keys, bulk=bulk)
        now = self._now_s()

        def read(conn: sqlite3.Connection) -> dict[str, Any]:
            found: dict[str, Any] = {}
            for key in keys:
                row = conn.execute(
                    "SELECT value, expiration, metadata FROM entries WHERE key = ?", (key,)
                ).fetchone()
                if row is None:
                    found[key] = None
                    continue
                value, expiration, metadata = row
                if expiration is not None and expiration <= now:
                    conn.execute(
                        "DELETE FROM entries WHERE key = ? AND expiration <= ?", (key, now)
                    )
                    found[key] = None
                    continue
                found[key] = {"value": to_wire(value), "metadata": metadata}
            return found

        return await self.file.run(read)

    async def put(
        self,
        key: str,
        value: bytes,
        *,
        expiration: Any = None,
        expiration_ttl: Any = None,
        metadata: str | None = None,
    ) -> None:
        expires = check_put(key, value, self._now_s(), expiration, expiration_ttl, metadata)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO entries (key, value, expiration, metadata) "
                "VALUES (?, ?, ?, ?)",
                (key, value, expires, metadata),
            )

        await self.file.run(write)

    async def delete(self, key: str) -> None:
        check_key("DELETE", key)
        await self.file.run(lambda conn: conn.execute("DELETE FROM entries WHERE key = ?", (key,)))

    async def list(
        self, *, prefix: str = "", limit: Any = None, cursor: str | None = None
    ) -> dict[str, Any]:
        window = list_window(limit, cursor)
        if window is None:
            return {"keys": [], "list_complete": True}
        count, after = window
        now = self._now_s()

        def read(conn: sqlite3.Connection) -> dict[str, Any]:
            # Keys sort by their UTF-8 bytes, as on Cloudflare.
            sql = (
                "SELECT key, expiration, metadata FROM entries "
                "WHERE substr(key, 1, ?) = ? AND (expiration IS NULL OR expiration > ?)"
            )
            args: list[Any] = [len(prefix), prefix, now]
            if after is not None:
                sql += " AND CAST(key AS BLOB) > CAST(? AS BLOB)"
                args.append(after)
            sql += " ORDER BY CAST(key AS BLOB) LIMIT ?"
            args.append(count + 1)
            return list_result(conn.execute(sql, args).fetchall(), count)

        return await self.file.run(read)


def check_get(keys: list[Any], *, bulk: bool) -> None:
    method = "GET_BULK" if bulk else "GET"
    if bulk and len(keys) > MAX_BULK_KEYS:
        raise kv_error(method, 400, f"You can request a maximum of {MAX_BULK_KEYS} keys")
    for key in keys:
        check_key(method, key)


def check_put(
    key: Any,
    value: bytes,
    now: int,
    expiration: Any,
    expiration_ttl: Any,
    metadata: str | None,
) -> int | None:
    """Check a put as Cloudflare does (in its order); returns the expiration to store."""
    check_key("PUT", key)
    expires = _expiration(now, expiration, expiration_ttl)
    if len(value) > MAX_VALUE_BYTES:
        raise kv_error(
            "PUT", 413, f"Value length of {len(value)} exceeds limit of {MAX_VALUE_BYTES}."
        )
    if metadata is not None:
        size = len(metadata.encode("utf-8"))
        if size > MAX_METADATA_BYTES:
            raise kv_error(
                "PUT", 413, f"Metadata length of {size} exceeds limit of {MAX_METADATA_BYTES}."
            )
    return expires


def _expiration(now: int, expiration: Any, expiration_ttl: Any) -> int | None:
    if expiration_ttl is not None:
        ttl = _as_int(expiration_ttl)
        if ttl is None or ttl <= 0:
            raise kv_error(
                "PUT",
                400,
                f"Invalid expiration_ttl of {ttl or 0}. Please specify integer greater than 0.",
            )
        if ttl < MIN_EXPIRATION_TTL:
            raise kv_error(
                "PUT",
                400,
                f"Invalid expiration_ttl of {expiration_ttl}. "
                f"Expiration TTL must be at least {MIN_EXPIRATION_TTL}.",
            )
        return now + ttl
    if expiration is not None:
        when = _as_int(expiration)
        if when is None or when <= now:
            raise kv_error(
                "PUT",
                400,
                f"Invalid expiration of {when or 0}. Please specify integer greater than "
                "the current number of seconds since the UNIX epoch.",
            )
        if when < now + MIN_EXPIRATION_TTL:
            raise kv_error(
                "PUT",
                400,
                f"Invalid expiration of {expiration}. Expiration times must be at least "
                f"{MIN_EXPIRATION_TTL} seconds in the future.",
            )
        return when
    return None


def list_window(limit: Any, cursor: str | None) -> tuple[int, str | None] | None:
    """How many keys a list returns and the key it starts after; None: it lists nothing
    (a cursor that does not decode)."""
    count = _as_int(limit) if limit is not None else None
    if count is None or count < 1:
        count = MAX_LIST_LIMIT  # wrangler dev lists everything for 0 or junk
    if count > MAX_LIST_LIMIT:
        # workerd words this failure as a GET, not a LIST.
        raise kv_error(
            "GET",
            400,
            f"Invalid key_count_limit of {limit}. "
            f"Please specify an integer less than {MAX_LIST_LIMIT}.",
        )
    after = _decode_cursor(cursor) if cursor else None
    if cursor and after is None:
        return None
    return count, after


def list_result(rows: list[Any], count: int) -> dict[str, Any]:
    """A list's answer from up to `count + 1` rows of (name, expiration, metadata) in key
    order (one more than asked for says there are more)."""
    more = len(rows) > count
    rows = rows[:count]
    keys = []
    for name, expiration, metadata in rows:
        entry: dict[str, Any] = {"name": name}
        if expiration is not None:
            entry["expiration"] = expiration
        if metadata is not None:
            entry["metadata"] = metadata
        keys.append(entry)
    result: dict[str, Any] = {"keys": keys, "list_complete": not more}
    if more:
        result["cursor"] = _encode_cursor(rows[-1][0])
    return result


def _as_int(value: Any) -> int | None:
    """Cloudflare accepts numbers and numeric strings for expirations and limits."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return round(value) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _encode_cursor(key: str) -> str:
    return base64.b64encode(key.encode("utf-8")).decode("ascii")


def _decode_cursor(cursor: str) -> str | None:
    """A cursor is the last key listed, in base64; one that does not decode lists nothing,
    as under wrangler dev."""
    try:
        return base64.b64decode(cursor.encode("ascii"), validate=True).decode("utf-8")
    except (ValueError, UnicodeError):
        return None
