"""The examples' READMEs, followed as a user follows them: every command of their "Run it"
section runs against a real `celld run`, and what the README says it answers is checked.

A command's answer is the `# {...}` comment under it (or after it on its line). The
statuses, states, events, lifecycle flags and error texts it names must be in the real
answer: a status read (a `GET`) may take a moment to get there, as it does for a person
typing the next command; anything that changes something must answer so at once. Ids and
other generated values are elided in the READMEs (`…`) and not checked.

`celld run` lines start the server (with the environment they set, such as a test clock),
on a free port in place of 8787; `celld workflows` lines are run against it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import REPO

CHECKED = ("status", "sent", "pause", "resume", "terminate", "state", "error", "paidBy",
           "approvedBy", "name")  # fmt: skip
PAIR = re.compile(r'"(' + "|".join(CHECKED) + r')":("(?:[^"\\]|\\.)*"|true|false)')


@dataclass
class Command:
    line: str
    expected: str = ""  # the README's comment on what it answers

    def claims(self) -> list[str]:
        """The `"key":value` texts the answer must contain."""
        return [m.group(0) for m in PAIR.finditer(self.expected) if "…" not in m.group(0)]


@dataclass
class Block:
    commands: list[Command] = field(default_factory=list)


def run_it_blocks(readme: Path) -> list[Block]:
    """The ```sh blocks from the README's "Run it" section on, but for those that start
    `wrangler dev` beside celld (signup's side-by-side comparison needs more than celld)."""
    text = readme.read_text()
    start = text.index("## Run it")
    blocks = []
    for body in re.findall(r"```sh\n(.*?)```", text[start:], re.S):
        if any("npx wrangler" in line.split("#")[0] for line in body.splitlines()):
            continue
        block = Block()
        for raw in body.splitlines():
            line = raw.rstrip()
            if not line.strip():
                continue
            if line.startswith("#"):
                if block.commands:
                    block.commands[-1].expected += line.lstrip("# ")
                continue
            command = Command(line)
            inline = re.search(r"\s#\s*([{\[].*)$", line)
            if inline and not line.lstrip().startswith("ID="):
                command.expected = inline.group(1)
            block.commands.append(command)
        blocks.append(block)
    return blocks


class Follower:
    """Runs a README's commands the way a shell would, against celld."""

    def __init__(self, example: str, tmp_path: Path) -> None:
        self.example = example
        self.tmp_path = tmp_path
        self.server: CelldServer | None = None
        self.variables: dict[str, str] = {}
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.starts = 0

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()

    def start(self, line: str) -> None:
        """`[VAR=value ...] celld run examples/NAME`: a server in its place."""
        self.close()
        env = dict(re.findall(r"(\w+)=(\S+)\s", line.split("celld run")[0] + " "))
        self.starts += 1
        state = self.tmp_path / f"state-{self.starts}"
        self.server = CelldServer(REPO / "examples" / self.example, state, env=env).start(60)
        shim = self.bin / "celld"
        shim.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" -m celld "$@" --port {self.server.port}\n'
        )
        shim.chmod(0o755)

    def shell(self, line: str) -> subprocess.CompletedProcess[str]:
        assert self.server is not None, f"no `celld run` before {line!r}"
        port = str(self.server.port)
        line = line.replace("127.0.0.1:8787", f"127.0.0.1:{port}")
        line = line.replace("localhost:8787", f"localhost:{port}")
        env = {**os.environ, **self.variables, "PATH": f"{self.bin}:{os.environ['PATH']}"}
        return subprocess.run(
            ["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60,
            cwd=REPO, check=False,
        )  # fmt: skip

    def follow(self, command: Command) -> None:
        line = command.line
        if re.search(r"(^|\s)celld run ", line):
            self.start(line)
            return
        assigned = re.match(r"^(\w+)=\$\((.*)\)$", line)
        if assigned:
            done = self.shell(f"{assigned.group(2)}")
            assert done.returncode == 0 and done.stdout.strip(), (line, done.stderr)
            self.variables[assigned.group(1)] = done.stdout.strip()
            return
        reads = not re.search(r"\s-d\s|-X\s*(POST|PUT|DELETE|PATCH)", line)
        deadline = time.monotonic() + (15 if reads else 0)
        while True:
            done = self.shell(line)
            missing = [c for c in command.claims() if c not in done.stdout]
            if done.returncode == 0 and not missing:
                return
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{self.example}: `{line}` answered\n{done.stdout}{done.stderr}\n"
                    f"(exit {done.returncode}), not what the README says: {missing}"
                )
            time.sleep(0.2)


@pytest.fixture
def follower(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Follower]:
    running = Follower(request.param, tmp_path)
    yield running
    running.close()


@pytest.mark.parametrize(
    "follower", ["approval", "orders", "retry-fetch", "saga", "scheduled", "signup"], indirect=True
)
def test_the_readme_does_what_it_says(follower: Follower) -> None:
    blocks = run_it_blocks(REPO / "examples" / follower.example / "README.md")
    checked = 0
    for block in blocks:
        for command in block.commands:
            follower.follow(command)
            checked += bool(command.claims())
    assert checked >= 2  # the README makes claims, and they were checked
