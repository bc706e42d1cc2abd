"""Fixtures that start real `celld run` servers for end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from celld.client import Client
from tests.celld_server import CelldServer

PROJECTS = Path(__file__).resolve().parent.parent / "projects"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def worker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    server = CelldServer(PROJECTS / "worker", tmp_path_factory.mktemp("worker") / "state")
    server.start()
    yield server
    server.stop()


def operator_celld(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    """The operator project under a manual clock (so in test mode); a test module makes
    it its fixture: `server = pytest.fixture(scope="module", name="server")(operator_celld)`."""
    celld = CelldServer(PROJECTS / "operator", tmp_path_factory.mktemp("op") / "state",
                        manual_clock=True)  # fmt: skip
    celld.start()
    yield celld
    celld.stop()


def celld_client(server: CelldServer) -> Iterator[Client]:
    """A Python client of the module's `server` (as a fixture: see operator_celld)."""
    with Client(server.url) as client:
        yield client
