"""The crash harness, short form: random SIGKILLs under load lose nothing acknowledged."""

from __future__ import annotations

from tests.crash_harness import run_harness


def test_random_sigkills_under_load_lose_nothing() -> None:
    report = run_harness(instances=60, kills=3, seed=7, timeout=120)
    assert report.problems == []
    assert report.executions >= 60 * 6  # a, b twice, c1, c2, d for every instance


def test_sigkills_and_full_disks_lose_nothing() -> None:
    # (no skip: without a C compiler for the full-disk shim this fails, saying so)
    report = run_harness(instances=40, kills=2, seed=11, timeout=150, disk_full=3)
    assert report.problems == []
    assert report.executions >= 40 * 6
