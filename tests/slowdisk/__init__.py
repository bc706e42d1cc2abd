"""A slow disk for tests, without privileges: an LD_PRELOAD shim that delays commits.

Some defects show only when the store's commits are slow (as on a slow or busy disk):
the window between a result reaching JS and its commit landing is then wide enough for
JS to act in it. `slowdisk.c` beside this file wraps libc's write and flush calls so
that, for files under one folder, the first write after each flush (the start of a
commit's data) sleeps `write_ms` and every flush sleeps `sync_ms`. `build` compiles it
with gcc into a folder of the test's own, and `env` gives the variables that put it
under a process:

    shim = build(tmp_path)
    server = CelldServer(project, state, env=env(shim, state, write_ms=40))

Why the write and not only the flush: a test that SIGKILLs celld loses only what was
never written. Data written before the kill sits in the kernel's page cache and survives
it, flushed or not, so a slow flush alone never makes a commit lose to a kill; a slow
write does (the commit is not in the file until the delay is over).

Python's `_sqlite3` links the system's libsqlite3 dynamically and SQLite's unix VFS
calls libc's pwrite/fsync/fdatasync through the dynamic linker, so a `celld run` started
this way waits in every commit of its SQLite store (WAL: the commit's frames are
pwritten to the -wal file, then with synchronous=FULL the file is flushed).
`calls_slowed` reads the shim's own count, so a test can check that the shim really
was in the path rather than trust it. `python -m tests.slowdisk.measure` shows the
commit time with and without it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "slowdisk.c"


class CannotBuild(Exception):  # noqa: N818 - the machine lacks what it takes
    pass


def build(folder: Path) -> Path:
    """Compile the shim into `folder` (once per source version) and return the .so."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise CannotBuild("the slow-disk shim needs a C compiler (gcc or cc) on PATH")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    library = folder / f"slowdisk-{digest}.so"
    if library.exists():
        return library
    partial = folder / f".slowdisk-{digest}.so.partial"
    done = subprocess.run(
        [compiler, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(partial),
         str(SOURCE), "-ldl"],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise CannotBuild(f"{compiler} could not build {SOURCE.name}:\n{done.stderr}")
    partial.replace(library)
    return library


def env(
    library: Path,
    under: Path,
    *,
    write_ms: int = 0,
    sync_ms: int = 0,
    count_file: Path | None = None,
) -> dict[str, str]:
    """The environment that slows the commits to every file under `under` (created if
    missing) of a process started with it; `count_file` gets the count of slowed calls."""
    under.mkdir(parents=True, exist_ok=True)
    variables = {
        "LD_PRELOAD": str(library),
        "CELLD_SLOWDISK_UNDER": str(under.resolve()),
        "CELLD_SLOWDISK_WRITE_MS": str(write_ms),
        "CELLD_SLOWDISK_SYNC_MS": str(sync_ms),
    }
    if count_file is not None:
        variables["CELLD_SLOWDISK_COUNT_FILE"] = str(count_file)
    return variables


def calls_slowed(count_file: Path) -> int:
    """How many writes and flushes the shim slowed in the process that writes
    `count_file` (0 if none: the file is written at the first one)."""
    try:
        return int(count_file.read_text().strip() or 0)
    except FileNotFoundError:
        return 0
