"""Static assets: the decisions below were checked one by one against wrangler dev 4.164."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from celld.bindings.assets import AssetServer
from celld.project.bindings import AssetsConfig

FILES = {
    "index.html": "home",
    "about.html": "about",
    "docs/index.html": "docs",
    "style.css": "css",
    "404.html": "nf",
    "blog/404.html": "blognf",
}


def server(tmp_path: Path, **options: object) -> AssetServer:
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    settings: dict[str, object] = {
        "html_handling": "auto-trailing-slash",
        "not_found_handling": "none",
        "run_worker_first": False,
        **options,
    }
    return AssetServer(AssetsConfig(directory=tmp_path, binding="ASSETS", **settings))  # type: ignore[arg-type]


def ask(
    s: AssetServer,
    path: str,
    method: str = "GET",
    *,
    from_worker: bool = False,
    headers: dict[str, str] | None = None,
) -> object:
    answer = asyncio.run(s.answer(method, path, headers or {}, from_worker=from_worker))
    if answer is None:
        return "worker"
    location = dict(answer.headers).get("location")
    return (answer.status, location or answer.body.decode())


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", (200, "home")),
        ("/index.html", (307, "/")),
        ("/about", (200, "about")),
        ("/about.html", (307, "/about")),
        ("/about/", (307, "/about")),
        ("/about?x=1", (200, "about")),
        ("/about.html?x=1", (307, "/about?x=1")),
        ("/docs", (307, "/docs/")),
        ("/docs/", (200, "docs")),
        ("/docs/index.html", (307, "/docs/")),
        ("/docs/index", (307, "/docs/")),
        ("/style.css", (200, "css")),
        ("/%61bout", (307, "/about")),
        ("/nope", "worker"),
        ("/../etc/passwd", "worker"),
    ],
)
def test_auto_trailing_slash(tmp_path: Path, path: str, expected: object) -> None:
    assert ask(server(tmp_path), path) == expected


def test_force_and_drop_trailing_slash(tmp_path: Path) -> None:
    force = server(tmp_path, html_handling="force-trailing-slash")
    assert [ask(force, p) for p in ("/about", "/about/", "/docs", "/docs/")] == [
        (307, "/about/"), (200, "about"), (307, "/docs/"), (200, "docs"),
    ]  # fmt: skip
    drop = server(tmp_path, html_handling="drop-trailing-slash")
    assert [ask(drop, p) for p in ("/about/", "/about", "/docs/", "/docs")] == [
        (307, "/about"), (200, "about"), (307, "/docs"), (200, "docs"),
    ]  # fmt: skip


def test_not_found_pages(tmp_path: Path) -> None:
    page = server(tmp_path, not_found_handling="404-page")
    assert ask(page, "/nope") == (404, "nf")
    assert ask(page, "/blog/deep/x") == (404, "blognf")
    assert ask(page, "/nope", "POST") == (405, "")
    spa = server(tmp_path, not_found_handling="single-page-application")
    assert ask(spa, "/app/route") == (200, "home")
    assert ask(spa, "/about", "POST") == (405, "")


def test_spa_fallback_serves_only_navigations_from_2025_04_01(tmp_path: Path) -> None:
    """As wrangler dev 4.164 routes them (checked with Cloudflare's Workflows starter,
    compatibility date 2025-10-08): a fetch() or API call that matches no asset reaches the
    Worker; a browser navigation gets the app's index.html; a POST to an asset gets 405."""
    spa = server(tmp_path, not_found_handling="single-page-application", navigation_only_spa=True)
    navigate = {"sec-fetch-mode": "navigate"}
    assert ask(spa, "/api/nothing") == "worker"
    assert ask(spa, "/api/workflow/start", "POST") == "worker"
    assert ask(spa, "/app/route", headers=navigate) == (200, "home")
    assert ask(spa, "/", "POST") == (405, "")
    assert ask(spa, "/nope", from_worker=True) == (200, "home")


def test_worker_first_and_methods(tmp_path: Path) -> None:
    s = server(tmp_path, run_worker_first=("/api/*", "!/api/static/*"))
    assert ask(s, "/api/x") == "worker"
    assert ask(s, "/about", "POST") == (405, "")  # an asset path, but not GET/HEAD
    assert ask(s, "/nope", "POST") == "worker"
    assert ask(server(tmp_path, run_worker_first=True), "/about") == "worker"


def test_binding_fetch_follows_redirects_and_404s(tmp_path: Path) -> None:
    s = server(tmp_path)
    assert ask(s, "/about.html", from_worker=True) == (200, "about")
    assert ask(s, "/docs", from_worker=True) == (200, "docs")
    assert ask(s, "/nope", from_worker=True) == (404, "")


def test_etag_and_head(tmp_path: Path) -> None:
    s = server(tmp_path)
    first = asyncio.run(s.answer("GET", "/style.css", {}, from_worker=False))
    assert first is not None
    headers = dict(first.headers)
    assert headers["content-type"] == "text/css; charset=utf-8"
    assert headers["cache-control"] == "public, max-age=0, must-revalidate"
    again = asyncio.run(
        s.answer("GET", "/style.css", {"if-none-match": headers["etag"]}, from_worker=False)
    )
    assert again is not None and again.status == 304 and again.body == b""
    head = asyncio.run(s.answer("HEAD", "/style.css", {}, from_worker=False))
    assert head is not None and head.status == 200 and head.body == b""
    assert head.content_length == len("css")
