"""The rules of test modifiers (celld.cells.modifiers), as Cloudflare's introspection has
them: selectors by name and index, attempts taken in order by `times`, conflicts."""

from __future__ import annotations

import json

import pytest

from celld.cells.modifiers import Mocked, ModifierError, Modifiers, parse_operation
from celld.engine import ErrorInfo


def op(raw: dict) -> object:
    return parse_operation(raw, lambda value: json.dumps(value))


def modifiers(*raws: dict) -> Modifiers:
    m = Modifiers()
    for raw in raws:
        m.apply(op(raw))  # type: ignore[arg-type]
    return m


def test_errors_and_timeouts_share_one_attempt_count_and_come_before_the_result() -> None:
    m = modifiers(
        {
            "type": "mockStepError",
            "step": {"name": "s"},
            "error": {"name": "TypeError", "message": "x"},
            "times": 2,
        },
        {"type": "forceStepTimeout", "step": "s", "times": 1},
        {"type": "mockStepResult", "step": {"name": "s", "index": 1}, "stepResult": {"ok": 1}},
    )
    error = Mocked("error", error=ErrorInfo("TypeError", "x"))
    assert [m.attempt("s", 1, n) for n in (1, 2, 3, 4)] == [
        error,
        error,
        Mocked("timeout"),
        Mocked("result", value='{"ok": 1}'),
    ]
    assert m.attempt("s", 2, 1) is None  # the second call of "s" is another step
    assert m.attempt("t", 1, 1) is None


def test_without_times_every_attempt_is_taken() -> None:
    m = modifiers({"type": "forceStepTimeout", "step": "s"})
    assert all(m.attempt("s", 1, n) == Mocked("timeout") for n in range(1, 8))
    m = modifiers({"type": "mockStepError", "step": "s", "error": "down"})
    assert m.attempt("s", 1, 9) == Mocked("error", error=ErrorInfo("Error", "down"))


def test_sleeps_retry_delays_and_event_timeouts_select_by_name_and_index() -> None:
    m = modifiers(
        {"type": "disableSleeps", "steps": [{"name": "a"}, {"name": "b", "index": 2}]},
        {"type": "disableRetryDelays", "steps": ["c"]},
        {"type": "forceEventTimeout", "step": {"name": "w", "index": 3}},
    )
    assert m.sleep_disabled("a", 1) and m.sleep_disabled("b", 2)
    assert not m.sleep_disabled("a", 2) and not m.sleep_disabled("b", 1)
    assert m.retry_delay_disabled("c", 1) and not m.retry_delay_disabled("d", 1)
    assert m.event_timeout("w", 3) and not m.event_timeout("w", 1)
    every = modifiers({"type": "disableSleeps"}, {"type": "disableRetryDelays"})
    assert every.sleep_disabled("any", 7) and every.retry_delay_disabled("any", 7)


@pytest.mark.parametrize(
    "second",
    [
        {"type": "mockStepResult", "step": "s", "stepResult": 2},
        {"type": "mockStepError", "step": "s", "error": "e"},
        {"type": "forceStepTimeout", "step": "s"},
    ],
)
def test_nothing_more_for_a_step_after_its_result(second: dict) -> None:
    m = modifiers({"type": "mockStepResult", "step": "s", "stepResult": 1})
    with pytest.raises(ModifierError) as refused:
        m.apply(op(second))  # type: ignore[arg-type]
    assert refused.value.status == 409
    assert m.attempt("s", 1, 1) == Mocked("result", value="1")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": "nope"}, "one of"),
        ({"type": "mockStepResult", "step": "s"}, "stepResult"),
        (
            {"type": "mockStepError", "step": "s", "error": {"name": "", "message": "m"}},
            "error.name",
        ),
        ({"type": "mockStepError", "step": "s", "error": 5}, "error must be"),
        ({"type": "forceStepTimeout", "step": {"name": "s", "index": 1.5}}, "index"),
        ({"type": "forceStepTimeout", "step": "s", "times": 0}, "times"),
        ({"type": "forceStepTimeout", "step": "s", "times": True}, "times"),
        ({"type": "disableSleeps", "steps": "a"}, "array"),
        ({"type": "forceEventTimeout", "step": {"name": "x" * 300}}, "step name"),
        ({"type": "mockEvent", "event": {"type": "a b"}}, "invalid_event_type"),
        ({"type": "mockEvent", "event": {"type": "big", "payload": "x" * (1 << 21)}}, "payload"),
        ("mockEvent", "object"),
    ],
)
def test_bad_operations_say_what_is_wrong(raw: object, message: str) -> None:
    with pytest.raises(ModifierError) as refused:
        op(raw)  # type: ignore[arg-type]
    assert refused.value.status == 400 and message in refused.value.message
