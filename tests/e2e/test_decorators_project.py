"""Decorators in a Worker served by a real `celld run` (tests/projects/decorators):
TypeScript's experimentalDecorators (class, method, multi-line and parameter decorators, a
class decorator that returns a subclass) in a .ts file and standard decorators (field
initializers, addInitializer, metadata) in a .js file of the same project. The expected
answers are what wrangler dev 4.164.0 gave for the same project."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celld_server import CelldServer

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "decorators"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(PROJECT, tmp_path_factory.mktemp("decorators") / "state")
    celld.start(timeout=60)
    yield celld
    celld.stop()


def test_experimental_decorators(server: CelldServer) -> None:
    assert server.get("/experimental").json() == {
        "prefix": "/api",
        "routes": [
            {"method": "PARAM", "path": "hello#0", "handler": "who"},
            {"method": "GET", "path": "/hello", "handler": "hello"},
            {"method": "POST", "path": "/echo", "handler": "echo"},
        ],
        "hello": {"hello": "ada"},
        "echo": {"echo": [1, 2]},
        "name": "",
    }


def test_standard_decorators(server: CelldServer) -> None:
    assert server.get("/standard").json() == {
        "before": 10,
        "after": 15,
        "calls": ["ready add", "add(5)"],
        "registered": "Counter",
    }
