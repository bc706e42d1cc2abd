"""The pages a commit changed in a SQLite file, read from its write-ahead log, and a file
rebuilt from pages.

An object or D1 database on a shared store keeps its SQLite file on its owner node and
its pages in PostgreSQL (celld/objects/placement.py). Which pages a commit changed is
what SQLite's WAL records: in WAL mode every committed transaction appends one frame per
page it changed to the ``-wal`` file, the last one marking the commit with the database's
size in pages (the WAL format is documented by SQLite, "Database File Format", section 4).
Reading the frames appended since the last read therefore gives exactly the pages to ship,
with no SQL-level diffing and no copy of unchanged pages.

For that, nothing but celld may move frames out of the log: the connection is opened with
``wal_autocheckpoint=0``, and :meth:`WalReader.checkpoint` folds the log into the main
file (and truncates it) only after its frames were shipped. The first commit of a file
with no shipped history ships every page of the file instead (:meth:`WalReader.all_pages`):
the pages SQLite wrote to the main file when it created it never went through the log.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from celld.bindings.sqlguard import trusted

WAL_HEADER = 32
FRAME_HEADER = 24
#: Log size past which the shipped frames are folded into the main file.
CHECKPOINT_BYTES = 4 * 1024 * 1024


@dataclass
class Changes:
    """What one or more commits changed: page number -> its new content, and the file's
    size in pages after the last of them."""

    pages: dict[int, bytes]
    page_count: int
    page_size: int


class WalReader:
    """Frames appended to one connection's log since the last read (used only on the thread
    that commits on that connection, right after it commits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.wal = Path(str(path) + "-wal")
        self.offset = 0  # where the next unread frame starts
        self.salt = b""  # the log header's salts the offset belongs to

    def attach(self, conn: sqlite3.Connection) -> None:
        """Take the log over on `conn`: only celld checkpoints it from now on, and frames
        already in it (none, for a file just rebuilt or closed cleanly) are not shipped."""
        with trusted(conn):
            conn.execute("PRAGMA wal_autocheckpoint=0")
        self.checkpoint(conn)

    def read(self) -> Changes | None:
        """The pages of the commits since the last read, or None if there were none."""
        try:
            with open(self.wal, "rb") as log:
                header = log.read(WAL_HEADER)
                if len(header) < WAL_HEADER:
                    return None
                page_size = struct.unpack(">I", header[8:12])[0]
                page_size = 65536 if page_size == 1 else page_size
                salt = header[16:24]
                if salt != self.salt:  # a log restarted from its beginning
                    self.salt, self.offset = salt, WAL_HEADER
                log.seek(self.offset)
                pages: dict[int, bytes] = {}
                committed: dict[int, bytes] = {}
                page_count = 0
                position = self.offset
                frame_size = FRAME_HEADER + page_size
                while True:
                    frame = log.read(frame_size)
                    if len(frame) < frame_size or frame[8:16] != salt:
                        break
                    number, size_after = struct.unpack(">II", frame[:8])
                    pages[number] = frame[FRAME_HEADER:]
                    position += frame_size
                    if size_after:  # a commit frame: everything up to here is committed
                        committed.update(pages)
                        pages = {}
                        page_count = size_after
                        self.offset = position
        except FileNotFoundError:
            return None
        if not committed:
            return None
        return Changes(committed, page_count, page_size)

    def all_pages(self, conn: sqlite3.Connection) -> Changes:
        """Every page of the file as committed now (the log folded into it first)."""
        self.checkpoint(conn)
        with trusted(conn):
            page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            page_count = int(conn.execute("PRAGMA page_count").fetchone()[0])
        pages: dict[int, bytes] = {}
        with open(self.path, "rb") as file:
            for number in range(1, page_count + 1):
                pages[number] = file.read(page_size)
        return Changes(pages, page_count, page_size)

    def checkpoint(self, conn: sqlite3.Connection, *, if_larger: int = 0) -> None:
        """Fold the log into the main file and empty it (its frames were shipped)."""
        if if_larger and self.offset < if_larger:
            return
        with trusted(conn):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.offset, self.salt = 0, b""


def remove_files(path: Path) -> None:
    """The file and its log and shared-memory index (a copy no longer trusted)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + suffix)


def rebuild(path: Path, page_size: int, pages: Iterable[tuple[int, bytes]]) -> None:
    """Write a file from its pages (page number order, every page from 1 on), durably,
    replacing whatever was there."""
    remove_files(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".rebuilding")
    with open(temporary, "wb") as file:
        expected = 1
        for number, data in pages:
            if number != expected or len(data) != page_size:
                raise ValueError(
                    f"page {number} of {path.name} is missing or the wrong size in the store"
                )
            file.write(data)
            expected += 1
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
