"""Fixtures that start real `celld run` servers for end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celld_server import CelldServer

PROJECTS = Path(__file__).resolve().parent.parent / "projects"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def worker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    server = CelldServer(PROJECTS / "worker", tmp_path_factory.mktemp("worker") / "state")
    server.start()
    yield server
    server.stop()
