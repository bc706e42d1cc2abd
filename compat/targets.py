"""The servers a scenario runs against, behind one small HTTP-level interface.

A *target* is a running Worker (``compat/projects/core``) reached by its base URL:

* ``celld``: a ``celld run`` subprocess with the manual test clock, so a scenario's
  ``wait(ms)`` moves the engine clock at once instead of sleeping;
* ``wrangler``: ``wrangler dev`` (Cloudflare's local engine on workerd), started by
  bench/wrangler/start.sh from tests/wrangler's ``npm ci`` install (wrangler and Node 22 at
  the versions its lockfile pins); ``wait(ms)`` sleeps real time there.

The scenario code is the same for both; only :meth:`Target.wait` and :meth:`Target.idle`
differ, because only celld's clock can be moved.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
PROJECTS = REPO / "compat" / "projects"
CORE = PROJECTS / "core"
#: A TypeScript Worker with npm dependencies (installed by `npm ci` from its lockfile).
NPM_APP = PROJECTS / "npm-app"
#: Web Crypto, node:crypto and the jose package (installed by `npm ci` from its lockfile).
CRYPTO = PROJECTS / "crypto"
#: Node's built-in modules under nodejs_compat, one route each.
NODE = PROJECTS / "node"
#: Durable Objects (key-value, SQL, alarms, RPC) beside a Workflow that calls them.
OBJECTS = PROJECTS / "objects"
#: Two Workers in one session: "front" (served) calls "back" through its bindings.
WORKERS = PROJECTS / "workers"
#: WebSockets (a Worker's own pair, a hibernating Durable Object) and a queue's consumer.
REALTIME = PROJECTS / "realtime"
#: An assets-only Worker (no `main`) with a 404 page.
STATIC = PROJECTS / "static"

#: Statuses in which an instance is doing work right now (its state may still change without
#: any outside help and without time passing).
BUSY = frozenset({"queued", "running", "waitingForPause"})
FINAL = frozenset({"complete", "errored", "terminated"})


class Target:
    """A running Worker under test, reached over HTTP."""

    name = "?"
    #: How long (real seconds) a poll waits for an expected status before failing.
    poll_timeout = 15.0

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.client = httpx.Client(base_url=base_url, timeout=60)

    def close(self) -> None:
        self.client.close()

    # -- time ------------------------------------------------------------------------------

    def wait(self, ms: int, *, settled: bool = True) -> None:
        """Let `ms` of workflow time pass (`settled`: the caller made sure nothing is busy)."""
        raise NotImplementedError

    def idle(self, ids: Iterable[str], wf: str = "SCRIPT", limit: float = 3.0) -> None:
        """Return once none of `ids` is doing work (where the target can tell)."""

    # -- HTTP --------------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.request(method, path, **kwargs)


class CelldTarget(Target):
    """celld with a manual clock: time moves only when a scenario waits."""

    name = "celld"
    poll_timeout = 10.0
    #: Real time for woken work to begin after the clock moved (alarm task, wake, commit).
    settle_s = 0.08

    def __init__(self, base_url: str, server: Any = None) -> None:
        super().__init__(base_url)
        self.server = server
        clock = self.client.get("/cdn-cgi/celld/clock")
        if clock.status_code != 200:
            raise RuntimeError(
                f"{base_url} has no manual clock: start celld with CELLD_TEST_CLOCK=manual"
            )

    def now(self) -> int:
        return int(self.client.get("/cdn-cgi/celld/clock").json()["now"])

    def idle(self, ids: Iterable[str], wf: str = "SCRIPT", limit: float = 3.0) -> None:
        ids = list(ids)
        if not ids:
            return
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            statuses = self.client.post("/statuses", params={"wf": wf}, json=ids).json()
            if all(s.get("status") not in BUSY for s in statuses.values()):
                return
            time.sleep(0.02)

    def wait(self, ms: int, *, settled: bool = True) -> None:
        if not settled:
            # the instance may still be on its way to the call whose timer this wait must
            # pass; without a status that tells, give it a moment of real time
            time.sleep(0.3)
        response = self.client.post("/cdn-cgi/celld/clock", params={"advance": int(ms)})
        response.raise_for_status()
        time.sleep(self.settle_s)

    def close(self) -> None:
        super().close()
        if self.server is not None:
            self.server.stop()


class WranglerTarget(Target):
    """`wrangler dev`: real time, so waits sleep."""

    name = "wrangler"
    poll_timeout = 20.0

    def __init__(self, base_url: str, stop: Any = None, pid: int | None = None) -> None:
        super().__init__(base_url)
        self._stop = stop
        #: wrangler's pid (also its process group's id) when started here
        self.pid = pid

    def wait(self, ms: int, *, settled: bool = True) -> None:
        time.sleep(ms / 1000)

    def close(self) -> None:
        super().close()
        if self._stop is not None:
            self._stop()


# -- starting servers --------------------------------------------------------------------------


def ensure_node_modules(project: Path) -> None:
    """`npm ci` the project unless its node_modules already matches its lockfile."""
    marker = project / "node_modules" / ".package-lock.json"
    lock = project / "package-lock.json"
    if marker.is_file() and marker.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm is not installed; run `npm ci` in {project} first")
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"],
        cwd=project,
        check=True,
        capture_output=True,
        timeout=600,
    )


def start_celld(state_dir: Path, project: Path = CORE, args: tuple[str, ...] = ()) -> CelldTarget:
    """Start `celld run` on `project` (default compat/projects/core) with the manual clock;
    `args` go on its command line (`-c` config files, `--env`, `--var`)."""
    from tests.celld_server import CelldServer

    server = CelldServer(project, state_dir, manual_clock=True, args=args).start(timeout=90)
    return CelldTarget(server.url, server)


#: start.sh and stop.sh: wrangler dev for a Worker folder, from tests/wrangler's install
WRANGLER_SCRIPTS = REPO / "bench" / "wrangler"


def _script(name: str, env: dict[str, str], *args: str, timeout: float) -> str:
    """Run bench/wrangler/NAME with `args`; its stdout, or an error with its stderr."""
    done = subprocess.run(
        ["bash", str(WRANGLER_SCRIPTS / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        said = done.stderr
        if len(said) > 8000:
            # the error comes first; what a dying esbuild dumps after it can be long
            said = f"{said[:4000]}\n[... {len(said) - 8000} characters ...]\n{said[-4000:]}"
        raise RuntimeError(f"bench/wrangler/{name} {' '.join(args)} failed:\n{said}")
    return done.stdout


def start_wrangler(
    state_dir: Path, project: Path = CORE, args: tuple[str, ...] = ()
) -> WranglerTarget:
    """Start `wrangler dev` on `project` with `args`, its state in `state_dir` and its pid
    file, log and home beside it (nothing is written outside the session's temporary
    folder)."""
    from tests.celld_server import free_port

    port = str(free_port())
    run_dir = state_dir.parent / "wrangler-dev"
    env = {**os.environ, "WRANGLER_DEV_DIR": str(run_dir), "FRESH": "1", "LOG_LEVEL": "warn"}
    if state_dir.exists():
        shutil.rmtree(state_dir)
    started = _script("start.sh", env, str(project), port, str(state_dir), "--", *args, timeout=600)
    return WranglerTarget(
        f"http://127.0.0.1:{port}",
        lambda: _script("stop.sh", env, port, timeout=60),
        int(started.split()[-1]),
    )


def refused_start(kind: str, state_dir: Path, project: Path, args: tuple[str, ...] = ()) -> str:
    """Start the `kind` of target on `project` when it must refuse to start; what it said
    (AssertionError if it started)."""
    start = start_celld if kind == "celld" else start_wrangler
    try:
        target = start(state_dir, project, args)
    except RuntimeError as error:
        return str(error)
    target.close()
    raise AssertionError(f"{kind} started {project} with {args}; it must refuse")


def connect(
    kind: str,
    state_dir: Path,
    project: Path = CORE,
    url_variable: str = "",
    args: tuple[str, ...] = (),
) -> Target:
    """The target named by CELLD_COMPAT_TARGET, serving `project` (started here with `args`
    unless `url_variable`, CELLD_COMPAT_URL for the core project, names a running server)."""
    url = os.environ.get(url_variable or "CELLD_COMPAT_URL")
    if kind == "celld":
        return CelldTarget(url) if url else start_celld(state_dir, project, args)
    if kind == "wrangler":
        return WranglerTarget(url) if url else start_wrangler(state_dir, project, args)
    raise RuntimeError(f"CELLD_COMPAT_TARGET must be celld or wrangler, not {kind!r}")
