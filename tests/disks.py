"""A disk that fills up on demand, for fault tests, without the right to mount anything.

`FullableDisk` is a folder (the state folder of a `celld run` under test) that a test
can declare full and free again while the server runs. The server is started with the
environment of `FullableDisk.env`, which preloads a small shim (tests/full_disk.c,
compiled with the machine's C compiler into the test's own temporary folder). While
the disk is full, every write by that process that needs new space in a file under the
folder fails with ENOSPC, as on a real full disk: SQLite's unix VFS turns it into
SQLITE_FULL ("database or disk is full"), the error a full disk gives it. Which writes
need space depends on the file system, so a test says which kind of disk is full:

* one that overwrites in place (ext4, xfs, tmpfs; the default): writes that extend a
  file fail, writes inside what a file already has go through (a commit that fits in a
  WAL reused after a checkpoint succeeds, so the store fails and recovers by turns);
* a copy-on-write one (btrfs, ZFS; `copy_on_write=True`): every write fails, so every
  commit does until space is back.

Reads, unlinks and fsyncs go through either way.

Why this and not the other unprivileged ways:

* A tmpfs or a loop file needs the right to mount, which CI machines do not give.
* RLIMIT_FSIZE (`resource.prlimit` on the server's pid) is one size for every file the
  process writes, whatever the folder: writes to the log, or to a WAL smaller than the
  limit, behave differently from a full disk, and the error is EFBIG, which SQLite
  reports as a plain I/O error (SQLITE_IOERR_WRITE), not SQLITE_FULL.
* The shim fails exactly the writes a full disk fails, with the errno a full disk
  gives, in the state folder only, from the moment the test says so to the moment it
  says otherwise: the server sees what it would see on a real disk, through the same
  system calls, and its SQLite code paths (commits, WAL growth, the shared-memory
  index's growth, checkpoints) fail where they would.

A machine without a C compiler, or where the shim does not take effect, cannot run
these tests: `FullableDisk` raises `DiskFaultUnavailable` saying what is missing, and
the tests fail with it rather than skip.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SHIM_SOURCE = Path(__file__).resolve().parent / "full_disk.c"


class DiskFaultUnavailable(Exception):  # noqa: N818 - says what this machine lacks
    pass


class FullableDisk:
    """A folder whose writes a process started with `env` sees fail as on a full disk
    while `full` (or between `fill` and `free`)."""

    def __init__(self, folder: Path, scratch: Path) -> None:
        """`folder`: the disk (created if missing). `scratch`: where the shim is built and
        its switch kept (outside `folder`)."""
        self.folder = folder.resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        scratch.mkdir(parents=True, exist_ok=True)
        self.flag = scratch.resolve() / "disk-is-full"
        self.shim = build_shim(scratch.resolve())
        self.free()
        preload = os.environ.get("LD_PRELOAD", "")
        self.env = {
            "LD_PRELOAD": f"{self.shim} {preload}".strip(),
            "CELLD_FULL_DISK_DIR": str(self.folder),
            "CELLD_FULL_DISK_FLAG": str(self.flag),
        }
        self._check()

    @property
    def is_full(self) -> bool:
        return self.flag.exists()

    def fill(self, *, copy_on_write: bool = False) -> None:
        """From now on, writes that need space under the folder fail with ENOSPC: those that
        extend a file, or with `copy_on_write` every write (see the module's docstring)."""
        switch = self.flag.with_name(self.flag.name + ".next")
        switch.write_text("every write" if copy_on_write else "")
        switch.replace(self.flag)  # (the shim never sees a half-written switch)

    def free(self) -> None:
        """Space is back."""
        self.flag.unlink(missing_ok=True)

    @contextmanager
    def full(self, *, copy_on_write: bool = False) -> Iterator[None]:
        self.fill(copy_on_write=copy_on_write)
        try:
            yield
        finally:
            self.free()

    def _check(self) -> None:
        """Prove, in a process started like the server, that the shim makes SQLite fail
        as on a full disk while the flag exists and only then."""
        probe = self.folder / ".full-disk-probe"
        script = textwrap.dedent(
            """
            import os, sqlite3, sys
            path, flag = sys.argv[1], sys.argv[2]
            db = sqlite3.connect(path)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS t (v BLOB)")
            db.commit()

            def insert(kb):
                try:
                    db.execute("INSERT INTO t VALUES (randomblob(?))", (kb * 1024,))
                    db.commit()
                    print("committed")
                except sqlite3.OperationalError as error:
                    print(f"refused: {error}")

            insert(100)  # the WAL grows to hold it
            for mode in ("", "every write"):
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")  # the WAL is reused from its start
                with open(flag, "w") as switch:
                    switch.write(mode)
                insert(4)  # fits in the WAL's room: refused only by a copy-on-write disk
                insert(200)  # more than the WAL has room for
                os.unlink(flag)
                insert(200)
            """
        )
        try:
            done = subprocess.run(
                [sys.executable, "-c", script, str(probe), str(self.flag)],
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{probe}{suffix}").unlink(missing_ok=True)
        refused = "refused: database or disk is full"
        expected = ["committed"]
        expected += ["committed", refused, "committed"]  # full, overwriting in place
        expected += [refused, refused, "committed"]  # full, copy-on-write
        if done.returncode != 0 or done.stdout.splitlines() != expected:
            raise DiskFaultUnavailable(
                f"the full-disk shim ({self.shim}) did not make SQLite {sqlite3.sqlite_version}"
                f" fail as on a full disk in {self.folder}: expected {expected}, got "
                f"{done.stdout.splitlines()} (exit {done.returncode})\n{done.stderr}"
            )


def build_shim(into: Path) -> Path:
    """Compile tests/full_disk.c into `into`; raise DiskFaultUnavailable if this machine
    cannot."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise DiskFaultUnavailable(
            "the full-disk tests need a C compiler (cc or gcc, or $CC) to build "
            f"{SHIM_SOURCE.name}; install gcc"
        )
    shim = into / "full_disk.so"
    done = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(shim), str(SHIM_SOURCE), "-ldl"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise DiskFaultUnavailable(
            f"{compiler} could not build {SHIM_SOURCE.name}:\n{done.stderr.strip()}"
        )
    return shim
