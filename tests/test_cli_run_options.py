"""`celld run`'s interpreter switch interval (CELLD_SWITCH_INTERVAL_MS)."""

from __future__ import annotations

import click
import pytest

from celld.cli.main import DEFAULT_SWITCH_INTERVAL_MS, switch_interval_s


def test_the_default_switch_interval_is_half_a_millisecond() -> None:
    assert switch_interval_s(None) == switch_interval_s("") == DEFAULT_SWITCH_INTERVAL_MS / 1000
    assert DEFAULT_SWITCH_INTERVAL_MS == 0.5


def test_a_configured_switch_interval_is_read_in_milliseconds() -> None:
    assert switch_interval_s("5") == 0.005


@pytest.mark.parametrize("bad", ["fast", "0", "-1", "1000", "nan"])
def test_a_bad_switch_interval_is_refused_by_name(bad: str) -> None:
    with pytest.raises(click.ClickException) as caught:
        switch_interval_s(bad)
    assert "CELLD_SWITCH_INTERVAL_MS" in caught.value.message
