"""The objects index: one SQLite file for what concerns every object of a project.

It records the migrations applied to the state folder (so a rename or delete happens
once, in order, as wrangler's are) and each object's alarm. Alarms live here rather than
in the object's own file so that a restart finds every pending alarm with one query,
without opening a file per object; an alarm is committed before ``setAlarm`` returns.

Alarm calls come from the JS threads that run objects (synchronously, see storage.py),
and bookkeeping from the event loop, so the connection is shared under a lock.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import NamedTuple

from celld.bindings.storage import SqliteFile
from celld.objects.ids import ObjectRef

SCHEMA = """
CREATE TABLE IF NOT EXISTS migrations (
    position INTEGER PRIMARY KEY,
    tag TEXT NOT NULL UNIQUE,
    applied_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS alarms (
    class TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT,
    at INTEGER NOT NULL,
    retries INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (class, id)
) WITHOUT ROWID;
"""


class Alarm(NamedTuple):
    ref: ObjectRef
    name: str | None
    at: int
    retries: int


class ObjectIndex:
    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        self.path = path
        self.synchronous = synchronous
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def open(self) -> None:
        self._conn = SqliteFile(self.path, schema=SCHEMA, synchronous=self.synchronous).open_sync()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"{self.path} is not open")
        return self._conn

    # -- migrations -------------------------------------------------------------------

    def applied_tags(self) -> list[str]:
        with self._lock:
            rows = self._db().execute("SELECT tag FROM migrations ORDER BY position").fetchall()
        return [tag for (tag,) in rows]

    def record_migration(self, position: int, tag: str, now_ms: int) -> None:
        with self._lock:
            self._db().execute(
                "INSERT INTO migrations (position, tag, applied_at) VALUES (?, ?, ?)",
                (position, tag, now_ms),
            )

    def rename_class(self, old: str, new: str) -> None:
        with self._lock:
            self._db().execute("UPDATE alarms SET class = ? WHERE class = ?", (new, old))

    def drop_class(self, cls: str) -> None:
        with self._lock:
            self._db().execute("DELETE FROM alarms WHERE class = ?", (cls,))

    # -- alarms -----------------------------------------------------------------------

    def get_alarm(self, ref: ObjectRef) -> Alarm | None:
        with self._lock:
            row = (
                self._db()
                .execute(
                    "SELECT name, at, retries FROM alarms WHERE class = ? AND id = ?", tuple(ref)
                )
                .fetchone()
            )
        return None if row is None else Alarm(ref, row[0], row[1], row[2])

    def set_alarm(self, ref: ObjectRef, name: str | None, at: int, retries: int = 0) -> None:
        with self._lock:
            self._db().execute(
                "INSERT OR REPLACE INTO alarms (class, id, name, at, retries) "
                "VALUES (?, ?, ?, ?, ?)",
                (ref.cls, ref.id, name, at, retries),
            )

    def delete_alarm(self, ref: ObjectRef, at: int | None = None) -> bool:
        """Delete the alarm (only if it is still set for `at`, when given)."""
        with self._lock:
            if at is None:
                cursor = self._db().execute(
                    "DELETE FROM alarms WHERE class = ? AND id = ?", tuple(ref)
                )
            else:
                cursor = self._db().execute(
                    "DELETE FROM alarms WHERE class = ? AND id = ? AND at = ?", (*ref, at)
                )
            return cursor.rowcount > 0

    def alarms(self) -> list[Alarm]:
        with self._lock:
            rows = self._db().execute("SELECT class, id, name, at, retries FROM alarms").fetchall()
        return [Alarm(ObjectRef(c, i), n, a, r) for c, i, n, a, r in rows]
