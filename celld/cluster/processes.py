"""The few calls `celld run` makes for `--workers N` (kept here, so its code stays short).

In the parent (no cluster environment), `settle` decides N and refuses what N > 1 cannot
serve, and `supervise` runs the children. In a child, `member` is its place in the
cluster, which the other calls read.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.types import ASGIApp

from celld.cells.clock import ManualClock
from celld.cluster.default import default_workers
from celld.cluster.member import CLOCK_FILE, Member
from celld.cluster.placement import settle_workers
from celld.cluster.supervisor import Supervisor

if TYPE_CHECKING:
    from celld.server.service import ServiceOptions

log = logging.getLogger("celld")


def member() -> Member | None:
    return Member.from_environment()


def clock_start(member: Member | None, configured: str) -> int | None:
    """Where the manual test clock starts: the cluster's time for a child, else the
    time CELLD_TEST_CLOCK names (None: now)."""
    if member is not None:
        start = member.clock_start()
        if start is not None:
            return start
    return int(configured) if configured else None


def settle(
    member: Member | None,
    options: ServiceOptions,
    asked: int | None,
    others: Sequence[Path] = (),
) -> int:
    """The number of processes (ValueError for what cannot be served with it): `asked`
    (--workers), else celld.cluster.default's choice for the session's state folders (its
    reason logged); every Worker's folder is sharded over the same number (refused if one
    still holds instances over another)."""
    if member is not None:
        options.cluster = member
        return member.size
    if asked is None:
        default = default_workers([options.persist_to, *others], options.store)
        if default.said:
            log.info("%s", default.said)
        asked = default.count
    workers = settle_workers(options.persist_to, asked)
    for folder in others:
        settle_workers(folder, workers)
    if workers > 1 and options.store not in (None, "", "sqlite"):
        raise ValueError(
            f"--workers {workers} shards workflow instances over SQLite stores; with "
            "--store postgresql run several `celld run` nodes on the database instead"
        )
    return workers


def inherited_socket(member: Member) -> socket.socket:
    """The listening socket the parent bound and passed down."""
    return socket.socket(fileno=member.socket_fd)


def wrap(member: Member | None, app: ASGIApp) -> ASGIApp:
    return app if member is None else member.wrap(app)


def supervise(
    sock: socket.socket,
    workers: int,
    backlog: int,
    grace: float,
    announce: Callable[[], None],
    options: ServiceOptions,
) -> int:
    # One operator token for every process (each would otherwise make up its own).
    token = {"CELLD_ADMIN_TOKEN": options.operator_token} if options.operator_token else {}
    supervisor = Supervisor(sock, workers, backlog, grace, announce, env=token)
    if isinstance(options.clock, ManualClock):
        (supervisor.folder / CLOCK_FILE).write_text(str(options.clock.now()))
    return supervisor.run()
