"""An assets-only Worker (compat/projects/static: no `main`, `not_found_handling =
"404-page"`): files with their content types, the redirects of `auto-trailing-slash`, the 404
page, the methods the assets refuse; and a project whose assets-only config asks for what only
a Worker script can use, refused at start with wrangler's sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.targets import Target, refused_start


def seen(target: Target, method: str, path: str) -> tuple[int, str, str, str]:
    """Status, content type, Location and body of one request (redirects not followed)."""
    response = target.request(method, path, follow_redirects=False)
    return (
        response.status_code,
        response.headers.get("content-type", ""),
        response.headers.get("location", ""),
        response.text,
    )


def test_files_and_their_types(static_target: Target) -> None:
    assert seen(static_target, "GET", "/") == (200, "text/html; charset=utf-8", "", "<p>home</p>\n")
    assert seen(static_target, "GET", "/data.json") == (
        200, "application/json", "", '{"a": 1}\n',
    )  # fmt: skip
    types = {
        path: seen(static_target, "GET", path)[1]
        for path in ("/app.js", "/style.css", "/icon.svg", "/feed.xml", "/script.py", "/notes.md")
    }
    assert types == {
        "/app.js": "text/javascript; charset=utf-8",
        "/style.css": "text/css; charset=utf-8",
        "/icon.svg": "image/svg+xml",
        "/feed.xml": "application/xml",
        "/script.py": "",  # no Content-Type at all
        "/notes.md": "text/markdown; charset=utf-8",
    }
    assert seen(static_target, "GET", "/about") == (
        200, "text/html; charset=utf-8", "", "<p>about</p>\n",
    )  # fmt: skip
    assert seen(static_target, "GET", "/docs/")[3] == "<p>docs</p>\n"


def test_redirects_to_the_canonical_path(static_target: Target) -> None:
    assert seen(static_target, "GET", "/index.html")[:3] == (307, "", "/")
    assert seen(static_target, "GET", "/about.html")[:3] == (307, "", "/about")
    assert seen(static_target, "GET", "/docs")[:3] == (307, "", "/docs/")
    assert seen(static_target, "GET", "/docs/index.html")[:3] == (307, "", "/docs/")


def test_the_404_page_and_refused_methods(static_target: Target) -> None:
    assert seen(static_target, "GET", "/no/such/page") == (
        404, "text/html; charset=utf-8", "", "<p>not here</p>\n",
    )  # fmt: skip
    assert seen(static_target, "POST", "/about")[0] == 405
    assert seen(static_target, "POST", "/no/such/page")[0] == 405
    assert seen(static_target, "HEAD", "/about")[:2] == (200, "text/html; charset=utf-8")


@pytest.mark.parametrize(
    ("line", "sentence"),
    [
        ('binding = "ASSETS"', "Cannot use assets with a binding in an assets-only Worker."),
        ("run_worker_first = true", "Cannot set run_worker_first without a Worker script."),
    ],
)
def test_what_needs_a_worker_script_is_refused(tmp_path: Path, line: str, sentence: str) -> None:
    from compat.conftest import target_kind

    project = tmp_path / "static"
    (project / "public").mkdir(parents=True)
    (project / "public" / "index.html").write_text("<p>home</p>\n")
    (project / "wrangler.toml").write_text(
        'name = "refused-static"\ncompatibility_date = "2026-11-01"\n'
        f'[assets]\ndirectory = "./public"\n{line}\n'
    )
    said = refused_start(target_kind(), tmp_path / "state", project)
    assert sentence in said, said
