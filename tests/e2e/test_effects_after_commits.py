"""Effects never outrun commits: nothing a Workflow sends out carries a value that is not
durable yet. The recorder harness (tests/recorder_harness.py) SIGKILLs celld the moment
an effect arrives, on a slow disk (each commit waits 40 ms before its data reaches the
file), restarts it and checks every value the effect carried against the journal: a
result that was not durable runs again and draws a new random value.

Short form here (10 trials per scenario: every trial is a chance for the leak, and a
leaky celld leaks in most of them); long form, 100 trials each, with
CELLD_LONG_TESTS=1 (or `python -m tests.recorder_harness --scenario S --trials 100`).
"""

from __future__ import annotations

import os

import pytest

from tests.recorder_harness import Report, run_trials

LONG = os.environ.get("CELLD_LONG_TESTS") == "1"
long_form = pytest.mark.skipif(not LONG, reason="long form: set CELLD_LONG_TESTS=1")

SHORT_TRIALS = 10
LONG_TRIALS = 100


def assert_no_leak(report: Report, trials: int) -> None:
    # the slow disk was in the commits' path, and enough trials sent an effect (and
    # killed celld) to have tested something
    assert report.calls_slowed > 0, report.summary()
    assert report.killed >= trials // 2, report.summary()
    assert report.leaked == 0, f"{report.summary()}\n" + "\n".join(report.examples[:5])


def between_steps(trials: int) -> None:
    """A log line between two steps, the second started on its own and finished in the
    same turn: the effect that carries its result leaves only once it is durable."""
    assert_no_leak(run_trials("between-steps", trials), trials)


def without_log_line(trials: int) -> None:
    """The same steps without the log line between them."""
    assert_no_leak(run_trials("between-steps-quiet", trials), trials)


def warm_isolate(trials: int) -> None:
    """A run that takes the warm isolate of a run that just ended sends nothing derived
    from that run's results (module state) before they are durable."""
    assert_no_leak(run_trials("warm-secret", trials), trials)


def test_a_log_line_between_steps_lets_no_effect_out_before_the_commit() -> None:
    between_steps(SHORT_TRIALS)


def test_steps_without_a_log_line_let_no_effect_out_before_the_commit() -> None:
    without_log_line(SHORT_TRIALS)


def test_a_warm_isolate_sends_nothing_of_a_result_before_its_commit() -> None:
    warm_isolate(SHORT_TRIALS)


@long_form
@pytest.mark.timeout(1800)
def test_long_a_log_line_between_steps() -> None:
    between_steps(LONG_TRIALS)


@long_form
@pytest.mark.timeout(1800)
def test_long_steps_without_a_log_line() -> None:
    without_log_line(LONG_TRIALS)


@long_form
@pytest.mark.timeout(1800)
def test_long_a_warm_isolate() -> None:
    warm_isolate(LONG_TRIALS)
