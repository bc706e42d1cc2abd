"""celld.isolate.compat: a date-gated behaviour is on from its enable date or with its enable
flag, and off with its disable flag whatever the date."""

from __future__ import annotations

import pytest

from celld.isolate.compat import behaviours, compat_script


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
