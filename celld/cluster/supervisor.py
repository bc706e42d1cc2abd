"""The parent of a `--workers N` cluster: owns the listening socket, starts the children,
starts again any that dies, and stops them all on SIGTERM or Ctrl-C.

The parent binds and listens, and each child accepts on that same socket (inherited, not
re-bound): connections arriving while a child restarts wait in the socket's queue for
another child instead of being refused, and `--port 0` gives one port for all. The
parent runs no JS and holds no state; it says "serving ... on URL" once every child
listens, and logs each child's process id as it starts it (`kill -9` one to watch it
come back).
"""

from __future__ import annotations

import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from celld.cluster.member import (
    ENV_DIR,
    ENV_INDEX,
    ENV_READY_FD,
    ENV_SIZE,
    ENV_SOCKET_FD,
)

log = logging.getLogger("celld")

#: A child that exits before it listens this many times in a row is not started again:
#: something stops it from starting at all (its log says what), and celld exits.
MAX_FAILED_STARTS = 3


@dataclass
class Child:
    index: int
    process: subprocess.Popen[bytes]
    ready_read: int
    ready: bool = False
    failed_starts: int = 0


@dataclass
class Supervisor:
    sock: socket.socket
    size: int
    backlog: int
    grace: float
    announce: Callable[[], None]
    #: set in every child's environment besides the cluster's own variables
    env: dict[str, str]
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="celld-cluster-")))
    children: dict[int, Child] = field(default_factory=dict)
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    stopping: str | None = None
    announced: bool = False

    def run(self) -> int:
        """Serve until a signal stops celld; the exit status."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        self.sock.listen(self.backlog)
        try:
            for index in range(self.size):
                self._start(index)
            return self._watch()
        finally:
            self._stop_all()
            shutil.rmtree(self.folder, ignore_errors=True)

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        if self.stopping is None:
            self.stopping = signal.Signals(sig).name
            log.info("stopping (%s): every process gets up to %gs", self.stopping, self.grace)

    def _start(self, index: int, failed_starts: int = 0) -> None:
        ready_read, ready_write = os.pipe()
        env = {
            **os.environ,
            **self.env,
            ENV_INDEX: str(index),
            ENV_SIZE: str(self.size),
            ENV_DIR: str(self.folder),
            ENV_SOCKET_FD: str(self.sock.fileno()),
            ENV_READY_FD: str(ready_write),
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "celld", *sys.argv[1:]],
            env=env,
            pass_fds=(self.sock.fileno(), ready_write),
            stdin=subprocess.DEVNULL,
        )
        os.close(ready_write)
        child = Child(index, process, ready_read, failed_starts=failed_starts)
        self.children[index] = child
        self.selector.register(ready_read, selectors.EVENT_READ, child)
        log.info("process %d started (pid %d)", index, process.pid)

    def _watch(self) -> int:
        while self.stopping is None:
            for key, _ in self.selector.select(timeout=0.1):
                child: Child = key.data
                if os.read(child.ready_read, 64):
                    child.ready, child.failed_starts = True, 0
            if not self.announced and all(c.ready for c in self.children.values()):
                self.announced = True
                self.announce()
            for child in list(self.children.values()):
                code = child.process.poll()
                if code is None or self.stopping is not None:
                    continue
                self._forget(child)
                failed = 0 if child.ready else child.failed_starts + 1
                if failed >= MAX_FAILED_STARTS:
                    log.error(
                        "process %d exited (status %s) %d times before it could serve: celld stops",
                        child.index,
                        code,
                        failed,
                    )
                    return 1
                log.warning("process %d exited (status %s): starting it again", child.index, code)
                if failed:
                    time.sleep(min(0.25 * 2**failed, 5.0))
                self._start(child.index, failed)
        return 0

    def _forget(self, child: Child) -> None:
        self.selector.unregister(child.ready_read)
        os.close(child.ready_read)

    def _stop_all(self) -> None:
        alive = [c for c in self.children.values() if c.process.poll() is None]
        for child in alive:
            child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace + 15
        for child in alive:
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("process %d did not stop in time: killed", child.index)
                child.process.kill()
                child.process.wait()
        if self.stopping is not None:
            log.info("stopped")
