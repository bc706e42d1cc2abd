"""Structured-clone values in step results and run() output, and values that cannot be kept
(spec 1.2 "Return values and serialization", section 3 sizes)."""

from __future__ import annotations

import pytest

from compat.scenario import Scenario

CLONED = {
    "date": {"type": "Date", "value": "2026-01-02T03:04:05.000Z"},
    "map": {
        "type": "Map",
        "value": [["a", 1], ["b", {"type": "Date", "value": "1970-01-01T00:00:00.000Z"}]],
    },  # noqa: E501
    "set": {"type": "Set", "value": [1, "two", {"type": "bigint", "value": "3"}]},
    "bigint": {"type": "bigint", "value": "12345678901234567890"},
    "u8": {"type": "Uint8Array", "value": [1, 2, 255]},
    "f64": {"type": "Float64Array", "value": [0.5, -1]},
    "undefined": {"type": "undefined"},
    "regexp": {"type": "RegExp", "value": "/ab+c/gi"},
    "nested": {
        "when": {"type": "Date", "value": "1970-01-01T00:00:00.000Z"},
        "tags": {"type": "Set", "value": ["x"]},
        "list": [1, {"type": "undefined"}, None],
    },
}


@pytest.mark.parametrize("kind", sorted(CLONED))
def test_step_result_structured_clone(sc: Scenario, kind: str) -> None:
    """A step may return any structured-cloneable value; run() gets it back with its type."""
    i = sc.create([{"do": f"make-{kind}", "returns": kind}])
    assert sc.results(i) == [CLONED[kind]]


@pytest.mark.parametrize("kind", ["date", "map", "bigint", "u8"])
def test_step_result_type_survives_replay(sc: Scenario, kind: str) -> None:
    """A typed step result read back from storage after a sleep keeps its type."""
    i = sc.create([{"do": f"make-{kind}", "returns": kind}, {"sleep": "s", "duration": 500}])
    sc.wait(500)
    assert sc.results(i) == [CLONED[kind], {"slept": "s"}]


@pytest.mark.parametrize("kind", ["date", "map", "set", "bigint", "undefined"])
def test_run_output_structured_clone(sc: Scenario, kind: str) -> None:
    """run() may return a structured-cloneable value; status().output has its type."""
    i = sc.create([{"do": "a"}], returns=kind)
    assert sc.output(i) == CLONED[kind]


NOT_SERIALISABLE = (
    "The execution of the Workflow instance was terminated, "
    'as the step "{}" returned a value which is not serialisable'
)


@pytest.mark.parametrize("kind", ["function", "symbol"])
def test_step_result_not_serialisable(sc: Scenario, kind: str) -> None:
    """A step returning a function or a symbol errors the instance at once, without retries."""
    i = sc.create(
        [{"do": "bad", "returns": kind, "config": {"retries": {"limit": 3, "delay": 60000}}}]
    )
    err = sc.failure(i)
    assert err["message"].endswith(NOT_SERIALISABLE.format("bad"))


def test_step_result_too_large(sc: Scenario) -> None:
    """A step result over 1 MiB fails the attempt; with no retries left the instance errors."""
    i = sc.create(
        [{"do": "huge", "returns": "big", "config": {"retries": {"limit": 0, "delay": 0}}}]
    )
    err = sc.failure(i)
    assert err == {
        "name": "Error",
        "message": "WorkflowInternalError: Step huge-1 output is too large. "
        "Maximum allowed size is 1MiB.",
    }


def test_step_result_too_large_is_retried(sc: Scenario) -> None:
    """An oversized result counts as a failed attempt, so it is retried."""
    config = {"retries": {"limit": 1, "delay": 300, "backoff": "constant"}}
    i = sc.create([{"do": "huge", "returns": "big", "config": config, "catch": True}])
    sc.wait(300)
    (r,) = sc.results(i)
    assert r["caught"]["message"].endswith(
        "Step huge-1 output is too large. Maximum allowed size is 1MiB."
    )  # noqa: E501


def test_step_result_just_under_limit(sc: Scenario) -> None:
    """A result of about 1000 KiB is accepted."""
    i = sc.create([{"do": "large", "returns": "big", "size": 1000 * 1024}, {"do": "b"}])
    s = sc.finished(i)
    assert s["status"] == "complete"
    assert len(s["output"]["results"][0]) == 1000 * 1024
