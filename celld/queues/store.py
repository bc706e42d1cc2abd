"""Queue messages on disk: one SQLite file per session, ``<state>/queues.sqlite3``.

A message is a row from the moment its `send()` resolves until it is acknowledged, dropped
or moved to its dead letter queue: the row commits (WAL, ``synchronous=FULL``: one fsync)
before JS sees the send succeed, so a `kill -9` loses no acknowledged send. A delivery
changes nothing on disk; only its outcome does (delete, reschedule, or move to the dead
letter queue, all of one batch in one transaction). A crash mid-delivery therefore delivers
those messages again after the restart: delivery is at least once, as on Cloudflare.

Sends share commits: while one commit is being written, the sends that arrive wait and
then go in the next transaction together (each still all or none with the others of that
commit, and none resolves before its commit), so concurrent producers pay one fsync per
commit, not one each, as the workflow store shares a commit per loop pass.

The file is celld's own (no Worker SQL reaches it), served by its own thread like the
bindings' stores (celld/bindings/storage.py). With `celld run --workers N` every process
opens the same file (as KV's files are shared): any process inserts what its producers
send, SQLite's locks order the writers between processes, and only the process that owns
a queue (celld/queues/placement.py) reads, delivers and settles its messages. A message
moved to a dead letter queue is therefore deleted and inserted again (a new seq) in the
same transaction, so the dead letter queue's owner can be told which rows are new.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from celld.bindings.storage import SqliteFile, transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body BLOB NOT NULL,
    visible_at INTEGER NOT NULL,
    failed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_by_queue ON messages (queue, seq);
"""


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    queue: str
    id: str
    timestamp_ms: int
    content_type: str
    #: epoch ms from which it may be delivered
    visible_at: int
    #: deliveries that failed so far
    failed: int
    size: int
    body: bytes | None = None


#: (seq, visible at (epoch ms), failed deliveries so far) of a retried message
Retried = tuple[int, int, int]
#: (seq, dead letter queue, visible at) of a message moved to its dead letter queue
Moved = tuple[int, str, int]


def metrics_of(count: int, size: int, oldest_ms: int) -> dict[str, int]:
    """Cloudflare's `metrics()` of a queue from its stored rows."""
    return {"backlogCount": count, "backlogBytes": size, "oldestMessageTimestamp": oldest_ms}


@dataclass(frozen=True)
class NewMessage:
    queue: str
    id: str
    timestamp_ms: int
    content_type: str
    body: bytes
    visible_at: int


class SharedCommits:
    """Sends share commits: those that arrive while one commit is being written wait and
    go in the next one together (each all or none with the others of that commit, none
    resolved before its commit). `insert` writes one commit and returns the rows' seqs."""

    def __init__(self, insert: Callable[[list[NewMessage]], Awaitable[list[int]]]) -> None:
        self.insert = insert
        #: sends waiting for the next commit, and the task writing commits
        self._pending: list[tuple[list[NewMessage], asyncio.Future[list[int]]]] = []
        self._writer: asyncio.Task[None] | None = None
        #: commits so far (tests see sends share them)
        self.commits = 0

    async def add(self, messages: list[NewMessage]) -> list[int]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[int]] = loop.create_future()
        self._pending.append((messages, done))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._commit_pending())
        return await asyncio.shield(done)

    async def drain(self) -> None:
        """Wait for the sends already accepted to be committed."""
        if self._writer is not None:
            await self._writer

    async def _commit_pending(self) -> None:
        """Commit what waits, again and again until nothing does."""
        while self._pending:
            groups, self._pending = self._pending, []
            rows = [m for messages, _ in groups for m in messages]
            try:
                seqs = await self.insert(rows)
                self.commits += 1
            except Exception as error:
                for _, done in groups:
                    if not done.done():
                        done.set_exception(error)
                continue
            start = 0
            for messages, done in groups:
                if not done.done():
                    done.set_result(seqs[start : start + len(messages)])
                start += len(messages)


class QueueStore:
    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        self.file = SqliteFile(path, schema=SCHEMA, synchronous=synchronous)
        self.commits = SharedCommits(lambda rows: self.file.run(partial(_insert, rows)))

    @property
    def send_commits(self) -> int:
        return self.commits.commits

    async def open(self) -> QueueStore:
        await self.file.open()
        return self

    async def close(self) -> None:
        await self.commits.drain()  # sends already accepted are committed first
        await self.file.close()

    async def add(self, messages: list[NewMessage]) -> list[int]:
        """Store messages, all or none; their seqs once committed (in a commit shared with
        the sends waiting at the same time)."""
        return await self.commits.add(messages)

    async def index(self, queue: str | None = None, after: int = 0) -> list[StoredMessage]:
        """Every stored message (of `queue`, or of all; with a seq above `after`) without its
        body (what a broker starts from, and what an owner reads again to find what it
        was not told of)."""

        def run(conn: sqlite3.Connection) -> list[StoredMessage]:
            where, args = ("WHERE seq > ? ", (after,))
            if queue is not None:
                where, args = ("WHERE queue = ? AND seq > ? ", (queue, after))
            rows = conn.execute(
                "SELECT seq, queue, id, timestamp_ms, content_type, visible_at, failed, "
                f"length(body) FROM messages {where}ORDER BY seq",
                args,
            ).fetchall()
            return [StoredMessage(*row) for row in rows]

        return await self.file.run(run)

    async def rows(self, queue: str, seqs: list[int]) -> list[StoredMessage]:
        """The messages of `queue` among `seqs` still stored, without their bodies."""

        def run(conn: sqlite3.Connection) -> list[StoredMessage]:
            marks = ",".join("?" * len(seqs))
            rows = conn.execute(
                "SELECT seq, queue, id, timestamp_ms, content_type, visible_at, failed, "
                f"length(body) FROM messages WHERE queue = ? AND seq IN ({marks}) ORDER BY seq",
                (queue, *seqs),
            ).fetchall()
            return [StoredMessage(*row) for row in rows]

        return await self.file.run(run) if seqs else []

    async def stats(self, queue: str) -> dict[str, int]:
        """Cloudflare's `metrics()` of a queue this process does not own, from the file."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            count, size, oldest = conn.execute(
                "SELECT count(*), coalesce(sum(length(body)), 0), "
                "coalesce(min(timestamp_ms), 0) FROM messages WHERE queue = ?",
                (queue,),
            ).fetchone()
            return metrics_of(int(count), int(size), int(oldest))

        return await self.file.run(run)

    async def bodies(self, seqs: list[int]) -> dict[int, bytes]:
        def run(conn: sqlite3.Connection) -> dict[int, bytes]:
            marks = ",".join("?" * len(seqs))
            rows = conn.execute(f"SELECT seq, body FROM messages WHERE seq IN ({marks})", seqs)
            return {int(seq): bytes(body) for seq, body in rows}

        return await self.file.run(run)

    async def settle(
        self, queue: str, deleted: Iterable[int], retried: Iterable[Retried], moved: Iterable[Moved]
    ) -> list[int]:
        """One batch's outcome (of `queue`) in one transaction: rows deleted, rescheduled
        (seq, visible at, failed) or moved to another queue (seq, queue, visible at) with no
        failures; the moved rows' new seqs, in order."""
        deleted, retried, moved = list(deleted), list(retried), list(moved)

        def run(conn: sqlite3.Connection) -> list[int]:
            def write(c: sqlite3.Connection) -> list[int]:
                c.executemany("DELETE FROM messages WHERE seq = ?", [(s,) for s in deleted])
                c.executemany(
                    "UPDATE messages SET visible_at = ?, failed = ? WHERE seq = ?",
                    [(at, failed, seq) for seq, at, failed in retried],
                )
                new = []
                for seq, to, at in moved:
                    cursor = c.execute(
                        "INSERT INTO messages (queue, id, timestamp_ms, content_type, body, "
                        "visible_at) SELECT ?, id, timestamp_ms, content_type, body, ? "
                        "FROM messages WHERE seq = ?",
                        (to, at, seq),
                    )
                    new.append(int(cursor.lastrowid or 0))
                    c.execute("DELETE FROM messages WHERE seq = ?", (seq,))
                return new

            return transaction(conn, write)

        return await self.file.run(run)


def _insert(messages: list[NewMessage], conn: sqlite3.Connection) -> list[int]:
    """One transaction inserting `messages`; their seqs in order."""

    def insert(c: sqlite3.Connection) -> list[int]:
        seqs = []
        for m in messages:
            cursor = c.execute(
                "INSERT INTO messages (queue, id, timestamp_ms, content_type, body, "
                "visible_at) VALUES (?, ?, ?, ?, ?, ?)",
                (m.queue, m.id, m.timestamp_ms, m.content_type, m.body, m.visible_at),
            )
            seqs.append(int(cursor.lastrowid or 0))
        return seqs

    return transaction(conn, insert)
