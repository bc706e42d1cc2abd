"""Version pinning rules (celld/engine/versions.py): a replay under another version fails
only when new code needs a step the history lacks while recorded steps stay unasked at a
quiet point; parallel branches (Promise.all, Promise.race) never trip it."""

from celld.engine.state import StepKey
from celld.engine.versions import ReplayCheck

A, B, NAP, C = (StepKey("do", "a", 1), StepKey("do", "b", 1), StepKey("sleep", "nap", 1),
                StepKey("do", "c", 1))  # fmt: skip
X = StepKey("do", "x", 1)


def check(*recorded: StepKey) -> ReplayCheck:
    return ReplayCheck(recorded, "v1", "v2")


def test_inserted_step_before_recorded_ones_is_a_mismatch_naming_both_sides() -> None:
    replay = check(A, B, NAP)
    assert replay.ask(A)
    assert not replay.ask(X)  # fresh: v2 inserted x between a and b
    found = replay.judge([X])
    assert found is not None
    assert found.unasked == (B, NAP)
    message = found.error().message
    assert found.error().name == "WorkflowFatalError"
    assert "started on version v1" in message and "replayed by version v2" in message
    assert '"x" (do #1)' in message
    assert '"b" (do #1), "nap" (sleep #1)' in message


def test_new_step_after_all_recorded_ones_runs() -> None:
    replay = check(A, B, NAP)
    for key in (A, B, NAP):
        assert replay.ask(key)
    assert replay.done
    assert not replay.ask(C)
    assert replay.judge([C]) is None


def test_promise_all_branch_reaching_a_new_step_first_is_judged_when_quiet() -> None:
    """Branch 1 (a then x) reaches its new step x while branch 2 still has recorded steps
    (b, nap) to replay: asked in the same quiet period, so x may run."""
    replay = check(A, B, NAP)
    replay.ask(A)
    replay.ask(X)  # branch 1: fresh, held
    replay.ask(B)  # branch 2 goes on from the journal in the same turn
    replay.ask(NAP)
    assert replay.judge([X]) is None


def test_promise_race_asks_every_contender() -> None:
    """race([do fast, sleep timer]) then a new step: both contenders were recorded and are
    asked by the race itself, whichever wins."""
    fast, timer = StepKey("do", "fast", 1), StepKey("sleep", "timer", 1)
    replay = check(fast, timer)
    replay.ask(fast)
    replay.ask(timer)
    assert replay.judge([StepKey("do", "after", 1)]) is None


def test_no_fresh_step_nothing_to_judge_and_asking_twice_is_harmless() -> None:
    replay = check(A, B)
    assert replay.ask(A) and replay.ask(A)
    assert replay.judge([]) is None
    assert not replay.done


def test_long_lists_are_shortened_in_the_error() -> None:
    recorded = [StepKey("do", f"s{i}", 1) for i in range(20)]
    replay = ReplayCheck(recorded, "v1", "v2")
    found = replay.judge([X])
    assert found is not None
    assert "and 15 more" in found.error().message
