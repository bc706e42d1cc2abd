"""Structured-clone values in step results and run() output, and values that cannot be kept
(return values, serialization and their size limits)."""

from __future__ import annotations

import pytest

from compat.differences import STEP_RESULT_LIMIT, SYMBOL_RESULT, difference
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


#: What status().output shows for run()'s value: its JSON form (Date as an ISO string, Map,
#: Set and RegExp as {}, undefined as null) with markers for BigInt and typed arrays.
OUTPUT_JSON = {
    "date": "2026-01-02T03:04:05.000Z",
    "map": {},
    "set": {},
    "regexp": {},
    "bigint": "[BigInt(12345678901234567890)]",
    "u8": "[Uint8Array(3 bytes)]",
    "undefined": None,
    "nested": {"when": "1970-01-01T00:00:00.000Z", "tags": {}, "list": [1, None, None]},
}


@pytest.mark.parametrize("kind", sorted(OUTPUT_JSON))
def test_run_output_as_json(sc: Scenario, kind: str) -> None:
    """run()'s value reaches status().output in its JSON form."""
    i = sc.create([{"do": "a"}], returns=kind)
    s = sc.finished(i)
    assert s["status"] == "complete"
    assert s["output"] == OUTPUT_JSON[kind]


NOT_SERIALISABLE = (
    "The execution of the Workflow instance was terminated, "
    'as the step "{}" returned a value which is not serialisable'
)


def test_step_result_function_not_serialisable(sc: Scenario) -> None:
    """A step returning a function errors the instance at once, without retries."""
    config = {"retries": {"limit": 3, "delay": 60000}}
    i = sc.create([{"do": "bad", "returns": "function", "config": config}])
    err = sc.failure(i)
    assert err["message"].endswith(NOT_SERIALISABLE.format("bad"))


@difference(wrangler=SYMBOL_RESULT)
def test_step_result_symbol_not_serialisable(sc: Scenario) -> None:
    """A step returning a Symbol errors the instance (production: symbols cannot be kept)."""
    config = {"retries": {"limit": 3, "delay": 60000}}
    i = sc.create([{"do": "bad", "returns": "symbol", "config": config}])
    if sc.pick(celld=True, wrangler=False):
        assert sc.failure(i)["message"].endswith(NOT_SERIALISABLE.format("bad"))
    else:
        sc.wait(1500)
        assert sc.status(i)["status"] == "running"
        sc.terminate(i)


TOO_LARGE = "Step huge-1 output is too large. Maximum allowed size is 1MiB."


@difference(wrangler=STEP_RESULT_LIMIT)
def test_step_result_too_large(sc: Scenario) -> None:
    """A step result over 1 MiB fails the attempt; with no retries left the instance errors."""
    config = {"retries": {"limit": 0, "delay": 0}}
    i = sc.create([{"do": "huge", "returns": "big", "config": config}, {"do": "after"}])
    s = sc.finished(i)
    assert s["status"] == sc.pick(celld="errored", wrangler="complete")
    if s["status"] == "errored":
        assert s["error"] == {"name": "Error", "message": "WorkflowInternalError: " + TOO_LARGE}


@difference(wrangler=STEP_RESULT_LIMIT)
def test_step_result_too_large_is_retried(sc: Scenario) -> None:
    """An oversized result counts as a failed attempt, so it is retried."""
    config = {"retries": {"limit": 1, "delay": 300, "backoff": "constant"}}
    i = sc.create([{"do": "huge", "returns": "big", "config": config, "catch": True}])
    sc.wait(300)
    s = sc.finished(i)
    assert s["status"] == "complete"
    first = s["output"]["results"][0]
    if sc.pick(celld=True, wrangler=False):
        assert first == {
            "caught": {"name": "Error", "message": "WorkflowInternalError: " + TOO_LARGE}
        }
    else:
        assert isinstance(first, str) and len(first) > 1024 * 1024


def test_step_result_just_under_limit(sc: Scenario) -> None:
    """A result of about 1000 KiB is accepted."""
    i = sc.create([{"do": "large", "returns": "big", "size": 1000 * 1024}, {"do": "b"}])
    s = sc.finished(i)
    assert s["status"] == "complete"
    assert len(s["output"]["results"][0]) == 1000 * 1024
