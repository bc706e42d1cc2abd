"""Start a real `celld run` on a free port and talk HTTP to it (end-to-end tests)."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class CelldServer:
    """A `celld run` subprocess; `kill()` is a SIGKILL, `stop()` a clean shutdown.

    One process unless asked: `--workers 1` is added when `args` give no `--workers`, so
    the suite does not start one process per core for every test; `workers=None` leaves
    it to celld (its default), `workers=N` asks for N."""

    def __init__(
        self,
        project: Path,
        state: Path,
        *,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        manual_clock: bool | int = False,
        open_files: int | None = None,
        workers: int | None = 1,
    ) -> None:
        self.project = project
        self.state = state
        self.env = dict(env or {})
        if manual_clock is True:
            self.env["CELLD_TEST_CLOCK"] = "manual"
        elif manual_clock:
            self.env["CELLD_TEST_CLOCK"] = f"manual:{manual_clock}"  # start at this epoch ms
        pinned = workers is not None and "--workers" not in args
        self.args = (*args, "--workers", str(workers)) if pinned else args
        #: the subprocess's limit on open files, soft and hard (None: inherited)
        self.open_files = open_files
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = state.parent / f"{state.name}-celld.log"
        self.client: httpx.Client | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> CelldServer:
        self.port = free_port()
        env = {**os.environ, **self.env}
        command = [
            sys.executable, "-m", "celld", "run", str(self.project),
            "--port", str(self.port), "--persist-to", str(self.state), *self.args,
        ]  # fmt: skip
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the subprocess
        limit = self.open_files
        self.process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=None
            if limit is None
            else lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),
        )
        self.client = httpx.Client(base_url=self.url, timeout=30)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celld exited early:\n{self.log()}")
            try:
                if self.client.get("/cdn-cgi/celld/health").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"celld did not start in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self._close_client()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._close_client()

    def _close_client(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    # -- helpers -------------------------------------------------------------------------

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        assert self.client is not None
        return self.client.get(path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        assert self.client is not None
        return self.client.post(path, **kwargs)

    def advance(self, ms: int) -> int:
        """Move the server's manual clock forward."""
        response = self.post("/cdn-cgi/celld/clock", params={"advance": ms})
        response.raise_for_status()
        return int(response.json()["now"])

    def describe(self, workflow: str, instance_id: str) -> dict[str, Any]:
        """celld's operator view of an instance (steps, attempts, deadlines)."""
        response = self.get(f"/cdn-cgi/celld/workflows/{workflow}/instances/{instance_id}")
        response.raise_for_status()
        return dict(response.json())

    def step(self, workflow: str, instance_id: str, name: str, count: int = 1) -> dict[str, Any]:
        """One step row of an instance ({} until the step is first reached)."""
        for row in self.describe(workflow, instance_id)["steps"]:
            if row["name"] == name and row["count"] == count:
                return dict(row)
        return {}

    def clock_now(self) -> int:
        return int(self.get("/cdn-cgi/celld/clock").json()["now"])

    def wait_for(self, predicate: Any, timeout: float = 20, interval: float = 0.02) -> Any:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(
            f"condition not met in {timeout}s (last: {last!r})\n{self.log()[-4000:]}"
        )
