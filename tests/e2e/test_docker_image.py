"""The image in docker/ builds, serves a mounted project, reports healthy and stops cleanly.

Needs a Docker engine (`docker info` succeeds); where there is none the test is skipped,
saying why. The build context is the repository root: .dockerignore keeps the virtual
environment, .git, node_modules and state folders out of it, and the test checks that.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.celld_server import free_port
from tests.e2e.conftest import REPO


def _engine() -> str | None:
    """None when a Docker engine answers; otherwise why not."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer in 60 s"
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no output"])[-1]
        return f"no Docker engine: `docker info` failed: {reason}"
    return None


NO_ENGINE = _engine()
pytestmark = pytest.mark.skipif(NO_ENGINE is not None, reason=NO_ENGINE or "")


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    tag = f"celld-test:{secrets.token_hex(4)}"
    built = docker("build", "-f", "docker/Dockerfile", "-t", tag, str(REPO), timeout=1200)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    yield tag
    docker("image", "rm", "-f", tag)


def test_the_build_context_leaves_out_what_the_image_does_not_need(image: str) -> None:
    listed = docker("run", "--rm", "--entrypoint", "ls", image, "-A", "/opt/celld")
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) == {"README.md", "celld", "constraints.txt", "js",
                                          "pyproject.toml"}  # fmt: skip
    history = json.loads(docker("image", "inspect", image).stdout)[0]
    assert history["Config"]["Healthcheck"]["Test"][0] == "CMD"


def test_the_image_serves_a_project_and_reports_healthy(image: str) -> None:
    port = free_port()
    name = f"celld-test-{secrets.token_hex(4)}"
    started = docker(
        "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8787",
        "-v", f"{REPO / 'examples' / 'signup'}:/project:ro", image,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 180
        health = ""
        while time.monotonic() < deadline:
            state = json.loads(docker("inspect", name).stdout)[0]["State"]
            health = state.get("Health", {}).get("Status", "")
            assert state["Running"], docker("logs", name).stderr
            if health == "healthy":
                break
            time.sleep(1)
        assert health == "healthy", docker("logs", name).stderr
        created = httpx.post(
            f"http://127.0.0.1:{port}/signup", json={"email": "ada@example.com"}, timeout=30
        )
        assert created.status_code == 200, created.text
        status = httpx.get(f"http://127.0.0.1:{port}/signup/{created.json()['id']}", timeout=30)
        assert status.json()["status"] in ("queued", "running", "waiting")
        stopped = docker("stop", "-t", "20", name, timeout=60)
        assert stopped.returncode == 0
        logs = docker("logs", name)
        assert "[celld:info] stopped" in logs.stdout + logs.stderr
    finally:
        docker("rm", "-f", "-v", name)
