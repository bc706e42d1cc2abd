"""Small real disks for fault tests: a tmpfs of a few MiB, filled and freed at will."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class CannotMount(Exception):  # noqa: N818 - the machine does not allow it
    pass


@contextmanager
def small_disk(where: Path, size_mb: int = 48) -> Iterator[Path]:
    """A tmpfs of `size_mb` MiB mounted at `where` (needs the right to mount)."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise CannotMount(done.stderr.decode(errors="replace").strip() or "mount failed")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write zeros until the disk is full; returns the file to delete to free it."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 512):
            chunk = b"\0" * size
            try:
                while True:
                    os.write(descriptor, chunk)
            except OSError:
                continue
    finally:
        os.close(descriptor)
    return filler
