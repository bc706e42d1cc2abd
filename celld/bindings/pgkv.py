"""KV namespaces in a PostgreSQL store shared by several nodes: every node reads and
writes the same rows (table `kv_entries`, keyed by namespace and key).

The rules are the SQLite namespace's (celld/bindings/kv.py, whose checks this reuses):
limits and messages, expiry by the service clock with expired keys read as missing and
deleted lazily, list in UTF-8 byte order with the same cursors. Keys are stored as their
UTF-8 bytes so PostgreSQL orders them bytewise whatever the database's collation is.
A put or delete is acknowledged once PostgreSQL has committed it (synchronous commit),
so a node dying right after loses nothing it acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celld.bindings.kv import check_get, check_key, check_put, list_result, list_window
from celld.bindings.pgshared import SharedPool
from celld.bindings.wire import to_wire

_GET = (
    "SELECT key, value, expiration, metadata FROM kv_entries "
    "WHERE namespace = $1 AND key = ANY($2::bytea[])"
)
_EXPIRE = "DELETE FROM kv_entries WHERE namespace = $1 AND key = $2 AND expiration <= $3"
_PUT = (
    "INSERT INTO kv_entries (namespace, key, value, expiration, metadata) "
    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (namespace, key) DO UPDATE SET "
    "value = EXCLUDED.value, expiration = EXCLUDED.expiration, metadata = EXCLUDED.metadata"
)
_DELETE = "DELETE FROM kv_entries WHERE namespace = $1 AND key = $2"


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest byte string after every string starting with `prefix` (None: there is
    none, the prefix is empty or all 0xFF), so a prefix is a range the index serves."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


class PgKvNamespace:
    """One namespace's rows in the shared store; `now_ms` is the service clock."""

    def __init__(self, shared: SharedPool, namespace: str, now_ms: Callable[[], int]) -> None:
        self.shared = shared
        self.namespace = namespace
        self.now_ms = now_ms

    async def open(self) -> PgKvNamespace:
        await self.shared.open()
        return self

    async def close(self) -> None:
        """(The pool belongs to the bindings as a whole and is closed with them.)"""

    def _now_s(self) -> int:
        return self.now_ms() // 1000

    async def get(self, keys: list[str], *, bulk: bool) -> dict[str, Any]:
        check_get(keys, bulk=bulk)
        now = self._now_s()
        wanted = [key.encode("utf-8") for key in keys]
        async with self.shared.connection("KV GET") as connection:
            rows = {
                bytes(r["key"]): r for r in await connection.fetch(_GET, self.namespace, wanted)
            }
            found: dict[str, Any] = {}
            for key, raw in zip(keys, wanted, strict=True):
                row = rows.get(raw)
                if row is None:
                    found[key] = None
                elif row["expiration"] is not None and row["expiration"] <= now:
                    await connection.execute(_EXPIRE, self.namespace, raw, now)
                    found[key] = None
                else:
                    found[key] = {
                        "value": to_wire(bytes(row["value"])),
                        "metadata": row["metadata"],
                    }
        return found

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
        async with self.shared.connection("KV PUT") as connection:
            await connection.execute(
                _PUT, self.namespace, key.encode("utf-8"), value, expires, metadata
            )

    async def delete(self, key: str) -> None:
        check_key("DELETE", key)
        async with self.shared.connection("KV DELETE") as connection:
            await connection.execute(_DELETE, self.namespace, key.encode("utf-8"))

    async def list(
        self, *, prefix: str = "", limit: Any = None, cursor: str | None = None
    ) -> dict[str, Any]:
        window = list_window(limit, cursor)
        if window is None:
            return {"keys": [], "list_complete": True}
        count, after = window
        start = prefix.encode("utf-8")
        sql = (
            "SELECT key, expiration, metadata FROM kv_entries WHERE namespace = $1 "
            "AND key >= $2 AND (expiration IS NULL OR expiration > $3)"
        )
        args: list[Any] = [self.namespace, start, self._now_s()]
        end = prefix_end(start)
        if end is not None:
            args.append(end)
            sql += f" AND key < ${len(args)}"
        if after is not None:
            args.append(after.encode("utf-8"))
            sql += f" AND key > ${len(args)}"
        args.append(count + 1)
        sql += f" ORDER BY key LIMIT ${len(args)}"
        async with self.shared.connection("KV LIST") as connection:
            rows = await connection.fetch(sql, *args)
        return list_result(
            [(bytes(r["key"]).decode("utf-8"), r["expiration"], r["metadata"]) for r in rows],
            count,
        )
