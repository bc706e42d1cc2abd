"""Workers written in JSX, installed with `npm ci` from their lockfiles and served by a real
`celld run`: hono/jsx (tests/projects/jsx-hono, `jsxImportSource: hono/jsx`) and React's
`react-dom/server` (tests/projects/jsx-react, `.jsx` and `.tsx` files). The expected pages
are what wrangler dev 4.164.0 served for the same projects, byte for byte."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.targets import ensure_node_modules
from tests.celld_server import CelldServer

PROJECTS = Path(__file__).resolve().parents[1] / "projects"

HONO_PAGE = (
    '<html lang="en"><head><meta charset="utf-8"/><title>Tasks &amp; more</title></head>'
    '<body><h1>Tasks for   today</h1><ul class="items"><li data-id="1" class="done">'
    'Write &lt;JSX&gt;<span> &amp;check; done</span></li><li data-id="2">Serve it</li></ul>'
    '<p id="spread" title="t">fragment \u00a0child</p><svg:use xlink:href="#icon"></svg:use>'
    "</body></html>"
)
REACT_PAGE = (
    '<main id="app" style="color:red;margin-top:4px"><h1>Hello, React \u2014 on Workers</h1>'
    '<button type="button" class="counter dark" aria-label="Clicks">Clicks{sep}: {sep}3'
    "</button><table><tbody><tr><td>1</td><td>&lt;2&gt;</td></tr><tr><td>3 &amp; 4</td></tr>"
    '</tbody></table><input type="checkbox" checked=""/></main>'
)


def _serve(name: str, factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    project = PROJECTS / name
    if shutil.which("npm") is None and not (project / "node_modules").is_dir():
        pytest.skip(f"npm is not installed; `npm ci` in tests/projects/{name} to run these")
    ensure_node_modules(project)
    celld = CelldServer(project, factory.mktemp(name) / "state")
    celld.start(timeout=90)
    yield celld
    celld.stop()


@pytest.fixture(scope="module")
def hono(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    yield from _serve("jsx-hono", tmp_path_factory)


@pytest.fixture(scope="module")
def react(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    yield from _serve("jsx-react", tmp_path_factory)


def test_hono_jsx_page(hono: CelldServer) -> None:
    response = hono.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.text == HONO_PAGE


def test_error_in_a_component_points_at_its_line(hono: CelldServer) -> None:
    """The compiled JSX keeps every line, so the stack names the line of the `throw`."""
    response = hono.get("/broken")
    assert response.status_code == 500
    hono.wait_for(lambda: "thrown inside a component" in hono.log(), timeout=30)
    log = hono.log()
    assert "at Thrower (src/index.tsx:33:" in log
    assert "(src/index.tsx:35:" in log


def test_react_render_to_string(react: CelldServer) -> None:
    response = react.get("/")
    assert response.status_code == 200
    assert response.text == REACT_PAGE.format(sep="<!-- -->")


def test_react_render_to_static_markup(react: CelldServer) -> None:
    assert react.get("/static").text == REACT_PAGE.format(sep="")
