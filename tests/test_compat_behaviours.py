"""celld.project.compat: a date-gated behaviour is on from its enable date or with its enable
flag, and off with its disable flag whatever the date."""

from __future__ import annotations

from pathlib import Path

import pytest

from celld.isolate.compat import compat_script
from celld.project import load_config
from celld.project.compat import behaviours


@pytest.mark.parametrize(
    ("date", "flags", "blob"),
    [
        (None, [], False),
        ("2026-03-16", [], False),
        ("2026-03-17", [], True),
        ("2026-11-01", [], True),
        ("2025-10-08", ["websocket_standard_binary_type"], True),
        ("2026-11-01", ["no_websocket_standard_binary_type"], False),
        (
            "2026-11-01",
            ["websocket_standard_binary_type", "no_websocket_standard_binary_type"],
            False,
        ),
    ],
)
def test_websocket_binary_type_by_date_and_flags(
    date: str | None, flags: list[str], blob: bool
) -> None:
    assert behaviours(date, flags)["websocketBlob"] is blob


def test_the_script_hands_the_choice_to_the_runtime() -> None:
    script = compat_script("2026-11-01", ())
    assert '"websocketBlob": true' in script.source
    assert "__celld_compat" in script.source


@pytest.mark.parametrize(
    ("date", "flags", "json_bodies", "navigation_only"),
    [
        ("2024-03-17", [], False, False),
        ("2024-03-18", [], True, False),
        ("2025-04-01", [], True, True),
        ("2024-01-01", ["queues_json_messages", "assets_navigation_prefers_asset_serving"],
         True, True),
        ("2026-01-01", ["no_queues_json_messages", "assets_navigation_has_no_effect"],
         False, False),
    ],
)  # fmt: skip
def test_host_behaviours_follow_the_same_rule(
    date: str, flags: list[str], json_bodies: bool, navigation_only: bool
) -> None:
    chosen = behaviours(date, flags)
    assert chosen["queuesJsonMessages"] is json_bodies
    assert chosen["assetsNavigationPrefersAssetServing"] is navigation_only


def test_the_assets_navigation_flag_reaches_the_resolved_project(tmp_path: Path) -> None:
    """`assets_navigation_has_no_effect` keeps a 2025-04-01 single-page app answering every
    unmatched request with index.html, as before that date."""
    (tmp_path / "index.js").write_text("export default { fetch() { return new Response(); } };")
    (tmp_path / "public").mkdir()
    (tmp_path / "public" / "index.html").write_text("<p>app</p>")
    base = (
        'name = "spa"\nmain = "index.js"\ncompatibility_date = "2025-06-01"\n'
        '[assets]\ndirectory = "public"\nnot_found_handling = "single-page-application"\n'
    )
    (tmp_path / "wrangler.toml").write_text(base)
    assert load_config(tmp_path / "wrangler.toml").bindings.assets.navigation_only_spa is True
    flagged = 'compatibility_flags = ["assets_navigation_has_no_effect"]\n' + base
    (tmp_path / "wrangler.toml").write_text(flagged)
    assert load_config(tmp_path / "wrangler.toml").bindings.assets.navigation_only_spa is False
