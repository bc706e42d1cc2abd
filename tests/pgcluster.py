"""A throwaway PostgreSQL cluster for tests: initdb into a temporary folder, loopback only.

PostgreSQL refuses to run as root, so when the tests run as root the cluster belongs to
an unprivileged system user (`celld-pg`, created if missing) and its commands run through
`runuser`. The binaries are Debian's (`/usr/lib/postgresql/15/bin`, or `CELLD_PG_BIN`).

`.ci/run` starts one for the whole suite and exports its DSN as CELLD_TEST_POSTGRES:

    python -m tests.pgcluster start DIR   # prints the DSN
    python -m tests.pgcluster stop DIR

Tests that need PostgreSQL use CELLD_TEST_POSTGRES when set, else start a cluster of their
own (see tests/postgres_fixtures.py), else skip; in CI (CI=true) they fail instead.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.celld_server import free_port

PG_BIN = Path(os.environ.get("CELLD_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_USER = "celld-pg"
DB_USER = "celld"


def available() -> str | None:
    """None if a cluster can be started here, else why not."""
    if not (PG_BIN / "initdb").exists():
        return f"PostgreSQL 15 is not installed ({PG_BIN}/initdb is missing)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without `runuser` to start PostgreSQL as another user"
    return None


def _as_owner() -> list[str]:
    """Command prefix that runs as the cluster's owner (an unprivileged user under root)."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            check=True,
        )
    return ["runuser", "-u", PG_USER, "--"]


def start(folder: Path, *, durable: bool = False) -> str:
    """initdb and start a cluster under `folder` (created); returns its DSN. `durable`:
    fsync as a production server does (benchmarks); tests do without."""
    folder.mkdir(parents=True, exist_ok=True)
    prefix = _as_owner()
    if prefix:
        shutil.chown(folder, PG_USER)
    data = folder / "data"
    run = lambda *command: subprocess.run(  # noqa: E731
        [*prefix, *command], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    run(
        str(PG_BIN / "initdb"), "-D", str(data), "-U", DB_USER, "-A", "trust",
        "--no-sync", "--locale=C", "-E", "UTF8",
    )  # fmt: skip
    port = free_port()
    settings = {
        "listen_addresses": "'127.0.0.1'",
        "port": str(port),
        "unix_socket_directories": f"'{folder}'",
        # A throwaway cluster: a crash of the machine itself is not under test (no fsync),
        # a crash of the server is (commits reach the OS before they are acknowledged).
        "fsync": "on" if durable else "off",
        "full_page_writes": "on" if durable else "off",
        "max_connections": "200",
    }
    with open(data / "postgresql.conf", "a") as conf:
        conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
    _pg_ctl(folder, "start")
    (folder / "dsn").write_text(dsn := f"postgresql://{DB_USER}@127.0.0.1:{port}/postgres")
    return dsn


def _pg_ctl(folder: Path, *args: str, check: bool = True) -> None:
    subprocess.run(
        [*_as_owner(), str(PG_BIN / "pg_ctl"), "-D", str(folder / "data"),
         "-l", str(folder / "server.log"), "-w", "-t", "60", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=check,
    )  # fmt: skip


def stop(folder: Path, mode: str = "fast") -> None:
    """Stop the cluster; "immediate" is what a crash of the server looks like."""
    if (folder / "data" / "postmaster.pid").exists():
        _pg_ctl(folder, "-m", mode, "stop", check=False)


def restart(folder: Path) -> None:
    """Stop (immediately, as a crash would) and start the cluster again on its port."""
    stop(folder, "immediate")
    _pg_ctl(folder, "start")


def new_folder() -> Path:
    """A folder the cluster's owner can reach (pytest's own temp folders are root-only)."""
    return Path(tempfile.mkdtemp(prefix="celld-pg-"))


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.pgcluster start|stop DIR", file=sys.stderr)
        return 2
    folder = Path(argv[1])
    if argv[0] == "start":
        why = available()
        if why:
            print(why, file=sys.stderr)
            return 1
        try:
            print(start(folder))
        except subprocess.CalledProcessError as error:
            print(f"{error}\n{(error.stderr or b'').decode()}", file=sys.stderr)
            log = folder / "server.log"
            if log.exists():
                print(log.read_text(errors="replace"), file=sys.stderr)
            return 1
    else:
        stop(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
