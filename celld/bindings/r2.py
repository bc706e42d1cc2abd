"""R2 buckets: objects as files, their metadata as rows in one SQLite file per bucket.

Layout under ``<state>/r2/<bucket>/``: ``objects.sqlite3`` (tables ``objects``, ``uploads``,
``parts``), ``blobs/<random hex>``, one file per object body or multipart part, and
``incoming/<random hex>``, bodies still being streamed in by a put.

Rules:

* A put takes the bucket's write lock (BEGIN IMMEDIATE), writes the body to a new file
  durably (fsync, rename, fsync of the folder), then commits the row that points at it; only
  after that commit is the replaced body removed. A crash at any point leaves the old object
  or the new one, never a mix. Files no row points at (a crash between the two writes) are
  removed when the bucket opens, under the same lock, so a writer in another process
  (`celld r2 object put` while `celld run` serves) never loses a body it is about to commit.
* A streamed put (a ``ReadableStream`` body, or bytes too large for one message) writes its
  chunks to ``incoming/`` as they arrive, hashing them on the way, under an exclusive
  ``flock``; at its end the file is fsynced and renamed into ``blobs/`` inside the write
  transaction above. Opening a bucket removes the incoming files no writer holds a lock on
  (their writer died). The object is never held whole in memory, here or in the isolate.
* A get of a body larger than one message hands JS an open file, read piece by piece as the
  Worker reads (celld/isolate/streams.py); opened inside the read, so a put replacing the
  object meanwhile cannot take the body from under it.
* Conditional operations (``onlyIf``) are checked and applied in one call on the bucket's
  thread, so nothing slips in between the check and the write.
* ``etag`` is the MD5 of the body in hex (multipart: MD5 of the parts' MD5s, then ``-N``);
  ``version`` is random. Errors read ``<method>: <message> (<code>)`` as workerd words them.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

from celld.bindings.errors import type_error
from celld.bindings.storage import SqliteFile, fsync_dir, transaction, write_durably
from celld.bindings.wire import to_wire
from celld.isolate.host import HostError

T = TypeVar("T")

MAX_KEY_BYTES = 1024
MAX_CUSTOM_METADATA_BYTES = 8192
MAX_LIST_LIMIT = 1000
MIN_PART_BYTES = 5 * 1024 * 1024
#: R2's largest single upload (5 MiB less than 5 GiB).
MAX_UPLOAD_BYTES = 5 * 1024**3 - 5 * 1024**2
#: How much of a streamed body is read from or written to disk per trip to a thread.
DISK_CHUNK_BYTES = 256 * 1024
MAX_PARTS = 10_000
HASHES = ("md5", "sha1", "sha256", "sha384", "sha512")
_HASH_LABEL = {"md5": "MD5", "sha1": "SHA-1", "sha256": "SHA-256", "sha384": "SHA-384",
               "sha512": "SHA-512"}  # fmt: skip

SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    key TEXT PRIMARY KEY,
    blob TEXT NOT NULL,
    size INTEGER NOT NULL,
    etag TEXT NOT NULL,
    version TEXT NOT NULL,
    uploaded INTEGER NOT NULL,
    http_metadata TEXT NOT NULL,
    custom_metadata TEXT NOT NULL,
    checksums TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS uploads (
    upload_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    http_metadata TEXT NOT NULL,
    custom_metadata TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS parts (
    upload_id TEXT NOT NULL,
    part_number INTEGER NOT NULL,
    blob TEXT NOT NULL,
    size INTEGER NOT NULL,
    etag TEXT NOT NULL,
    PRIMARY KEY (upload_id, part_number)
) WITHOUT ROWID;
"""

_COLUMNS = "key, blob, size, etag, version, uploaded, http_metadata, custom_metadata, checksums"


def r2_error(method: str, message: str, code: int) -> HostError:
    return HostError(f"{method}: {message} ({code})")


def check_key(method: str, key: Any) -> str:
    if not isinstance(key, str):
        raise type_error(f"{method}: the key must be a string")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise r2_error(method, "The specified object name is not valid.", 10020)
    return key


def wire_object(row: tuple[Any, ...]) -> dict[str, Any]:
    key, _blob, size, etag, version, uploaded, http, custom, checksums = row
    return {
        "key": key,
        "size": size,
        "etag": etag,
        "version": version,
        "uploaded": uploaded,
        "httpMetadata": json.loads(http),
        "customMetadata": json.loads(custom),
        "checksums": json.loads(checksums),
        "storageClass": "Standard",
    }


def precondition_ok(row: tuple[Any, ...] | None, only_if: dict[str, Any] | None) -> bool:
    """R2's conditional rules; `uploaded` compares at one-second precision, as HTTP dates do."""
    if not only_if:
        return True
    etag = row[3] if row else None
    uploaded_s = row[5] // 1000 if row else None
    matches = only_if.get("etagMatches")
    if matches is not None:
        wanted = _etags(matches)
        if row is None or ("*" not in wanted and etag not in wanted):
            return False
    not_matches = only_if.get("etagDoesNotMatch")
    if not_matches is not None and row is not None:
        wanted = _etags(not_matches)
        if "*" in wanted or etag in wanted:
            return False
    # As in HTTP, an etag condition takes precedence over the date condition it pairs with.
    before = only_if.get("uploadedBefore")
    after = only_if.get("uploadedAfter")
    checks = []
    if before is not None and row is not None and matches is None:
        checks.append(uploaded_s < int(before) // 1000)
    if after is not None and row is not None and not_matches is None:
        checks.append(uploaded_s > int(after) // 1000)
    return all(checks)


def _etags(value: Any) -> set[str]:
    items = value if isinstance(value, list) else [value]
    return {str(v).strip().removeprefix("W/").strip('"') for v in items}


class R2Bucket:
    def __init__(self, folder: Path, now_ms: Any, *, synchronous: str = "FULL") -> None:
        self.folder = folder
        self.blobs = folder / "blobs"
        self.incoming = folder / "incoming"
        self.file = SqliteFile(folder / "objects.sqlite3", schema=SCHEMA, synchronous=synchronous)
        self.now_ms = now_ms

    async def open(self) -> R2Bucket:
        await self.file.open()
        await self.file.run(lambda conn: transaction(conn, self._sweep))
        return self

    async def close(self) -> None:
        await self.file.close()

    def _sweep(self, conn: sqlite3.Connection) -> None:
        """Remove body files no row points at (left by a crash between file and row).

        Runs under the write lock: writers create a body and its row inside one write
        transaction, so a body without a row here is one whose writer died (another process,
        such as `celld r2 object put`, may share the bucket)."""
        if self.incoming.is_dir():
            for path in self.incoming.iterdir():
                _remove_unless_locked(path)
        if not self.blobs.is_dir():
            return
        used = {r[0] for r in conn.execute("SELECT blob FROM objects UNION SELECT blob FROM parts")}
        for path in self.blobs.iterdir():
            if path.name not in used:
                path.unlink(missing_ok=True)

    def _new_blob(self, data: bytes) -> str:
        name = secrets.token_hex(16)
        write_durably(self.blobs / name, [data])
        return name

    def _joined_blob(self, parts: list[str]) -> str:
        """A new body file holding the part files one after another, copied file to file
        (a multipart object may be far larger than memory), written durably."""
        name = secrets.token_hex(16)
        path = self.blobs / name
        temporary = path.with_name(f".{name}.tmp")
        with open(temporary, "wb") as out:
            for part in parts:
                with open(self.blobs / part, "rb") as source:
                    shutil.copyfileobj(source, out, DISK_CHUNK_BYTES)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        fsync_dir(self.blobs)
        return name

    def _drop_blob(self, name: str) -> None:
        (self.blobs / name).unlink(missing_ok=True)

    def _write(
        self,
        conn: sqlite3.Connection,
        fn: Callable[[sqlite3.Connection, list[str], list[str]], T],
    ) -> T:
        """Run ``fn(conn, created, stale)`` in one write transaction. `fn` lists the bodies it
        writes in `created` (removed again if anything fails) and the bodies its rows no
        longer point at in `stale` (removed once the transaction has committed)."""
        created: list[str] = []
        stale: list[str] = []
        try:
            result = transaction(conn, lambda c: fn(c, created, stale))
        except BaseException:
            for name in created:
                self._drop_blob(name)
            raise
        for name in stale:
            self._drop_blob(name)
        return result

    def _read_blob(self, name: str, offset: int = 0, length: int | None = None) -> bytes:
        with open(self.blobs / name, "rb") as handle:
            handle.seek(offset)
            return handle.read() if length is None else handle.read(length)

    # -- put -------------------------------------------------------------------------------

    async def put(self, key: str, data: bytes, options: dict[str, Any]) -> dict[str, Any] | None:
        check_key("put", key)
        check_put_metadata(options)
        if len(data) > MAX_UPLOAD_BYTES:
            raise too_large()
        hashes = Hashes(options)
        hashes.update(data)
        checksums = hashes.verify(options)

        def write(
            conn: sqlite3.Connection, created: list[str], stale: list[str]
        ) -> dict[str, Any] | None:
            old = conn.execute(f"SELECT {_COLUMNS} FROM objects WHERE key = ?", (key,)).fetchone()
            if not precondition_ok(old, options.get("onlyIf")):
                return None
            blob = self._new_blob(data)
            created.append(blob)
            return self._store(conn, key, blob, len(data), checksums, options, old, stale)

        return await self.file.run(self._write, write)

    async def put_stream(
        self, key: str, chunks: AsyncIterator[bytes], options: dict[str, Any]
    ) -> dict[str, Any] | None:
        """`put` of a body that arrives in chunks: written to an incoming file as it comes
        (never held whole), renamed into place when complete. A body that fails or grows past
        MAX_UPLOAD_BYTES leaves nothing behind."""
        check_key("put", key)
        check_put_metadata(options)
        hashes = Hashes(options)
        incoming = _Incoming(self.incoming)
        try:
            await asyncio.to_thread(incoming.open)
            pending: list[bytes] = []
            buffered = 0
            async for chunk in chunks:
                if incoming.size + buffered + len(chunk) > MAX_UPLOAD_BYTES:
                    raise too_large()
                pending.append(chunk)
                buffered += len(chunk)
                if buffered >= DISK_CHUNK_BYTES:
                    await asyncio.to_thread(incoming.write, pending, hashes)
                    pending, buffered = [], 0
            await asyncio.to_thread(incoming.finish, pending, hashes)
            checksums = hashes.verify(options)

            def write(
                conn: sqlite3.Connection, created: list[str], stale: list[str]
            ) -> dict[str, Any] | None:
                old = conn.execute(
                    f"SELECT {_COLUMNS} FROM objects WHERE key = ?", (key,)
                ).fetchone()
                if not precondition_ok(old, options.get("onlyIf")):
                    return None
                blob = incoming.place(self.blobs)
                created.append(blob)
                return self._store(conn, key, blob, incoming.size, checksums, options, old, stale)

            return await self.file.run(self._write, write)
        finally:
            await asyncio.to_thread(incoming.discard)

    def _store(
        self,
        conn: sqlite3.Connection,
        key: str,
        blob: str,
        size: int,
        checksums: dict[str, str],
        options: dict[str, Any],
        old: tuple[Any, ...] | None,
        stale: list[str],
    ) -> dict[str, Any]:
        """Write the row of a put whose body is file `blob` (inside `_write`)."""
        row = (
            key,
            blob,
            size,
            checksums["md5"],
            secrets.token_hex(16),
            self.now_ms(),
            json.dumps(options.get("httpMetadata") or {}),
            json.dumps(options.get("customMetadata") or {}),
            json.dumps(checksums),
        )
        conn.execute(f"INSERT OR REPLACE INTO objects ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", row)
        if old is not None:
            stale.append(old[1])
        return wire_object(row)

    # -- get / head ------------------------------------------------------------------------

    async def get(
        self,
        key: str,
        options: dict[str, Any],
        *,
        body: bool,
        stream_over: int | None = None,
    ) -> dict[str, Any] | None:
        """The object's wire form (None: no such key). With `body`, bodies of at most
        `stream_over` bytes (all, when None) come as `body`; a larger one as `file`, an
        open `BodyFile` the caller reads and closes."""
        method = "get" if body else "head"
        check_key(method, key)

        def read(conn: sqlite3.Connection, retry: bool = True) -> dict[str, Any] | None:
            row = conn.execute(f"SELECT {_COLUMNS} FROM objects WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            wire, span = answer_of(row, options, body=body)
            if span is None:
                return wire
            offset, length = span
            try:
                if stream_over is not None and length > stream_over:
                    wire["file"] = BodyFile(self.blobs / row[1], offset, length)
                else:
                    wire["body"] = to_wire(self._read_blob(row[1], offset, length))
            except FileNotFoundError:
                # Replaced by another process between our read of the row and of the file.
                if retry:
                    return read(conn, False)
                raise HostError(
                    f"get: the body of {key!r} is missing from {self.blobs} (local state damaged)"
                ) from None
            return wire

        return await self.file.run(read)

    # -- delete / list ---------------------------------------------------------------------

    async def delete(self, keys: list[str]) -> None:
        for key in keys:
            check_key("delete", key)

        def remove(conn: sqlite3.Connection, created: list[str], stale: list[str]) -> None:
            for key in keys:
                row = conn.execute("SELECT blob FROM objects WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    stale.append(row[0])
            conn.executemany("DELETE FROM objects WHERE key = ?", [(k,) for k in keys])

        await self.file.run(self._write, remove)

    async def list(self, options: dict[str, Any]) -> dict[str, Any]:
        listing = Listing(options)

        def read(conn: sqlite3.Connection) -> dict[str, Any]:
            sql = f"SELECT {_COLUMNS} FROM objects WHERE substr(key, 1, ?) = ?"
            args: list[Any] = [len(listing.prefix), listing.prefix]
            if listing.after is not None:
                sql += " AND CAST(key AS BLOB) > CAST(? AS BLOB)"
                args.append(listing.after)
            sql += " ORDER BY CAST(key AS BLOB)"
            for row in conn.execute(sql, args):
                if not listing.add(row):
                    break
            return listing.result()

        return await self.file.run(read)

    # -- multipart uploads -----------------------------------------------------------------

    async def create_upload(self, key: str, options: dict[str, Any]) -> str:
        check_key("createMultipartUpload", key)
        upload_id = secrets.token_hex(24)
        row = (
            upload_id,
            key,
            json.dumps(options.get("httpMetadata") or {}),
            json.dumps(options.get("customMetadata") or {}),
        )
        await self.file.run(
            lambda conn: conn.execute("INSERT INTO uploads VALUES (?, ?, ?, ?)", row)
        )
        return upload_id

    def _upload(
        self, conn: sqlite3.Connection, method: str, key: str, upload_id: str
    ) -> tuple[Any, ...]:
        row = conn.execute(
            "SELECT upload_id, key, http_metadata, custom_metadata FROM uploads "
            "WHERE upload_id = ? AND key = ?",
            (upload_id, key),
        ).fetchone()
        if row is None:
            raise r2_error(method, "The specified multipart upload does not exist.", 10024)
        return row  # type: ignore[no-any-return]

    async def upload_part(
        self, key: str, upload_id: str, number: Any, data: bytes
    ) -> dict[str, Any]:
        if not isinstance(number, int) or not 1 <= number <= MAX_PARTS:
            raise r2_error(
                "uploadPart", "Part number must be between 1 and 10000 (inclusive).", 10039
            )

        def write(conn: sqlite3.Connection, created: list[str], stale: list[str]) -> dict[str, Any]:
            self._upload(conn, "uploadPart", key, upload_id)
            etag = hashlib.md5(data).hexdigest()
            blob = self._new_blob(data)
            created.append(blob)
            old = conn.execute(
                "SELECT blob FROM parts WHERE upload_id = ? AND part_number = ?",
                (upload_id, number),
            ).fetchone()
            conn.execute(
                "INSERT OR REPLACE INTO parts VALUES (?, ?, ?, ?, ?)",
                (upload_id, number, blob, len(data), etag),
            )
            if old is not None:
                stale.append(old[0])
            return {"partNumber": number, "etag": etag}

        return await self.file.run(self._write, write)

    async def abort_upload(self, key: str, upload_id: str) -> None:
        def remove(conn: sqlite3.Connection, created: list[str], stale: list[str]) -> None:
            self._upload(conn, "abortMultipartUpload", key, upload_id)
            stale.extend(
                r[0]
                for r in conn.execute("SELECT blob FROM parts WHERE upload_id = ?", (upload_id,))
            )
            conn.execute("DELETE FROM parts WHERE upload_id = ?", (upload_id,))
            conn.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))

        await self.file.run(self._write, remove)

    async def complete_upload(
        self, key: str, upload_id: str, parts: list[dict[str, Any]]
    ) -> dict[str, Any]:
        def complete(
            conn: sqlite3.Connection, created: list[str], stale: list[str]
        ) -> dict[str, Any]:
            upload = self._upload(conn, "completeMultipartUpload", key, upload_id)
            stored = {
                r[0]: r[1:]
                for r in conn.execute(
                    "SELECT part_number, blob, size, etag FROM parts WHERE upload_id = ?",
                    (upload_id,),
                )
            }
            chosen, etag = choose_parts(stored, parts)
            blob = self._joined_blob([name for name, _, _ in chosen])
            created.append(blob)
            size = sum(part_size for _, part_size, _ in chosen)
            row = (key, blob, size, etag, secrets.token_hex(16), self.now_ms(),
                   upload[2], upload[3], json.dumps({}))  # fmt: skip
            old = conn.execute("SELECT blob FROM objects WHERE key = ?", (key,)).fetchone()
            part_blobs = [
                r[0]
                for r in conn.execute("SELECT blob FROM parts WHERE upload_id = ?", (upload_id,))
            ]

            conn.execute(
                f"INSERT OR REPLACE INTO objects ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", row
            )
            conn.execute("DELETE FROM parts WHERE upload_id = ?", (upload_id,))
            conn.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))
            stale.extend(part_blobs + ([old[0]] if old else []))
            return wire_object(row)

        return await self.file.run(self._write, complete)


def answer_of(
    row: tuple[Any, ...], options: dict[str, Any], *, body: bool
) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """The wire form of a get or head of `row`, and the (offset, length) of its body to
    send (None: a head, or a get whose condition failed: an R2Object without a body, as
    R2 answers)."""
    wire = wire_object(row)
    wire["range"] = {"offset": 0, "length": row[2]}
    if not body or not precondition_ok(row, options.get("onlyIf")):
        return wire, None
    offset, length = body_range(row[2], options.get("range"))
    wire["range"] = {"offset": offset, "length": length}
    return wire, (offset, length)


class Listing:
    """One `list` call: its options checked, then fed the bucket's rows in key order
    (`add` until it says the page is full) and answered by `result`."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.prefix = str(options.get("prefix") or "")
        self.delimiter = options.get("delimiter")
        limit = options.get("limit")
        if limit is None:
            limit = MAX_LIST_LIMIT
        if not isinstance(limit, int) or limit < 1 or limit > MAX_LIST_LIMIT:
            raise r2_error("list", "MaxKeys params must be positive integer <= 1000.", 10022)
        self.limit = limit
        cursor = options.get("cursor")
        self.after: str | None = options.get("startAfter")
        if cursor:
            try:
                self.after = base64.urlsafe_b64decode(str(cursor).encode()).decode()
            except (ValueError, UnicodeError):
                raise r2_error("list", "The cursor is not valid.", 10023) from None
        self.include = set(options.get("include") or ())
        self.objects: list[dict[str, Any]] = []
        self.prefixes: list[str] = []
        self.last: str | None = None
        self.truncated = False

    def add(self, row: tuple[Any, ...]) -> bool:
        """Take the next row; False once the page is full (the row is not taken)."""
        if len(self.objects) + len(self.prefixes) >= self.limit:
            self.truncated = True
            return False
        key = row[0]
        if self.delimiter:
            index = key.find(self.delimiter, len(self.prefix))
            if index >= 0:
                group = key[: index + len(self.delimiter)]
                if not self.prefixes or self.prefixes[-1] != group:
                    self.prefixes.append(group)
                self.last = key
                return True
        wire = wire_object(row)
        if "httpMetadata" not in self.include:
            wire["httpMetadata"] = {}
        if "customMetadata" not in self.include:
            wire["customMetadata"] = {}
        self.objects.append(wire)
        self.last = key
        return True

    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "objects": self.objects,
            "truncated": self.truncated,
            "delimitedPrefixes": self.prefixes,
        }
        if self.truncated and self.last is not None:
            result["cursor"] = base64.urlsafe_b64encode(self.last.encode()).decode()
        return result


def choose_parts(
    stored: dict[int, tuple[Any, int, str]], parts: list[dict[str, Any]]
) -> tuple[list[tuple[Any, int, str]], str]:
    """The stored parts (body, size, etag) a completion names, in its order, and the
    object's etag; R2's errors for a part missing or too small."""
    chosen = []
    for index, part in enumerate(parts):
        found = stored.get(part.get("partNumber"))  # type: ignore[arg-type]
        if found is None or found[2] != str(part.get("etag")).strip('"'):
            raise r2_error(
                "completeMultipartUpload",
                "One or more of the specified parts could not be found.",
                10025,
            )
        if index < len(parts) - 1 and found[1] < MIN_PART_BYTES:
            raise r2_error(
                "completeMultipartUpload",
                "Your proposed upload is smaller than the minimum allowed object size.",
                10011,
            )
        chosen.append(found)
    digest = hashlib.md5(b"".join(bytes.fromhex(etag) for _, _, etag in chosen))
    return chosen, f"{digest.hexdigest()}-{len(chosen)}"


class BodyFile:
    """An object's body (or a range of it) read from its file in chunks; the file is opened
    at once (a put replacing the object later removes the name, not the open file)."""

    def __init__(self, path: Path, offset: int, length: int) -> None:
        self.length = length
        self._left = length
        self._handle = open(path, "rb")  # noqa: SIM115 - closed by aclose()
        self._handle.seek(offset)

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            while self._left > 0:
                data = await asyncio.to_thread(self._handle.read, min(DISK_CHUNK_BYTES, self._left))
                if not data:
                    raise HostError("get: the object's body ended early (local state damaged)")
                self._left -= len(data)
                yield data
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        self._handle.close()


class Hashes:
    """MD5 (the etag) and the checksums a put asked to verify, fed as the body comes."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.hashes = {"md5": hashlib.md5()}
        for name in HASHES:
            if options.get(name) is not None and name != "md5":
                self.hashes[name] = hashlib.new(name)

    def update(self, data: bytes) -> None:
        for digest in self.hashes.values():
            digest.update(data)

    def verify(self, options: dict[str, Any]) -> dict[str, str]:
        """The checksums to record; raises R2's error for one that does not match."""
        checksums: dict[str, str] = {"md5": self.hashes["md5"].hexdigest()}
        for name in HASHES:
            given = options.get(name)
            if given is None:
                continue
            actual = self.hashes[name].hexdigest()
            if str(given).lower() != actual:
                label = _HASH_LABEL[name]
                raise r2_error(
                    "put",
                    f"The {label} checksum you specified did not match what we received.\n"
                    f"You provided a {label} checksum with value: {given}\n"
                    f"Actual {label} was: {actual}",
                    10037,
                )
            checksums[name] = actual
        return checksums


class _Incoming:
    """A body being streamed into ``incoming/``, locked (flock) until placed or discarded,
    so that a bucket opened meanwhile (by `celld r2 object put`, say) leaves it alone."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / secrets.token_hex(16)
        self.size = 0
        self._handle: Any = None

    def open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.path, "wb")  # noqa: SIM115 - closed by discard()
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX)

    def write(self, chunks: list[bytes], hashes: Hashes) -> None:
        for chunk in chunks:
            self._handle.write(chunk)
            hashes.update(chunk)
            self.size += len(chunk)

    def finish(self, chunks: list[bytes], hashes: Hashes) -> None:
        """Write the last chunks and make the body durable."""
        self.write(chunks, hashes)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def place(self, blobs: Path) -> str:
        """Move the body to ``blobs/`` under a new name (durably); returns the name."""
        blobs.mkdir(parents=True, exist_ok=True)
        name = secrets.token_hex(16)
        os.replace(self.path, blobs / name)
        fsync_dir(blobs)
        self.path = None  # type: ignore[assignment]
        return name

    def discard(self) -> None:
        """Close the file and remove it unless it was placed."""
        if self._handle is not None:
            self._handle.close()  # (releases the lock)
            self._handle = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def _remove_unless_locked(path: Path) -> None:
    """Remove an incoming body whose writer is gone (no lock held on it)."""
    try:
        with open(path, "rb") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # still being written
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        pass


def check_put_metadata(options: dict[str, Any]) -> None:
    custom = options.get("customMetadata") or {}
    if _metadata_size(custom) > MAX_CUSTOM_METADATA_BYTES:
        raise r2_error(
            "put", "Your metadata headers exceed the maximum allowed metadata size.", 10012
        )


def too_large() -> HostError:
    return r2_error("put", "Your proposed upload exceeds the maximum allowed object size.", 100100)


def _metadata_size(custom: dict[str, Any]) -> int:
    """The UTF-8 bytes of every custom metadata key and value, summed (at most 8,192, as
    wrangler dev allows)."""
    return sum(len(str(k).encode()) + len(str(v).encode()) for k, v in custom.items())


def body_range(size: int, spec: dict[str, Any] | None) -> tuple[int, int]:
    if not spec:
        return 0, size
    if "suffix" in spec and spec["suffix"] is not None:
        suffix = int(spec["suffix"])
        start = max(0, size - suffix)
        return start, size - start
    offset = int(spec.get("offset") or 0)
    length = spec.get("length")
    if offset < 0 or offset > size or (length is not None and int(length) < 0):
        raise r2_error("get", "The requested range is not satisfiable", 10039)
    end = size if length is None else min(size, offset + int(length))
    return offset, end - offset
