"""A browser's WebSocket against celld, in headless Chromium (Debian's `chromium`, driven by
Playwright as tests/e2e/test_operator_page.py drives it): a page the test Worker serves
(tests/projects/websockets, /page) opens a socket to a Durable Object that accepted it with
the hibernation API, sends text and binary, and sees the close code and reason the object
chose."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.celld_server import CelldServer
from tests.chromium import CHROMIUM, require_chromium
from tests.e2e.conftest import PROJECTS

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

require_chromium()
from playwright.sync_api import sync_playwright  # noqa: E402 (after the check above)


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
