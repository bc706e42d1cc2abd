"""Chromium for the tests that drive a browser (Playwright with Debian's chromium, which
.ci/run installs): present, or the test module is skipped; in CI a missing one is an error."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


def require_chromium() -> None:
    """Skip the calling module (raise in CI) when Playwright or Chromium is missing."""
    missing = (
        "the playwright Python package is not installed"
        if importlib.util.find_spec("playwright") is None
        else f"{CHROMIUM} is missing (apt-get install chromium)"
        if not CHROMIUM.exists()
        else None
    )
    if missing:
        if os.environ.get("CI"):
            raise RuntimeError(missing)
        pytest.skip(missing, allow_module_level=True)
