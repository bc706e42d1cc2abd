"""R2 buckets in a PostgreSQL store shared by several nodes: every node serves every
object. The rules and messages are the file-backed bucket's (celld/bindings/r2.py, whose
checks, conditions, listing and etags this reuses); only where the bytes live differs.

Layout (celld/store/pgschema.py): an object row (`r2_objects`) points at a body
(`r2_bodies`) whose bytes are rows of at most 256 KiB in `r2_chunks`, keyed by offset.

Rules:

* Every write to a key takes a transaction-scoped advisory lock on (bucket, key) first,
  so a conditional put (``onlyIf``) is checked and applied with nothing in between, on
  any node.
* A put of bytes writes its body, its chunks and the object row in one transaction.
* A streamed put never holds the body whole: a 'writing' body is created, each piece is
  inserted as it arrives (committed without waiting for the disk: the final commit waits
  for the WAL up to itself, which holds every piece before it), and one last transaction
  turns the body 'live' and writes the object row. A put that fails or is refused deletes
  its body; one whose node died is left 'writing' and swept once idle for WRITING_IDLE_S.
* A get of a large body streams it in pages of chunks as the Worker reads. A body that a
  put or delete replaces is marked 'dropped', not removed, and removed DROPPED_GRACE_S
  later, so a reader still streaming it on any node finishes reading what it started; one
  slower than that fails with an error saying so, never with other bytes.
* Completing a multipart upload moves the parts' chunks to the new body (an UPDATE in the
  database, no bytes through celld).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg

from celld.bindings import r2
from celld.bindings.pgkv import prefix_end
from celld.bindings.pgshared import SharedPool
from celld.bindings.r2 import (
    DISK_CHUNK_BYTES,
    MAX_PARTS,
    Hashes,
    Listing,
    answer_of,
    check_key,
    check_put_metadata,
    choose_parts,
    precondition_ok,
    r2_error,
    too_large,
    wire_object,
)
from celld.bindings.wire import to_wire
from celld.isolate.host import HostError

log = logging.getLogger("celld.bindings")

#: A replaced or deleted body stays this long for readers still streaming it.
DROPPED_GRACE_S = 600
#: A streamed put that received nothing for this long is taken as dead and swept.
WRITING_IDLE_S = 600
#: Sweeps happen at most this often per bucket (after a write).
SWEEP_EVERY_S = 60.0
#: A streamed put sends its body to the database this much at a time (and puts a body no
#: larger than this in one transaction, as bytes).
FLUSH_BYTES = 1024 * 1024
#: Chunks read per query while streaming a body (each at most DISK_CHUNK_BYTES).
PAGE_CHUNKS = 4

_COLUMNS = "key, body, size, etag, version, uploaded, http_metadata, custom_metadata, checksums"
_SELECT = f"SELECT {_COLUMNS} FROM r2_objects WHERE bucket = $1 AND key = $2"
_UPSERT = (
    f"INSERT INTO r2_objects (bucket, {_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
    "$9, $10) ON CONFLICT (bucket, key) DO UPDATE SET body = EXCLUDED.body, "
    "size = EXCLUDED.size, etag = EXCLUDED.etag, version = EXCLUDED.version, "
    "uploaded = EXCLUDED.uploaded, http_metadata = EXCLUDED.http_metadata, "
    "custom_metadata = EXCLUDED.custom_metadata, checksums = EXCLUDED.checksums"
)
_NEW_BODY = "INSERT INTO r2_bodies (state) VALUES ($1) RETURNING id"
_DROP = "UPDATE r2_bodies SET state = 'dropped', touched = now() WHERE id = ANY($1::bigint[])"
_CHUNK = "INSERT INTO r2_chunks (body, start, data) VALUES ($1, $2, $3)"
#: The chunk holding byte `offset` of a body (its start is the largest not after it).
_FIRST_CHUNK = "SELECT max(start) FROM r2_chunks WHERE body = $1 AND start <= $2"
_PAGE = (
    "SELECT start, data FROM r2_chunks WHERE body = $1 AND start >= $2 AND start < $3 "
    "ORDER BY start LIMIT $4"
)
_TOUCH = "UPDATE r2_bodies SET touched = now() WHERE id = $1 AND state = 'writing' RETURNING id"
_SWEEP = (
    "DELETE FROM r2_bodies WHERE id IN (SELECT id FROM r2_bodies WHERE "
    "(state = 'dropped' AND touched < now() - make_interval(secs => $1)) OR "
    "(state = 'writing' AND touched < now() - make_interval(secs => $2)) LIMIT 100)"
)


def _lock_id(bucket: str, key: bytes) -> int:
    """The advisory lock of one key of one bucket (64 bits of a hash, signed)."""
    digest = hashlib.blake2b(bucket.encode() + b"\0" + key, digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _row(record: asyncpg.Record | None) -> tuple[Any, ...] | None:
    """An object row in the tuple form celld/bindings/r2.py's helpers take."""
    if record is None:
        return None
    key, *rest = tuple(record)
    return (bytes(key).decode("utf-8"), *rest)


def _discarded() -> HostError:
    """A streamed put swept meanwhile (taken for a dead writer's after idling too long)."""
    return r2_error(
        "put", f"the upload was idle for more than {WRITING_IDLE_S} s and was discarded", 10001
    )


def _pieces(data: bytes) -> list[tuple[int, bytes]]:
    return [
        (start, data[start : start + DISK_CHUNK_BYTES])
        for start in range(0, len(data), DISK_CHUNK_BYTES)
    ]


class PgR2Bucket:
    """One bucket's objects in the shared store."""

    def __init__(self, shared: SharedPool, bucket: str, now_ms: Callable[[], int]) -> None:
        self.shared = shared
        self.bucket = bucket
        self.now_ms = now_ms
        self._swept_at = 0.0

    async def open(self) -> PgR2Bucket:
        await self.shared.open()
        await self.sweep()
        return self

    async def close(self) -> None:
        """(The pool belongs to the bindings as a whole and is closed with them.)"""

    async def sweep(self) -> int:
        """Remove dropped bodies past their grace and streamed puts whose writer is gone;
        returns how many bodies went."""
        self._swept_at = time.monotonic()
        removed = 0
        async with self.shared.connection("R2 sweep") as connection:
            while True:
                status = await connection.execute(_SWEEP, DROPPED_GRACE_S, WRITING_IDLE_S)
                count = int(status.split()[-1])
                removed += count
                if count < 100:
                    return removed

    async def _sweep_now_and_then(self) -> None:
        if time.monotonic() - self._swept_at >= SWEEP_EVERY_S:
            await self.sweep()

    async def _lock(self, connection: asyncpg.Connection, *keys: bytes) -> None:
        for lock in sorted({_lock_id(self.bucket, key) for key in keys}):
            await connection.execute("SELECT pg_advisory_xact_lock($1)", lock)

    async def _store(
        self,
        connection: asyncpg.Connection,
        key: str,
        body: int,
        size: int,
        etag: str,
        options: dict[str, Any],
        checksums: dict[str, str],
        old: tuple[Any, ...] | None,
    ) -> dict[str, Any]:
        """Write the object row of a put whose body is `body` (inside its transaction)."""
        row = (
            key,
            body,
            size,
            etag,
            secrets.token_hex(16),
            self.now_ms(),
            json.dumps(options.get("httpMetadata") or {}),
            json.dumps(options.get("customMetadata") or {}),
            json.dumps(checksums),
        )
        await connection.execute(_UPSERT, self.bucket, key.encode("utf-8"), *row[1:])
        if old is not None:
            await connection.execute(_DROP, [old[1]])
        return wire_object(row)

    # -- put -------------------------------------------------------------------------------

    async def put(self, key: str, data: bytes, options: dict[str, Any]) -> dict[str, Any] | None:
        check_key("put", key)
        check_put_metadata(options)
        if len(data) > r2.MAX_UPLOAD_BYTES:
            raise too_large()
        hashes = Hashes(options)
        hashes.update(data)
        checksums = hashes.verify(options)
        raw = key.encode("utf-8")
        async with self.shared.connection("put") as connection, connection.transaction():
            await self._lock(connection, raw)
            old = _row(await connection.fetchrow(_SELECT, self.bucket, raw))
            if not precondition_ok(old, options.get("onlyIf")):
                return None
            body = await connection.fetchval(_NEW_BODY, "live")
            await connection.executemany(_CHUNK, [(body, s, d) for s, d in _pieces(data)])
            wire = await self._store(
                connection, key, body, len(data), checksums["md5"], options, checksums, old
            )
        await self._sweep_now_and_then()
        return wire

    async def put_stream(
        self, key: str, chunks: AsyncIterator[bytes], options: dict[str, Any]
    ) -> dict[str, Any] | None:
        """`put` of a body that arrives in chunks. A body of at most FLUSH_BYTES is put as
        bytes (one transaction); a larger one goes in FLUSH_BYTES at a time as it comes."""
        check_key("put", key)
        check_put_metadata(options)
        hashes = Hashes(options)
        pending = bytearray()
        body: int | None = None
        size = 0
        placed = False
        try:
            async for chunk in chunks:
                if size + len(pending) + len(chunk) > r2.MAX_UPLOAD_BYTES:
                    raise too_large()
                hashes.update(chunk)
                pending += chunk
                if len(pending) >= FLUSH_BYTES:
                    if body is None:
                        async with self.shared.connection("put") as connection:
                            body = await connection.fetchval(_NEW_BODY, "writing")
                    whole = len(pending) - len(pending) % DISK_CHUNK_BYTES
                    await self._write_pieces(body, size, bytes(pending[:whole]))
                    size += whole
                    del pending[:whole]
            if body is None:
                placed = True  # (nothing written yet: nothing to remove)
                return await self.put(key, bytes(pending), options)
            if pending:
                await self._write_pieces(body, size, bytes(pending))
                size += len(pending)
            checksums = hashes.verify(options)
            wire = await self._place(key, body, size, checksums, options)
            placed = True
        finally:
            if not placed and body is not None:
                await self._remove_unplaced(body)
        await self._sweep_now_and_then()
        return wire

    async def _place(
        self, key: str, body: int, size: int, checksums: dict[str, str], options: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Make a streamed body the object's (None: its condition failed)."""
        raw = key.encode("utf-8")
        async with self.shared.connection("put") as connection, connection.transaction():
            await self._lock(connection, raw)
            old = _row(await connection.fetchrow(_SELECT, self.bucket, raw))
            if not precondition_ok(old, options.get("onlyIf")):
                return None
            made_live = await connection.fetchval(
                "UPDATE r2_bodies SET state = 'live', touched = now() "
                "WHERE id = $1 AND state = 'writing' RETURNING id",
                body,
            )
            if made_live is None:
                raise _discarded()
            return await self._store(
                connection, key, body, size, checksums["md5"], options, checksums, old
            )

    async def _remove_unplaced(self, body: int) -> None:
        """Remove the body of a streamed put that failed or was refused. If the database
        cannot be reached now, the sweep removes it once it has idled WRITING_IDLE_S."""
        try:
            async with self.shared.connection("put") as connection:
                await connection.execute("DELETE FROM r2_bodies WHERE id = $1", body)
        except HostError as error:
            log.warning("R2 body %d of a failed put is left for the sweep: %s", body, error)

    async def _write_pieces(self, body: int, start: int, data: bytes) -> None:
        async with self.shared.connection("put") as connection, connection.transaction():
            # Durable once the put's last transaction commits (it flushes the WAL before it).
            await connection.execute("SET LOCAL synchronous_commit = off")
            if await connection.fetchval(_TOUCH, body) is None:
                raise _discarded()
            await connection.executemany(
                _CHUNK, [(body, start + offset, piece) for offset, piece in _pieces(data)]
            )

    # -- get / head ------------------------------------------------------------------------

    async def get(
        self,
        key: str,
        options: dict[str, Any],
        *,
        body: bool,
        stream_over: int | None = None,
    ) -> dict[str, Any] | None:
        """As the file-backed bucket's `get`; a large body comes as `file`, a `PgBody`."""
        method = "get" if body else "head"
        check_key(method, key)
        async with (
            self.shared.connection(method) as connection,
            connection.transaction(isolation="repeatable_read", readonly=True),
        ):
            row = _row(await connection.fetchrow(_SELECT, self.bucket, key.encode("utf-8")))
            if row is None:
                return None
            wire, span = answer_of(row, options, body=body)
            if span is None:
                return wire
            offset, length = span
            reader = PgBody(self.shared, row[1], offset, length)
            if stream_over is not None and length > stream_over:
                wire["file"] = reader
            else:
                wire["body"] = to_wire(b"".join([c async for c in reader.read_in(connection)]))
        return wire

    # -- delete / list ---------------------------------------------------------------------

    async def delete(self, keys: list[str]) -> None:
        for key in keys:
            check_key("delete", key)
        raws = [key.encode("utf-8") for key in keys]
        async with self.shared.connection("delete") as connection, connection.transaction():
            await self._lock(connection, *raws)
            bodies = await connection.fetch(
                "DELETE FROM r2_objects WHERE bucket = $1 AND key = ANY($2::bytea[]) "
                "RETURNING body",
                self.bucket,
                raws,
            )
            await connection.execute(_DROP, [r["body"] for r in bodies])
        await self._sweep_now_and_then()

    async def list(self, options: dict[str, Any]) -> dict[str, Any]:
        listing = Listing(options)
        start = listing.prefix.encode("utf-8")
        sql = f"SELECT {_COLUMNS} FROM r2_objects WHERE bucket = $1 AND key >= $2"
        args: list[Any] = [self.bucket, start]
        end = prefix_end(start)
        if end is not None:
            args.append(end)
            sql += f" AND key < ${len(args)}"
        if listing.after is not None:
            args.append(listing.after.encode("utf-8"))
            sql += f" AND key > ${len(args)}"
        sql += " ORDER BY key"
        async with (
            self.shared.connection("list") as connection,
            connection.transaction(isolation="repeatable_read", readonly=True),
        ):
            async for record in connection.cursor(sql, *args, prefetch=256):
                if not listing.add(_row(record)):  # type: ignore[arg-type]
                    break
        return listing.result()

    # -- multipart uploads -----------------------------------------------------------------

    async def create_upload(self, key: str, options: dict[str, Any]) -> str:
        check_key("createMultipartUpload", key)
        upload_id = secrets.token_hex(24)
        async with self.shared.connection("createMultipartUpload") as connection:
            await connection.execute(
                "INSERT INTO r2_uploads (bucket, upload_id, key, http_metadata, "
                "custom_metadata) VALUES ($1, $2, $3, $4, $5)",
                self.bucket,
                upload_id,
                key.encode("utf-8"),
                json.dumps(options.get("httpMetadata") or {}),
                json.dumps(options.get("customMetadata") or {}),
            )
        return upload_id

    async def _upload(
        self, connection: asyncpg.Connection, method: str, key: str, upload_id: str
    ) -> asyncpg.Record:
        """The upload's row, locked until the transaction ends."""
        row = await connection.fetchrow(
            "SELECT http_metadata, custom_metadata FROM r2_uploads "
            "WHERE bucket = $1 AND upload_id = $2 AND key = $3 FOR UPDATE",
            self.bucket,
            upload_id,
            key.encode("utf-8"),
        )
        if row is None:
            raise r2_error(method, "The specified multipart upload does not exist.", 10024)
        return row

    async def upload_part(
        self, key: str, upload_id: str, number: Any, data: bytes
    ) -> dict[str, Any]:
        if not isinstance(number, int) or not 1 <= number <= MAX_PARTS:
            raise r2_error(
                "uploadPart", "Part number must be between 1 and 10000 (inclusive).", 10039
            )
        etag = hashlib.md5(data).hexdigest()
        async with self.shared.connection("uploadPart") as connection, connection.transaction():
            await self._upload(connection, "uploadPart", key, upload_id)
            body = await connection.fetchval(_NEW_BODY, "live")
            await connection.executemany(_CHUNK, [(body, s, d) for s, d in _pieces(data)])
            old = await connection.fetchval(
                "SELECT body FROM r2_parts WHERE bucket = $1 AND upload_id = $2 "
                "AND part_number = $3",
                self.bucket,
                upload_id,
                number,
            )
            await connection.execute(
                "INSERT INTO r2_parts (bucket, upload_id, part_number, body, size, etag) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (bucket, upload_id, part_number) "
                "DO UPDATE SET body = EXCLUDED.body, size = EXCLUDED.size, etag = EXCLUDED.etag",
                self.bucket,
                upload_id,
                number,
                body,
                len(data),
                etag,
            )
            if old is not None:
                await connection.execute(_DROP, [old])
        return {"partNumber": number, "etag": etag}

    async def _forget_upload(self, connection: asyncpg.Connection, upload_id: str) -> None:
        """Drop the upload's part bodies and its rows (inside a transaction)."""
        bodies = await connection.fetch(
            "DELETE FROM r2_parts WHERE bucket = $1 AND upload_id = $2 RETURNING body",
            self.bucket,
            upload_id,
        )
        await connection.execute(_DROP, [r["body"] for r in bodies])
        await connection.execute(
            "DELETE FROM r2_uploads WHERE bucket = $1 AND upload_id = $2", self.bucket, upload_id
        )

    async def abort_upload(self, key: str, upload_id: str) -> None:
        method = "abortMultipartUpload"
        async with self.shared.connection(method) as connection, connection.transaction():
            await self._upload(connection, method, key, upload_id)
            await self._forget_upload(connection, upload_id)

    async def complete_upload(
        self, key: str, upload_id: str, parts: list[dict[str, Any]]
    ) -> dict[str, Any]:
        raw = key.encode("utf-8")
        method = "completeMultipartUpload"
        async with self.shared.connection(method) as connection, connection.transaction():
            await self._lock(connection, raw)
            upload = await self._upload(connection, method, key, upload_id)
            stored = {
                r["part_number"]: (r["body"], r["size"], r["etag"])
                for r in await connection.fetch(
                    "SELECT part_number, body, size, etag FROM r2_parts "
                    "WHERE bucket = $1 AND upload_id = $2",
                    self.bucket,
                    upload_id,
                )
            }
            chosen, etag = choose_parts(stored, parts)
            body = await connection.fetchval(_NEW_BODY, "live")
            moved: dict[int, int] = {}  # part body -> where its bytes start in the new one
            base = 0
            for part_body, size, _ in chosen:
                if part_body in moved:  # the same part named twice: copy what was moved
                    await connection.execute(
                        "INSERT INTO r2_chunks (body, start, data) SELECT $1, start - $2 + $3, "
                        "data FROM r2_chunks WHERE body = $1 AND start >= $2 AND start < $2 + $4",
                        body,
                        moved[part_body],
                        base,
                        size,
                    )
                else:
                    await connection.execute(
                        "UPDATE r2_chunks SET body = $1, start = start + $2 WHERE body = $3",
                        body,
                        base,
                        part_body,
                    )
                    moved[part_body] = base
                base += size
            old = _row(await connection.fetchrow(_SELECT, self.bucket, raw))
            options = {
                "httpMetadata": json.loads(upload["http_metadata"]),
                "customMetadata": json.loads(upload["custom_metadata"]),
            }
            await self._forget_upload(connection, upload_id)
            wire = await self._store(connection, key, body, base, etag, options, {}, old)
        return wire


class PgBody:
    """An object's body (or a range of it) read from its chunks, a page at a time."""

    def __init__(self, shared: SharedPool, body: int, offset: int, length: int) -> None:
        self.shared = shared
        self.body = body
        self.offset = offset
        self.length = length

    async def read_in(self, connection: asyncpg.Connection) -> AsyncIterator[bytes]:
        """The bytes, read on `connection` (within the caller's snapshot)."""
        position, end = self.offset, self.offset + self.length
        if self.length == 0:
            return
        start = await connection.fetchval(_FIRST_CHUNK, self.body, position)
        while position < end:
            rows = (
                []
                if start is None
                else await connection.fetch(_PAGE, self.body, start, end, PAGE_CHUNKS)
            )
            if not rows or rows[0]["start"] > position:
                raise HostError(
                    "get: the object was replaced or deleted while it was being read and its "
                    f"old body is gone (readers have {DROPPED_GRACE_S} s)"
                )
            for row in rows:
                data = bytes(row["data"])
                piece = data[position - row["start"] : end - row["start"]]
                position += len(piece)
                start = row["start"] + len(data)
                yield piece

    async def chunks(self) -> AsyncIterator[bytes]:
        """The bytes as the Worker reads them: one page of chunks per query, each on a
        connection taken for that query only (a slow reader holds none)."""
        position, end = self.offset, self.offset + self.length
        while position < end:
            got = 0
            async with self.shared.connection("get") as connection:
                page = PgBody(self.shared, self.body, position, min(end - position, _PAGE_BYTES))
                pieces = [piece async for piece in page.read_in(connection)]
            for piece in pieces:
                got += len(piece)
                yield piece
            position += got

    async def aclose(self) -> None:
        """(Nothing is held between pages.)"""


#: Bytes read per query while streaming.
_PAGE_BYTES = PAGE_CHUNKS * DISK_CHUNK_BYTES
