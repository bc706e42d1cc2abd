"""A project without `main` (an assets-only Worker) is served by its assets alone, as wrangler
dev serves it: files, redirects and the not_found_handling page, an empty 404 otherwise, 405
for a method the assets do not serve; what needs a Worker script is refused at start with
wrangler's words."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from celld.project import load_config
from celld.project.errors import ConfigError
from tests.celld_server import CelldServer


def assets_project(root: Path, **assets: object) -> Path:
    (root / "public").mkdir(parents=True)
    (root / "public" / "index.html").write_text("<p>home</p>")
    (root / "public" / "a.txt").write_text("hello")
    (root / "public" / "404.html").write_text("<p>not here</p>")
    config = {
        "name": "static",
        "compatibility_date": "2026-11-01",
        "assets": {"directory": "./public", **assets},
    }
    (root / "wrangler.jsonc").write_text(json.dumps(config))
    return root


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., CelldServer]]:
    started: list[CelldServer] = []

    def start(**assets: object) -> CelldServer:
        project = assets_project(tmp_path / f"p{len(started)}", **assets)
        server = CelldServer(project, tmp_path / f"state{len(started)}")
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_files_redirects_and_an_empty_404(serve: Callable[..., CelldServer]) -> None:
    server = serve()
    assert server.get("/a.txt").text == "hello"
    assert server.get("/").text == "<p>home</p>"
    moved = server.get("/index.html", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (307, "/")
    for method in ("GET", "POST", "PUT", "DELETE"):
        missing = httpx.request(method, f"{server.url}/missing")
        assert (missing.status_code, missing.content) == (404, b""), method
    assert httpx.post(f"{server.url}/a.txt").status_code == 405


def test_a_single_page_app_answers_every_unmatched_request(
    serve: Callable[..., CelldServer],
) -> None:
    """With no Worker to reach, a fetch() gets the app's index.html as a navigation does."""
    server = serve(not_found_handling="single-page-application")
    for headers in ({}, {"sec-fetch-mode": "navigate"}):
        page = server.get("/some/route", headers=headers)
        assert (page.status_code, page.text) == (200, "<p>home</p>"), headers
    assert httpx.post(f"{server.url}/some/route").status_code == 405


def test_the_404_page(serve: Callable[..., CelldServer]) -> None:
    server = serve(not_found_handling="404-page")
    page = server.get("/x/y")
    assert (page.status_code, page.text) == (404, "<p>not here</p>")


@pytest.mark.parametrize(
    ("assets", "extra", "field", "words"),
    [
        ({"binding": "ASSETS"}, {}, "assets.binding",
         "Cannot use assets with a binding in an assets-only Worker."),
        ({"run_worker_first": True}, {}, "assets.run_worker_first",
         "Cannot set run_worker_first without a Worker script."),
        ({}, {"workflows": [{"name": "w", "binding": "W", "class_name": "Flow"}]}, "main",
         "Workflow class Flow needs a Worker script (`main`) that exports it"),
    ],
)  # fmt: skip
def test_what_needs_a_worker_script_is_refused(
    tmp_path: Path, assets: dict, extra: dict, field: str, words: str
) -> None:
    root = assets_project(tmp_path, **assets)
    config = json.loads((root / "wrangler.jsonc").read_text()) | extra
    (root / "wrangler.jsonc").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as refused:
        load_config(root / "wrangler.jsonc")
    assert any(i.key == field and words in i.message for i in refused.value.issues), str(
        refused.value
    )


def test_neither_main_nor_assets_is_refused(tmp_path: Path) -> None:
    (tmp_path / "wrangler.toml").write_text('name = "empty"\ncompatibility_date = "2026-11-01"\n')
    with pytest.raises(ConfigError, match="Missing entry-point to Worker script or to assets"):
        load_config(tmp_path / "wrangler.toml")
