from __future__ import annotations

from pathlib import Path

import pytest

from tests.bindings.harness import Harness


@pytest.fixture
def js(tmp_path: Path) -> Harness:
    """Run JS with env.KV, env.DB and env.BUCKET stored under tmp_path/state."""
    return Harness(tmp_path / "state")
