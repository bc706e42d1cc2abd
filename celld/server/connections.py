"""Connections that have no request in flight: a cheap state with a limit of its own.

A connection counts against `--max-connections` only while it has a request whose headers
were read (celld/server/admission.py). Before that, new or still sending its headers, and
between two requests of a kept-alive connection, it is *idle*: it costs its socket and a
few KiB, never a request slot. Idle connections are kept here in the order they became
idle, and two rules keep them from costing service:

* A connection waiting for request headers has `header_timeout` seconds in all to send
  them, counted from the connection's start (or from the first byte of a kept-alive
  connection's next request); bytes arriving do not extend it. Deadlines fall in the
  order connections started waiting, so one event-loop timer, set for the first, serves
  them all.
* When a connection arrives and `max_idle` connections are idle already, or the open
  connections would pass `max_open` (what the process's file-descriptor limit allows),
  the oldest idle connection is closed to make room: thousands of silent sockets cannot
  keep a new client from being accepted and served (`connection_budget`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Protocol

log = logging.getLogger("celld.server")

#: Default for `--max-idle-connections`.
MAX_IDLE_CONNECTIONS = 10_000
#: File descriptors left for everything but client connections (state files, the
#: Worker's own fetches, the threads' pipes) when the process's limit bounds connections.
FD_RESERVE = 256
#: Connections the kernel queues, and the event loop accepts at a time (uvicorn's default),
#: when the open-files limit is high enough.
LISTEN_BACKLOG = 2048
#: At most one log line a minute for each kind of connection closed here.
LOG_EVERY_S = 60.0


class IdleCapable(Protocol):
    """What the registry needs of a connection: a way to close it."""

    def close_idle(self) -> None: ...


def raise_open_files_limit() -> int | None:
    """Raise this process's soft limit on open files to its hard limit (servers need one
    descriptor per connection; the common default soft limit of 1,024 is a desktop's).
    Returns the limit now in force (None: unlimited)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as error:
            log.warning("could not raise the open-files limit from %s to %s: %s", soft, hard, error)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def connection_budget(open_files: int | None) -> tuple[int | None, int]:
    """(client connections the open-files limit leaves room for, listen backlog).

    The event loop accepts up to `backlog` connections in one go before any of them is
    seen here, so the budget leaves room for one such batch besides FD_RESERVE; a low
    limit gets a smaller batch (and listen queue) to keep the budget useful."""
    if open_files is None:
        return None, LISTEN_BACKLOG
    backlog = min(LISTEN_BACKLOG, max(64, open_files // 8))
    return max(64, open_files - FD_RESERVE - backlog), backlog


class _Tally:
    """Counts closes of one kind and logs them at most once every LOG_EVERY_S."""

    def __init__(self, level: int, message: str) -> None:
        self.level = level
        self.message = message
        self.total = 0
        self._unlogged = 0
        self._logged_at = float("-inf")

    def add(self, *args: object) -> None:
        self.total += 1
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            log.log(self.level, self.message, self._unlogged, *args)
            self._unlogged = 0
            self._logged_at = now


class IdleConnections:
    """The idle connections of one server (see the module docstring)."""

    def __init__(
        self,
        header_timeout: float,
        max_idle: int = MAX_IDLE_CONNECTIONS,
        max_open: int | None = None,
    ) -> None:
        self.header_timeout = header_timeout
        self.max_idle = max_idle
        self.max_open = max_open
        self._open: set[IdleCapable] = set()
        #: idle connections, oldest first (dicts keep insertion order)
        self._idle: dict[IdleCapable, None] = {}
        #: connections waiting for request headers -> deadline (loop time), earliest first
        self._deadlines: dict[IdleCapable, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.shed = _Tally(
            logging.WARNING,
            "closed %d idle connection(s) to make room for new ones: %d idle "
            "(--max-idle-connections %d), %d open (the open-files limit allows %s)",
        )
        # slow clients are ordinary; a note now and then is enough
        self.late = _Tally(
            logging.INFO,
            "closed %d connection(s) that sent no complete request headers in %g s "
            "(--header-timeout)",
        )

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def open(self) -> int:
        return len(self._open)

    # -- what a connection tells the registry ----------------------------------------------

    def opened(self, connection: IdleCapable) -> None:
        """A new connection: idle, and waiting for its first request's headers."""
        self._make_room()
        self._open.add(connection)
        self._idle[connection] = None
        self._await_headers(connection)

    def request_begun(self, connection: IdleCapable) -> None:
        """The first byte of a request: its headers are due within the deadline (already
        running for a new connection's first request)."""
        if connection in self._open and connection not in self._deadlines:
            self._await_headers(connection)

    def headers_read(self, connection: IdleCapable) -> None:
        """A complete request: the connection is busy, no longer idle."""
        self._idle.pop(connection, None)
        self._deadlines.pop(connection, None)

    def idle_again(self, connection: IdleCapable) -> None:
        """The connection's last request is answered and it is kept alive."""
        if connection in self._open:
            self._idle.pop(connection, None)
            self._idle[connection] = None

    def closed(self, connection: IdleCapable) -> None:
        self._open.discard(connection)
        self._idle.pop(connection, None)
        self._deadlines.pop(connection, None)

    # -- the rules -------------------------------------------------------------------------

    def _make_room(self) -> None:
        """Before a new connection is counted: shed the oldest idle ones past a limit."""
        while self._idle and (
            len(self._idle) >= self.max_idle
            or (self.max_open is not None and len(self._open) >= self.max_open)
        ):
            oldest = next(iter(self._idle))
            self._drop(oldest)
            self.shed.add(len(self._idle), self.max_idle, len(self._open), self.max_open)

    def _drop(self, connection: IdleCapable) -> None:
        self.closed(connection)
        try:
            connection.close_idle()
        except Exception:  # noqa: BLE001 - one connection failing to close must not stop the rest
            log.exception("closing an idle connection failed")

    def _await_headers(self, connection: IdleCapable) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.header_timeout
        self._deadlines[connection] = deadline
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Close every connection past its header deadline; set the timer for the next."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._deadlines:
            connection, deadline = next(iter(self._deadlines.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire)
                return
            self._drop(connection)
            self.late.add(self.header_timeout)
