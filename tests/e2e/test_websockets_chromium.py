"""A browser's WebSocket against celld, in headless Chromium (Debian's `chromium`, driven by
Playwright as tests/e2e/test_operator_page.py drives it): a page the test Worker serves
(tests/projects/websockets, /page) opens a socket to a Durable Object that accepted it with
the hibernation API, sends text and binary, and sees the close code and reason the object
chose."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - reported below
    sync_playwright = None  # type: ignore[assignment]

_missing = (
    "the playwright Python package is not installed"
    if sync_playwright is None
    else f"{CHROMIUM} is missing (apt-get install chromium)"
    if not CHROMIUM.exists()
    else None
)
if _missing:
    if os.environ.get("CI"):
        raise RuntimeError(_missing)
    pytest.skip(_missing, allow_module_level=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(PROJECTS / "websockets", tmp_path_factory.mktemp("chromium") / "state")
    celld.start()
    yield celld
    celld.stop()


def test_a_page_talks_to_a_durable_object_over_a_websocket(server: CelldServer) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(server.url + "/page")
            page.wait_for_function("window.result !== undefined", timeout=30_000)
            result = page.evaluate("window.result")
        finally:
            browser.close()
    assert errors == []
    assert result == [
        ["hello", "chromium"],
        ["who", {"name": "chromium", "joined": 1}],
        ["binary", True, [250, 2, 1]],
        ["close", 4009, "closed by the object", True],
    ]
