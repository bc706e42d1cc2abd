"""The operator page at /cdn-cgi/celld/, end to end in headless Chromium (Debian's
`chromium`, driven by Playwright; no browser is downloaded), against a real `celld run`
with a manual clock."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celld.client import CelldError, Client
from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS, REPO
from tests.pngpixels import columns_with, decode_png

CHROMIUM = Path("/usr/bin/chromium")
HOUR = 3_600_000
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
GREEN = (0x16, 0xA3, 0x4A)  # a step that is done
PURPLE = (0x7C, 0x3A, 0xED)  # a sleep (or wait) in progress

try:
    from playwright.sync_api import Page, expect, sync_playwright
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

# The page polls every second; on a busy shared machine a change can take a few polls.
expect.set_options(timeout=15_000)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(
        PROJECTS / "operator", tmp_path_factory.mktemp("page") / "state", manual_clock=True
    )
    celld.start()
    yield celld
    celld.stop()


@pytest.fixture(scope="module")
def client(server: CelldServer) -> Iterator[Client]:
    with Client(server.url) as celld:
        yield celld


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser: Any, server: CelldServer) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    assert not [e for e in errors if "Failed to load resource" not in e], errors


def open_page(page: Page, server: CelldServer, fragment: str) -> None:
    """Go to a view and wait until it is rendered: a fragment-only change does not reload
    the page, and acting on the previous view's controls (the same ids) would be a race."""
    page.goto(f"{server.url}/cdn-cgi/celld/{fragment}")
    page.wait_for_function(
        "(h) => document.getElementById('view').dataset.route === h", arg=fragment
    )


def boxes(page: Page, *selectors: str) -> list[dict[str, float]]:
    """The boxes of elements measured in one task of the page: the page re-renders every
    second, and a locator's `bounding_box()` can land between a render detaching the old
    element and attaching the new one (it then answers None)."""
    found = page.wait_for_function(
        """(selectors) => {
            const nodes = selectors.map((s) => document.querySelector(s));
            if (nodes.some((n) => !n)) return null;
            return nodes.map((n) => {
                const r = n.getBoundingClientRect();
                return { x: r.x, y: r.y, width: r.width, height: r.height };
            });
        }""",
        arg=list(selectors),
    )
    return found.json_value()


def test_workflows_with_counts(page: Page, server: CelldServer, client: Client) -> None:
    quick = client.workflow("quick-workflow")
    for n in range(2):
        quick.create(id=f"pw-count-{n}").wait_for_status("complete")
    open_page(page, server, "#/")
    row = page.locator('tr[data-workflow="quick-workflow"]')
    expect(row.locator('[data-count="complete"]')).to_have_text("2")
    expect(page.locator('tr[data-workflow="order-workflow"]')).to_contain_text("OrderWorkflow")
    row.locator("a").click()
    expect(page).to_have_url(re.compile(r"#/w/quick-workflow$"))
    expect(page.locator("#total")).to_have_text("2 instance(s)")


def test_instances_filter_and_paging(page: Page, server: CelldServer, client: Client) -> None:
    quick = client.workflow("quick-workflow")
    for n in range(3):
        client.advance_clock(1_000)
        quick.create(id=f"pw-page-{n}").wait_for_status("complete")
    orders = client.workflow("order-workflow")
    client.advance_clock(1_000)
    orders.create(id="pw-paused").wait_until_settled()
    orders.get("pw-paused").pause()
    open_page(page, server, "#/w/quick-workflow?per_page=2")
    rows = page.locator("#instances tr[data-instance]")
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_attribute("data-instance", "pw-page-2")
    page.locator("#next").click()
    expect(page.locator("#page")).to_contain_text("page 2 of")
    expect(rows.first).to_have_attribute("data-instance", "pw-page-0")
    open_page(page, server, "#/w/order-workflow")
    page.locator("#status-filter").select_option("paused")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-instance", "pw-paused")
    page.locator("#status-filter").select_option("complete")
    expect(rows).to_have_count(0)


def test_instance_timeline_actions_and_live_updates(
    page: Page, server: CelldServer, client: Client
) -> None:
    client.advance_clock(1_000)
    open_page(page, server, "#/w/order-workflow")
    page.locator("#trigger-id").fill("pw-order")
    page.locator("#trigger-params").fill('{"order": 42, "fail": 1}')
    page.locator("#trigger").click()
    expect(page).to_have_url(re.compile(r"#/w/order-workflow/i/pw-order$"))
    instance = client.workflow("order-workflow").get("pw-order")
    instance.wait_until_settled()
    charge = page.locator('.step[data-step="charge card"]')
    expect(charge).to_have_attribute("data-state", "retrying")
    expect(charge).to_contain_text("card declined on attempt 1")
    expect(charge.locator(".retry")).to_contain_text("next attempt")

    # the page follows the instance without a reload
    client.advance_clock(5_000)
    instance.wait_until_settled()
    expect(charge).to_have_attribute("data-state", "done")
    secret = page.locator('.step[data-step="issue secret"]')
    expect(secret).to_contain_text("[REDACTED]")
    assert "s3cr3t" not in page.content()
    sleep = page.locator('.step[data-step="cool down"]')
    expect(sleep).to_have_attribute("data-state", "sleeping")
    expect(sleep).to_contain_text("sleeps until")

    # screenshot check of the timeline: done steps are short green bars at the left, the
    # hour-long sleep a purple bar across nearly the whole track
    png = page.locator("#timeline").screenshot()
    width, _, rows = decode_png(png)
    green = columns_with(rows, GREEN)
    purple = columns_with(rows, PURPLE)
    track, timeline = boxes(page, '.step[data-step="cool down"] .track', "#timeline")
    track_left = track["x"] - timeline["x"]
    assert green and min(green) <= track_left + 12, (sorted(green)[:5], track_left)
    assert purple, "no sleep bar in the timeline screenshot"
    assert max(purple) - min(purple) >= 0.9 * track["width"], (min(purple), max(purple), track)
    assert max(purple) < width

    page.locator('[data-action="Pause"]').click()
    expect(page.locator("#facts .badge").first).to_have_text("paused")
    assert instance.status()["status"] == "paused"
    page.locator('[data-action="Resume"]').click()
    expect(page.locator("#facts .badge").first).not_to_have_text("paused")
    instance.wait_until_settled()
    client.advance_clock(HOUR)
    instance.wait_until_settled()
    wait = page.locator('.step[data-step="approval"]')
    expect(wait).to_have_attribute("data-state", "waiting")
    expect(wait).to_contain_text("times out")

    page.locator("#event-type").fill("approve")
    page.locator("#event-payload").fill('{"by": "browser"}')
    page.locator("#send-event").click()
    expect(page.locator("#facts .badge").first).to_have_text("complete")
    expect(page.locator("#output")).to_contain_text('"shipped": 42')
    expect(page.locator("#events")).to_contain_text("browser")

    page.locator('[data-action="Terminate"]').click()
    expect(page.locator("#notice")).to_contain_text("cannot_terminate")
    page.locator('[data-action="Terminate with rollback"]').click()  # sends {rollback: true}
    expect(page.locator("#notice")).to_contain_text("cannot_terminate")
    page.locator("#restart-from").select_option(label='from do "ship"')
    page.locator('[data-action="Restart"]').click()
    expect(page.locator("#notice")).to_contain_text("Restart: instance is now")
    assert instance.wait_for_status("complete")["output"]["shipped"] == {"shipped": 42}
    page.locator('[data-action="delete"]').click()
    expect(page).to_have_url(re.compile(r"#/w/order-workflow$"))
    expect(page.locator('#instances tr[data-instance="pw-order"]')).to_have_count(0)
    with pytest.raises(CelldError, match="Workflow instance 'pw-order' not found"):
        client.workflow("order-workflow").get("pw-order").describe()


def test_page_needs_the_token_beyond_loopback(browser: Any, tmp_path: Path) -> None:
    token = "page-token-0123456789abcdef"
    celld = CelldServer(
        PROJECTS / "operator", tmp_path / "state", env={"CELLD_ADMIN_TOKEN": token}
    ).start()
    context = browser.new_context()
    try:
        page = context.new_page()
        refused = page.goto(f"{celld.url}/cdn-cgi/celld/")
        assert refused is not None and refused.status == 401
        page.goto(f"{celld.url}/cdn-cgi/celld/?token={token}")
        expect(page.locator('tr[data-workflow="order-workflow"]')).to_be_visible()
    finally:
        context.close()
        celld.stop()


def test_workflows_view_shows_cron_schedules(browser: Any, tmp_path: Path) -> None:
    """examples/scheduled: each schedule with its next tick, then a link to the instance
    the last tick started (its id has "/" and spaces in it)."""
    start = 1_767_226_200_000  # 2026-01-01T00:10:00Z
    celld = CelldServer(REPO / "examples" / "scheduled", tmp_path / "state", manual_clock=start)
    celld.start()
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        open_page(page, celld, "#/")
        half_hourly = page.locator('tr[data-workflow="digest"] [data-schedule="*/30 * * * *"]')
        expect(half_hourly).to_contain_text("next")
        expect(page.locator('[data-schedule="0 9 * * MON-FRI"]')).to_be_visible()
        celld.advance(20 * 60_000)
        link = half_hourly.locator("a")
        expect(link).to_have_text("instance")
        link.click()
        expect(page.locator("h1")).to_contain_text("*/30 * * * *-1767227400000")
    finally:
        context.close()
        celld.stop()
