from __future__ import annotations

from pathlib import Path

import pytest

from tests.bindings.harness import Harness


@pytest.fixture(params=["sqlite", "postgresql"])
def js(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    """Run JS with env.KV, env.DB and env.BUCKET stored under tmp_path/state, with KV and R2
    in files there (one node) or in a fresh PostgreSQL database (a shared store)."""
    if request.param == "postgresql":
        return Harness(tmp_path / "state", shared=request.getfixturevalue("postgres_dsn"))
    return Harness(tmp_path / "state")


@pytest.fixture
def js_files(tmp_path: Path) -> Harness:
    """As `js`, on files only (tests that look at the files themselves)."""
    return Harness(tmp_path / "state")
