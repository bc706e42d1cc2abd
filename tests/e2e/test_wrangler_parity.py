"""wrangler's own CLI prints the same against celld as against `wrangler dev`, for every
`wrangler workflows` command, text and --json alike.

Both servers run the same project (tests/projects/parity) on real clocks; each command
runs against both at once and the two outputs are compared after only what must differ
is set aside: times and durations (the two runs are seconds apart) and the declared
differences of compat/differences.py that show here (celld's `waiting` status, which
`wrangler dev` calls `running`; `wrangler dev` accepts events for finished instances).

wrangler, Node 22 and workerd come from npm (tests/wrangler, `npm ci`, as `.ci/run`
does). Without them the test is skipped locally and fails in CI.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.celld_server import CelldServer, free_port
from tests.e2e.conftest import PROJECTS, REPO

WRANGLER_DIR = REPO / "tests" / "wrangler"
MODULES = WRANGLER_DIR / "node_modules"
NODE = MODULES / "node" / "bin" / "node"
WRANGLER = MODULES / "wrangler" / "bin" / "wrangler.js"
EXPLORER = "/cdn-cgi/local/explorer/api/workflows"

if not (NODE.exists() and WRANGLER.exists()):
    if os.environ.get("CI"):
        raise RuntimeError(f"wrangler is not installed: run `npm ci` in {WRANGLER_DIR}")
    pytest.skip(
        f"wrangler is not installed: run `npm ci` in {WRANGLER_DIR}", allow_module_level=True
    )


def node_env(home: Path) -> dict[str, str]:
    """Offline, colourless, with a home of its own (as tests/e2e/test_wrangler_cli.py)."""
    return {
        "PATH": f"{NODE.parent}:{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "WRANGLER_SEND_METRICS": "false",
        "WRANGLER_SEND_ERROR_REPORTS": "false",
        "DO_NOT_TRACK": "1",
        "CLOUDFLARE_CF_FETCH_ENABLED": "false",
        "CI": "true",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "TZ": "UTC",
        "WRANGLER_LOG_PATH": str(home / "logs"),
    }


@dataclass
class Target:
    name: str
    url: str

    @property
    def port(self) -> str:
        return self.url.rsplit(":", 1)[1]

    def explorer(self, path: str) -> Any:
        answer = httpx.get(f"{self.url}{EXPLORER}{path}", timeout=30)
        return answer.json()["result"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity-home")


@pytest.fixture(scope="module")
def wrangler_dev(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[Target]:
    # a copy: wrangler dev writes .wrangler/ into the project folder
    project = tmp_path_factory.mktemp("parity-wrangler") / "project"
    shutil.copytree(PROJECTS / "parity", project)
    port = free_port()
    log = open(project.parent / "wrangler-dev.log", "wb")  # noqa: SIM115 - the child's
    command = [
        str(NODE), str(WRANGLER), "dev", "--local", "--ip", "127.0.0.1", "--port", str(port),
        "--persist-to", str(project.parent / "state"), "--show-interactive-dev-session=false",
        "--log-level", "warn",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=project, env=node_env(home), stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(url, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                text = (project.parent / "wrangler-dev.log").read_text(errors="replace")
                raise RuntimeError(f"wrangler dev did not start:\n{text[-4000:]}")
            time.sleep(0.3)
        yield Target("wrangler dev", url)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        log.close()


@pytest.fixture(scope="module")
def celld(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp("parity-celld")
    server = CelldServer(PROJECTS / "parity", root / "state").start(timeout=60)
    yield Target("celld", server.url)
    server.stop()


def wrangler(target: Target, home: Path, *args: str) -> str:
    """`wrangler workflows ARGS --local --port P` against `target`: exit code, then output."""
    command = [str(NODE), str(WRANGLER), "workflows", *args, "--local", "--port", target.port]
    done = subprocess.run(
        command, cwd=home, env=node_env(home), capture_output=True, text=True, timeout=180,
        check=False,
    )  # fmt: skip
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


DATE = re.compile(r"\d{1,2}/\d{1,2}/\d{4}, \d{1,2}:\d{2}:\d{2}\s?[AP]M")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
DURATION = re.compile(r"\b\d+ (second|minute|hour|day|month|year)s?\b")
BORDER = set("┌┬┐├┼┤└┴┘─ ")


def normalize(text: str) -> str:
    """What must be equal: times and durations set aside, tables cell by cell, label
    padding and wrangler's log-file line dropped, and the declared `waiting` difference
    folded into `running`."""
    text = ISO.sub("<time>", DATE.sub("<date>", text))
    text = DURATION.sub("<duration>", text)
    text = text.replace("⏰ Waiting", "▶ Running").replace(
        '"status": "waiting"', '"status": "running"'
    )
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if "Logs were written to" in line:
            continue
        if stripped and set(stripped) <= BORDER:
            lines.append("<border>")
        elif "│" in line:
            lines.append(" | ".join(cell.strip() for cell in stripped.strip("│").split("│")))
        else:
            lines.append(re.sub(r"\s+", " ", line).rstrip())
    return _fold_counts("\n".join(lines).strip())


def _fold_counts(text: str) -> str:
    """Per-status counts: celld's `waiting` instances are `wrangler dev`'s `running`."""
    text_form = re.search(r"running: (\d+)", text), re.search(r"waiting: (\d+)", text)
    if all(text_form):
        running, waiting = (int(m.group(1)) for m in text_form)  # type: ignore[union-attr]
        text = text.replace(f"running: {running}", f"running: {running + waiting}")
        text = text.replace(f"waiting: {waiting}", "waiting: 0")
    json_form = re.search(r'"running": (\d+)', text), re.search(r'"waiting": (\d+)', text)
    if all(json_form):
        running, waiting = (int(m.group(1)) for m in json_form)  # type: ignore[union-attr]
        text = text.replace(f'"running": {running}', f'"running": {running + waiting}')
        text = text.replace(f'"waiting": {waiting}', '"waiting": 0')
    return text


class Both:
    """Runs each command against both servers at once and compares what wrangler prints."""

    def __init__(self, wrangler_dev: Target, celld: Target, home: Path) -> None:
        self.targets = (wrangler_dev, celld)
        self.home = home
        self.pool = ThreadPoolExecutor(8)
        self.compared: list[str] = []

    def same(self, *args: str) -> None:
        self.all_same([args])

    def all_same(self, commands: list[tuple[str, ...]]) -> None:
        """Run `commands` (which change nothing, so in any order) against both servers,
        many at once, and compare each."""
        runs = [
            self.pool.submit(wrangler, target, self.home, *args)
            for args in commands
            for target in self.targets
        ]
        for index, args in enumerate(commands):
            outputs = (runs[2 * index].result(), runs[2 * index + 1].result())
            self._compare(args, *outputs)

    def _compare(self, args: tuple[str, ...], *outputs: str) -> None:
        expected, actual = (normalize(o) for o in outputs)
        if expected != actual:
            diff = "\n".join(
                difflib.unified_diff(
                    expected.splitlines(), actual.splitlines(), "wrangler dev", "celld",
                    lineterm="",
                )
            )  # fmt: skip
            raise AssertionError(f"`wrangler workflows {' '.join(args)}` differs:\n{diff}")
        self.compared.append(args[0] if args[0] != "instances" else f"instances {args[1]}")

    def until(self, what: str, check: Callable[[Target], bool], timeout: float = 90) -> None:
        """Wait until `check` holds on both servers."""
        deadline = time.monotonic() + timeout
        pending = list(self.targets)
        while pending:
            pending = [t for t in pending if not check(t)]
            if pending and time.monotonic() > deadline:
                raise AssertionError(f"{pending[0].name}: not {what} after {timeout}s")
            time.sleep(0.2)


def status(workflow: str, instance: str) -> Callable[[Target], str]:
    return lambda t: str(t.explorer(f"/{workflow}/instances/{instance}")["status"])


def step_state(workflow: str, instance: str, name: str) -> Callable[[Target], dict[str, Any]]:
    def read(t: Target) -> dict[str, Any]:
        steps = t.explorer(f"/{workflow}/instances/{instance}")["steps"]
        return next((s for s in steps if s["name"] == name), {})

    return read


@pytest.mark.timeout(900)
def test_every_wrangler_workflows_command_prints_the_same(
    wrangler_dev: Target, celld: Target, home: Path
) -> None:
    """Commands in one `all_same` run at once: they read, or change different instances."""
    (home / "ids.json").write_text('["nope"]')  # for `instances delete --filename`
    both = Both(wrangler_dev, celld, home)
    both.all_same([
        ("list",),
        ("list", "--json"),
        ("list", "--per-page", "2"),
        ("list", "--page", "2", "--per-page", "2", "--json"),
        ("describe", "order"),
    ])  # fmt: skip
    both.all_same([
        ("trigger", "order", '{"order": 7}', "--id", "o1"),
        ("trigger", "broken", "--id", "b1", "--json"),
        ("trigger", "slow", "--id", "s1"),
    ])  # fmt: skip
    both.same("trigger", "slow", '{"busy": 600000}', "--id", "s2")  # after s1: lists by age

    # o1 waits for its approval (after a retried charge, a secret and a sleep), b1 has
    # failed, s1 waits an hour to retry, s2 runs a long step
    both.until("waiting for approval", lambda t: bool(step_state("order", "o1", "approval-1")(t)))
    both.until("errored", lambda t: status("broken", "b1")(t) == "errored")
    both.until("retrying", lambda t: bool(step_state("slow", "s1", "retry later-1")(t)))
    both.until("busy", lambda t: bool(step_state("slow", "s2", "busy-1")(t)))
    both.all_same([
        ("describe", "order"),
        ("describe", "slow", "--json"),
        ("instances", "list", "order"),
        ("instances", "list", "slow", "--json"),
        ("instances", "list", "broken", "--status", "errored"),
        ("instances", "list", "order", "--status", "complete"),
        ("instances", "list", "slow", "--reverse"),
        ("instances", "list", "slow", "--per-page", "1", "--page", "2"),
        ("instances", "list", "slow", "--per-page", "1", "--page", "3", "--json"),
        ("instances", "list", "order", "--date-start", "2000-01-01"),
        ("instances", "list", "order", "--date-end", "2000-01-01T00:00:00Z", "--json"),
        ("instances", "describe", "order", "o1"),
        ("instances", "describe", "order", "o1", "--json"),
        ("instances", "describe", "order", "o1", "--step-output=false"),
        ("instances", "describe", "order", "o1", "--truncate-output-limit", "3"),
        ("instances", "describe", "order", "latest"),
        ("instances", "describe", "broken", "b1"),
        ("instances", "describe", "broken", "b1", "--json"),
        ("instances", "describe", "slow", "s1"),
        ("instances", "describe", "slow", "s2"),
        ("instances", "describe", "order", "nope"),
        ("instances", "describe", "nope", "o1"),
        ("trigger", "order", "--id", "o1"),  # refused: the id is taken
        ("instances", "restart", "order", "o1", "--from-step-name", "nosuch"),  # refused
    ])  # fmt: skip

    both.all_same([
        ("instances", "pause", "order", "o1"),
        ("instances", "terminate", "slow", "s2", "--rollback"),
        ("instances", "restart", "broken", "b1"),
    ])  # fmt: skip
    both.until("paused", lambda t: status("order", "o1")(t) == "paused")
    both.until("terminated", lambda t: status("slow", "s2")(t) == "terminated")
    both.until("errored again", lambda t: status("broken", "b1")(t) == "errored")
    both.same(
        "instances", "restart", "broken", "b1", "--from-step-name", "fails",
        "--from-step-count", "1", "--from-step-type", "do",
    )  # fmt: skip
    both.until("errored once more", lambda t: status("broken", "b1")(t) == "errored")
    both.all_same([
        ("instances", "describe", "order", "o1"),
        ("instances", "describe", "slow", "s2"),
        ("instances", "describe", "broken", "b1"),
        ("instances", "terminate", "slow", "s2"),  # refused: already terminated
    ])  # fmt: skip

    both.same("instances", "resume", "order", "o1")
    both.until("resumed", lambda t: status("order", "o1")(t) in ("running", "waiting"))
    both.all_same([
        ("instances", "send-event", "order", "latest", "--type", "approve",
         "--payload", '{"by": 1}'),
        ("instances", "delete", "broken", "b1", "--filename", "ids.json"),
        ("delete", "slow"),
    ])  # fmt: skip
    both.until("complete", lambda t: status("order", "o1")(t) == "complete")
    both.all_same([
        ("instances", "describe", "order", "o1"),
        ("instances", "describe", "order", "o1", "--json"),
        ("instances", "delete", "broken", "b1", "--json"),  # refused: gone
        ("instances", "list", "slow"),
        ("describe", "slow"),
        ("delete", "nope"),
    ])  # fmt: skip

    commands = {
        "list", "describe", "delete", "trigger", "instances list", "instances describe",
        "instances send-event", "instances terminate", "instances restart", "instances pause",
        "instances resume", "instances delete",
    }  # fmt: skip
    assert commands <= set(both.compared), commands - set(both.compared)


def test_the_normalizer_keeps_what_matters() -> None:
    """Only times, durations, padding and the declared `waiting` are set aside."""
    celld = "Status:   ⏰ Waiting\nDuration:  3 seconds\n  running:  1\n  waiting:  2\n"
    wrangler_dev = "Status: ▶ Running\nDuration: 1 minute\n running: 3\n waiting: 0"
    assert normalize(celld) == normalize(wrangler_dev)
    assert normalize("Name: look up-1") != normalize("Name: look up")
    assert normalize('{"name": "a", "start": "2026-01-01T00:00:00.000Z"}') == normalize(
        '{"name": "a", "start": "2026-12-01T21:05:02.832Z"}'
    )
    assert normalize("Error: card declined") != normalize("Error: card declined on attempt 1")
    assert json.loads(normalize('{"status": "waiting"}')) == {"status": "running"}
