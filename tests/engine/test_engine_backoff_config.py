import json

import pytest

from celld.engine import StepConfig, StepConfigError, resolve_step_config, retry_delay_ms
from celld.engine.backoff import MAX_RETRY_DELAY_MS


def test_backoff_formulas():
    assert [retry_delay_ms("constant", 10_000, n) for n in (1, 2, 3)] == [10_000] * 3
    assert [retry_delay_ms("linear", 10_000, n) for n in (1, 2, 3)] == [10_000, 20_000, 30_000]
    assert [retry_delay_ms("exponential", 10_000, n) for n in range(1, 6)] == [
        10_000,
        20_000,
        40_000,
        80_000,
        160_000,
    ]
    assert retry_delay_ms("exponential", 0, 7) == 0
    assert retry_delay_ms("exponential", 1000, 10_000) == MAX_RETRY_DELAY_MS


def test_defaults():
    cfg = resolve_step_config("s", None)
    got = (cfg.limit, cfg.delay_ms, cfg.backoff, cfg.timeout_ms)
    assert got == (5, 10_000, "exponential", 600_000)
    assert cfg.to_context() == {
        "retries": {"limit": 5, "delay": 10_000, "backoff": "exponential"},
        "timeout": "10 minutes",
    }


def test_user_values_keep_their_form_in_context_and_backoff_defaults_to_exponential():
    cfg = resolve_step_config(
        "s", {"retries": {"limit": 3, "delay": "1 second"}, "timeout": "30 seconds"}
    )
    assert cfg.delay_ms == 1000 and cfg.timeout_ms == 30_000 and cfg.backoff == "exponential"
    assert cfg.to_context() == {
        "retries": {"limit": 3, "delay": "1 second", "backoff": "exponential"},
        "timeout": "30 seconds",
    }


def test_dynamic_delay_marker_and_flag():
    a = resolve_step_config("s", {"retries": {"limit": 2, "delay": {"$fn": True}}})
    b = resolve_step_config("s", {"retries": {"limit": 2}}, dynamic_delay=True)
    assert a == b and a.dynamic_delay and a.delay_ms is None
    assert "delay" not in a.to_context()["retries"]
    assert json.loads(a.to_json())["delay"] == "[dynamic]"
    assert StepConfig.from_json(a.to_json()) == a


def test_json_round_trip():
    cfg = resolve_step_config(
        "s",
        {
            "retries": {"limit": 0, "delay": 0, "backoff": "linear"},
            "timeout": 5,
            "sensitive": "output",
        },
    )
    assert StepConfig.from_json(cfg.to_json()) == cfg
    assert cfg.to_context()["sensitive"] == "output"


@pytest.mark.parametrize(
    "raw",
    [
        {"retries": {"limit": 3}},
        {"retries": {"delay": 10}},
        {"retries": {"limit": -1, "delay": 10}},
        {"retries": {"limit": 10_001, "delay": 10}},
        {"retries": {"limit": 1.5, "delay": 10}},
        {"retries": {"limit": True, "delay": 10}},
        {"retries": {"limit": 1, "delay": -1}},
        {"retries": {"limit": 1, "delay": "10s"}},
        {"retries": {"limit": 1, "delay": None}},
        {"retries": {"limit": 1, "delay": 10, "backoff": "fibonacci"}},
        {"retries": {"limit": 1, "delay": 10, "jitter": True}},
        {"retries": "lots"},
        {"timeout": 0},
        {"timeout": "0"},
        {"timeout": "forever"},
        {"timeout": None},
        {"sensitive": "input"},
        {"retry": {}},
        "config",
    ],
)
def test_invalid_configs(raw):
    with pytest.raises(StepConfigError) as info:
        resolve_step_config("my step", raw)
    assert str(info.value) == (
        'Step config for "my step" is in a invalid format. '
        "See https://developers.cloudflare.com/workflows/build/sleeping-and-retrying/"
    )
    assert info.value.error.name == "WorkflowFatalError"


def test_limit_bounds_accepted():
    assert resolve_step_config("s", {"retries": {"limit": 10_000, "delay": 0}}).limit == 10_000
    assert resolve_step_config("s", {"retries": {"limit": 2.0, "delay": 0}}).limit == 2
