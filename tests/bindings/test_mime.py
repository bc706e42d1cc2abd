"""celld.bindings.mime: an asset's Content-Type as wrangler dev gives it, the same on every
machine (the host's /etc/mime.types is not read), charset only on text/* types."""

from __future__ import annotations

import pytest

from celld.bindings.mime import content_type


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("app.js", "text/javascript; charset=utf-8"),
        ("lib.mjs", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("README.md", "text/markdown; charset=utf-8"),
        ("data.json", "application/json"),
        ("icon.svg", "image/svg+xml"),
        ("feed.xml", "application/xml"),
        ("font.woff2", "font/woff2"),
        ("photo.webp", "image/webp"),
        ("UPPER.PNG", "image/png"),
        ("clip.ra", "audio/x-pn-realaudio"),  # not recorded: Python's own table
        ("script.py", None),  # recorded: wrangler dev sends no Content-Type
        ("no-extension", None),
        ("odd.zzzz", None),
    ],
)
def test_content_types(name: str, expected: str | None) -> None:
    assert content_type(name) == expected
