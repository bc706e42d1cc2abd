"""Run `celld run` as a user does (any flags, no port forced) and read what it prints.

`tests.celld_server.CelldServer` always passes `--port`; the dev-server tests need to
see the port come from `[dev]`, a port already taken refused, and every log line, so
this starts the process with exactly the arguments given and waits on its log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

READY = re.compile(r"serving \S+ on (https?://[^\s\"]+)")


class CelldRun:
    """One `celld run PROJECT ARGS...` process, its stderr in a file.

    One process unless asked: `--workers 1` is added when ARGS give no `--workers`, so the
    suite does not start one process per core for every test; `workers=None` leaves it to
    celld (its default), `workers=N` asks for N."""

    def __init__(
        self,
        project: Path,
        state: Path,
        *args: str,
        env: dict[str, str] | None = None,
        workers: int | None = 1,
    ) -> None:
        self.log_path = state.parent / f"{state.name}-run.log"
        command = [sys.executable, "-m", "celld", "run", str(project), "--persist-to", str(state)]
        if workers is not None and "--workers" not in args:
            command += ["--workers", str(workers)]
        handle = open(self.log_path, "wb")  # noqa: SIM115 - owned by the subprocess
        self.process = subprocess.Popen(
            [*command, *args],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        handle.close()
        self.url = ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The first match of `pattern` in the log, once it is there; fails if celld exits
        or `timeout` passes first."""
        compiled = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            found = compiled.search(self.log())
            if found:
                return found
            if self.process.poll() is not None:
                found = compiled.search(self.log())
                if found:
                    return found
                raise AssertionError(f"celld exited ({self.process.returncode}):\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not logged in {timeout}s:\n{self.log()}")
            time.sleep(0.05)

    def ready(self, timeout: float = 60) -> str:
        """The URL of the "serving ... on URL" line, once it is logged."""
        self.url = self.wait_for(READY.pattern, timeout).group(1)
        return self.url

    def exit_code(self, timeout: float = 60) -> int:
        return self.process.wait(timeout)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then its exit code (SIGKILL of its group if it does not stop)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        return self.process.returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
