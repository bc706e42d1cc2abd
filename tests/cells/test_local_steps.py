"""The local step rules (celld/engine/local.py): one table, followed by the engine in Python
and by js/workflows/step.js in QuickJS. The same cases go through both matchers, and every
case the table resolves locally is one the engine answers with that very value; then a
real run resolves its steps in JS, with the gate's tests (test_output_gate.py) watching
what leaves meanwhile."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import orjson
import quickjs

from celld.engine import Resolve
from celld.engine.local import ASK, RESOLVE, STEP_RULES_JSON, decide
from celld.engine.validation import MAX_PAYLOAD_BYTES
from tests.cells.test_start_commit import _commits_of_one
from tests.engine._engine_helpers import T0, do_key, new_machine

RULES_JS = Path(__file__).resolve().parents[2] / "js" / "workflows" / "rules.js"

SIZES = (
    0,
    3,
    MAX_PAYLOAD_BYTES - 1,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_BYTES + 1,
    3 * MAX_PAYLOAD_BYTES,
)


def _cases() -> list[dict[str, Any]]:
    flags = ("allowed", "mayBegin", "ok", "first", "alone")
    return [
        {**dict(zip(flags, values, strict=True)), "size": size}
        for values in itertools.product((True, False), repeat=len(flags))
        for size in SIZES
    ]


def _js_decide(cases: list[dict[str, Any]]) -> list[str]:
    context = quickjs.Context()
    context.eval(RULES_JS.read_text())
    decide_js = context.eval("globalThis.__celld_step_rules_decide")
    rules = context.eval(f"({STEP_RULES_JSON})")
    return [decide_js(rules, context.eval(f"({json.dumps(case)})")) for case in cases]


def test_both_sides_give_the_same_outcome_for_every_case() -> None:
    cases = _cases()
    python = [decide(case) for case in cases]
    assert _js_decide(cases) == python
    # the table does decide something: only the all-clear cases within the limit resolve
    resolved = [case for case, outcome in zip(cases, python, strict=True) if outcome == RESOLVE]
    assert resolved and all(case["size"] <= MAX_PAYLOAD_BYTES for case in resolved)
    assert all(
        case["allowed"] and case["mayBegin"] and case["ok"] and case["first"] and case["alone"]
        for case in resolved
    )
    assert decide({**resolved[0], "size": MAX_PAYLOAD_BYTES + 1}) == ASK


def test_the_engine_answers_every_local_resolve_with_the_value() -> None:
    """What JS resolves itself is what the engine decides for that report: the longest text
    JS may resolve (its bound is three bytes per UTF-16 unit) in ASCII and in characters of
    three UTF-8 bytes and of four (two units each)."""
    longest = MAX_PAYLOAD_BYTES // 3  # UTF-16 units of text JS may resolve itself
    for unit in ("a", "\u20ac", "\U0001f600"):
        units_each = len(unit.encode("utf-16-le")) // 2
        text = json.dumps(unit * ((longest - 2) // units_each), ensure_ascii=False)
        units = len(text.encode("utf-16-le")) // 2
        facts = {"allowed": True, "mayBegin": True, "ok": True, "first": True, "alone": True}
        assert decide({**facts, "size": units * 3}) == RESOLVE
        m = new_machine()
        m.step_begin("s", 1, 1, None, T0)
        assert m.attempt_succeeded(do_key("s"), 1, text, T0) == Resolve(text)


async def test_a_run_of_steps_resolves_in_js_and_commits_them_in_batches(tmp_path: Path) -> None:
    """BenchWorkflow's steps after the first share a config: JS resolves them itself, many
    in one turn, and the host commits the batch (answered one by one, two steps went in a
    write at best: test_start_commit.py). Every step is recorded and logged in order."""
    steps = 40
    commits, done, logged = await _commits_of_one(tmp_path / "state", steps)
    assert orjson.loads(done["output"]) == {
        "steps": steps, "sum": steps * (steps - 1) // 2,
        "finished_at": orjson.loads(done["output"])["finished_at"],
    }  # fmt: skip
    assert commits < steps // 2, commits
    assert logged.count("step_completed") == steps
    assert logged[-1] == "workflow_completed"
