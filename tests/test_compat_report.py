"""compat.report's check, which fails CI when celld and wrangler dev disagree on a scenario
that declares no difference (the runs here are records as compat/conftest.py writes them)."""

from __future__ import annotations

from typing import Any

from compat.report import check, render


def record(scenario: str, outcome: str = "passed", difference: str = "") -> dict[str, Any]:
    detail = "" if outcome == "passed" else "AssertionError: no"
    return {"id": scenario, "module": "test_x", "doc": "what it checks", "outcome": outcome,
            "detail": detail, "difference": difference}  # fmt: skip


def runs(celld: list[dict[str, Any]], wrangler: list[dict[str, Any]]) -> dict[str, Any]:
    return {"celld": {"target": "celld", "scenarios": celld},
            "wrangler": {"target": "wrangler", "scenarios": wrangler}}  # fmt: skip


def test_agreeing_targets_pass_the_check() -> None:
    both = [record("test_a"), record("test_b", "failed")]
    assert check(runs(both, both)) == []


def test_a_scenario_passing_on_one_target_only_fails_the_check() -> None:
    problems = check(runs([record("test_a")], [record("test_a", "failed")]))
    assert len(problems) == 1
    assert problems[0].startswith("test_a: passes on one target only")
    assert "wrangler: failed AssertionError: no" in problems[0]


def test_a_declared_difference_is_allowed() -> None:
    celld = [record("test_a", difference="wrangler dev says running")]
    wrangler = [record("test_a", "skipped", difference="wrangler dev says running")]
    assert check(runs(celld, wrangler)) == []


def test_a_scenario_run_on_one_target_only_or_a_missing_run_fails_the_check() -> None:
    problems = check(runs([record("test_a"), record("test_b")], [record("test_a")]))
    assert problems == ["test_b: ran on celld, not on wrangler"]
    only_celld = {"celld": {"target": "celld", "scenarios": [record("test_a")]}}
    assert check(only_celld) == ["not run on wrangler: no results recorded"]


def test_the_report_names_the_run_that_produced_it() -> None:
    text = render(runs([record("test_a")], [record("test_a")]), "`.ci/run`")
    assert "Produced by `.ci/run` at commit `" in text
    assert "| 1 | `test_x::test_a` | what it checks | pass | pass |  |" in text
