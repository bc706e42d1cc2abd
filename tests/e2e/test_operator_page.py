"""The operator page at /cdn-cgi/celld/, end to end in headless Chromium (Debian's
`chromium`, driven by Playwright; no browser is downloaded), against a real `celld run`
with a manual clock."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celld.client import CelldError, Client
from tests.celld_server import CelldServer
from tests.chromium import CHROMIUM, require_chromium
from tests.e2e.conftest import PROJECTS, REPO
from tests.pngpixels import columns_with, decode_png

HOUR = 3_600_000
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
GREEN = (0x16, 0xA3, 0x4A)  # a step that is done
PURPLE = (0x7C, 0x3A, 0xED)  # a sleep (or wait) in progress

require_chromium()
from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402 (after the check above)

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
    first = charge.locator('table.attempts tr[data-attempt="1"]')
    expect(first.locator(".badge")).to_have_text("failed")
    expect(first.locator("td.error")).to_have_text("Error: card declined on attempt 1")
    expect(first.locator("td").nth(4)).to_have_text("0 ms")  # the manual clock stood still

    # the page follows the instance without a reload
    client.advance_clock(5_000)
    instance.wait_until_settled()
    expect(charge).to_have_attribute("data-state", "done")
    # every attempt with its start, end, duration and error: the second began 5 s later
    attempts = charge.locator("table.attempts tr[data-attempt]")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(1).locator(".badge")).to_have_text("done")
    expect(attempts.nth(1).locator("td.error")).to_have_count(0)
    cells = [attempts.nth(n).locator("td").nth(2).inner_text() for n in range(2)]
    assert all(c != "—" for c in cells) and cells[0] != cells[1], cells
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

    actions = page.locator("#actions [data-action]")
    expect(actions).to_have_text(
        ["Pause", "Terminate", "Terminate with rollback", "Restart", "Delete"]
    )
    page.locator('[data-action="Pause"]').click()
    expect(page.locator("#facts .badge").first).to_have_text("paused")
    assert instance.status()["status"] == "paused"
    expect(actions).to_have_text(
        ["Resume", "Terminate", "Terminate with rollback", "Restart", "Delete"]
    )
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

    # a complete instance can only be restarted or deleted (the lifecycle says so)
    expect(actions).to_have_text(["Restart", "Delete"])
    page.locator("#restart-from").select_option(label='from do "ship"')
    page.locator('[data-action="Restart"]').click()
    expect(page.locator("#notice")).to_contain_text("Restart: instance is now")
    assert instance.wait_for_status("complete")["output"]["shipped"] == {"shipped": 42}
    dialog = page.locator("#confirm")
    page.locator('[data-action="delete"]').click()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Delete instance pw-order?")
    page.locator("#confirm-cancel").click()  # dismissed: nothing is deleted
    expect(dialog).to_be_hidden()
    assert instance.status()["status"] == "complete"
    page.locator('[data-action="delete"]').click()
    page.locator("#confirm-ok").click()
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


def test_terminate_asks_first_and_sends_nothing_when_dismissed(
    page: Page, server: CelldServer, client: Client
) -> None:
    instance = client.workflow("order-workflow").create(id="pw-confirm", params={"order": 1})
    instance.wait_until_settled()  # sleeping an hour
    patches: list[str | None] = []
    page.on("request", lambda r: patches.append(r.post_data) if r.method == "PATCH" else None)
    open_page(page, server, "#/w/order-workflow/i/pw-confirm")
    dialog = page.locator("#confirm")
    page.locator('[data-action="Terminate"]').click()
    expect(dialog).to_be_visible()
    expect(page.locator("#confirm-text")).to_have_text(
        "Terminate instance pw-confirm? It stops for good."
    )
    expect(page.locator("#confirm-ok")).to_have_text("Terminate")
    page.locator("#confirm-cancel").click()
    expect(dialog).to_be_hidden()
    page.locator('[data-action="Terminate with rollback"]').click()
    expect(page.locator("#confirm-text")).to_contain_text("rollback handlers")
    page.keyboard.press("Escape")  # dismissed too
    expect(dialog).to_be_hidden()
    page.locator('[data-action="Terminate"]').click()
    page.locator("#confirm-ok").click()
    expect(page.locator("#notice")).to_have_text("Terminate: instance is now terminated")
    # the requests are seen in order: the two dismissed dialogs sent none
    assert patches == ['{"status":"terminate"}']
    assert instance.status()["status"] == "terminated"
    expect(page.locator("#actions [data-action]")).to_have_text(["Restart", "Delete"])


def test_resume_that_changes_nothing_is_not_reported_as_a_success(
    page: Page, server: CelldServer, client: Client
) -> None:
    """A view left open on a paused instance that completed meanwhile: its Resume reaches
    the server, which answers as Cloudflare does (a success, status `complete`); the
    page says it had no effect."""
    instance = client.workflow("order-workflow").create(id="pw-stale", params={"order": 5})
    instance.wait_until_settled()
    instance.pause()
    open_page(page, server, "#/w/order-workflow/i/pw-stale")
    expect(page.locator('[data-action="Resume"]')).to_be_visible()
    # from now on the view cannot refresh: it stays as it was
    page.route(
        "**/instances/pw-stale",
        lambda route: route.abort() if route.request.method == "GET" else route.continue_(),
    )
    instance.resume()
    instance.wait_until_settled()
    client.advance_clock(HOUR)
    instance.wait_until_settled()
    instance.send_event("approve", {"by": "test"})
    instance.wait_for_status("complete")
    page.locator('[data-action="Resume"]').click()
    notice = page.locator("#notice")
    expect(notice).to_have_text("Resume had no effect: the instance is complete")
    expect(notice).not_to_have_class(re.compile(r"\bok\b"))


STATUS_COLOURS = {
    "terminated": (0x33, 0x41, 0x55),
    "errored": (0xB9, 0x1C, 0x1C),
}


def contrast(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    """WCAG's contrast ratio of two sRGB colours."""

    def luminance(rgb: tuple[int, ...]) -> float:
        linear = [(c / 255 / 12.92) if c <= 10 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_every_status_has_its_own_accessible_colour(
    page: Page, server: CelldServer, client: Client
) -> None:
    orders = client.workflow("order-workflow")
    failing = orders.create(id="pw-errored", params={"fail": 99})
    failing.wait_until_settled()
    for _ in range(5):  # each retry waits 5 s; the sixth attempt fails the instance
        client.advance_clock(5_000)
        failing.wait_until_settled()
    assert failing.wait_for_status("errored")["status"] == "errored"
    stopped = orders.create(id="pw-terminated", params={"order": 2})
    stopped.wait_until_settled()
    stopped.terminate()
    open_page(page, server, "#/w/order-workflow?q=pw-")
    # what the stylesheet gives each status badge: a colour of its own, text readable on it
    styles = page.evaluate(
        """(statuses) => statuses.map((s) => {
            const b = document.createElement("span");
            b.className = `badge s-${s}`;
            b.textContent = s;
            document.body.append(b);
            const style = getComputedStyle(b);
            const found = [style.backgroundColor, style.color];
            b.remove();
            return found;
        })""",
        [
            "queued",
            "running",
            "paused",
            "waitingForPause",
            "waiting",
            "errored",
            "terminated",
            "complete",
        ],
    )
    rgb = [tuple(int(n) for n in re.findall(r"\d+", c)[:3]) for pair in styles for c in pair]
    backgrounds, texts = rgb[0::2], rgb[1::2]
    assert len(set(backgrounds)) == 8, backgrounds
    for background, text in zip(backgrounds, texts, strict=True):
        assert contrast(background, text) >= 4.5, (background, text)
    # the screenshots: a terminated badge is slate, an errored one red, neither the other's
    for status, colour in STATUS_COLOURS.items():
        other = next(c for s, c in STATUS_COLOURS.items() if s != status)
        cell = page.locator(f'tr[data-instance="pw-{status}"] .badge')
        expect(cell).to_have_text(status)  # the label says it too, not the colour alone
        _, _, rows = decode_png(cell.screenshot())
        assert len(columns_with(rows, colour, tolerance=6)) >= 20, status
        assert not columns_with(rows, other, tolerance=20), status


def test_search_by_id_dates_and_durations(browser: Any, tmp_path: Path) -> None:
    """The server filters (ids containing the text, created between two UTC dates) and
    pages; the duration column shows how long each instance ran."""
    day = 86_400_000
    start = 1_767_261_600_000  # 2026-01-01T10:00:00Z
    celld = CelldServer(PROJECTS / "operator", tmp_path / "state", manual_clock=start)
    celld.start()
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        with Client(celld.url) as client:
            quick, orders = client.workflow("quick-workflow"), client.workflow("order-workflow")
            quick.create(id="alpha-1").wait_for_status("complete")  # 2026-01-01
            client.advance_clock(2 * day)
            quick.create(id="Beta-2").wait_for_status("complete")  # 2026-01-03
            client.advance_clock(day)
            quick.create(id="beta-3").wait_for_status("complete")  # 2026-01-04
            stopped = orders.create(id="gamma-1", params={"order": 1})
            stopped.wait_until_settled()
            client.advance_clock(10 * 60_000)
            stopped.terminate()
            orders.create(id="delta-1", params={"order": 2}).wait_until_settled()
            client.advance_clock(90_000)
        page = context.new_page()
        rows = page.locator("#instances tr[data-instance]")
        ids = lambda: [r.get_attribute("data-instance") for r in rows.all()]  # noqa: E731
        open_page(page, celld, "#/w/quick-workflow")
        expect(rows).to_have_count(3)
        page.locator("#search").fill("BETA")
        page.locator("#search").press("Enter")
        expect(page).to_have_url(re.compile(r"[?&]q=BETA"))
        expect(page.locator("#total")).to_have_text("2 instance(s)")
        assert ids() == ["beta-3", "Beta-2"]
        page.locator("#created-to").fill("2026-01-03")  # a bare date: the whole UTC day
        expect(page.locator("#total")).to_have_text("1 instance(s)")
        assert ids() == ["Beta-2"]
        open_page(page, celld, "#/w/quick-workflow?from=2026-01-02&per_page=1")
        expect(page.locator("#page")).to_have_text("page 1 of 2")  # paged by the server
        expect(rows).to_have_count(1)
        page.locator("#next").click()
        expect(page.locator("#page")).to_have_text("page 2 of 2")
        expect(rows.first).to_have_attribute("data-instance", "Beta-2")
        expect(page.locator("#created-from")).to_have_value("2026-01-02")
        open_page(page, celld, "#/w/quick-workflow?from=2026-01-04&to=2026-01-01")
        expect(page.locator("#view")).to_contain_text("'date_start' must not be after 'date_end'.")
        open_page(page, celld, "#/w/order-workflow")
        expect(page.locator('tr[data-instance="gamma-1"] .duration')).to_have_text("10m")
        expect(page.locator('tr[data-instance="delta-1"] .duration')).to_have_text("1m 30s so far")
    finally:
        context.close()
        celld.stop()


def test_queues_section_shows_each_queue(browser: Any, tmp_path: Path) -> None:
    """tests/projects/queues: the page's section lists each queue with its depth, and
    follows a send."""
    celld = CelldServer(PROJECTS / "queues", tmp_path / "state", manual_clock=True)
    celld.start()
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        open_page(page, celld, "#/")
        hold = page.locator('#queues tr[data-key="hold"]')
        expect(hold.locator('[data-field="consumer"]')).to_have_text("queues-test")
        expect(hold.locator('[data-field="depth"]')).to_have_text("0")
        for _ in range(2):
            assert celld.post("/send", params={"tag": "x", "queue": "hold"}).status_code == 200
        expect(hold.locator('[data-field="depth"]')).to_have_text("2")
        expect(hold.locator('[data-field="ready"]')).to_have_text("2")
    finally:
        context.close()
        celld.stop()
