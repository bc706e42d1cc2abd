"""The slow-disk shim (tests/slowdisk) is in the path of SQLite's commits under its
folder, and only there: counted by the shim itself, not timed."""

from __future__ import annotations

from pathlib import Path

from tests.slowdisk import build, calls_slowed, env
from tests.slowdisk.measure import commit_times


def test_the_shim_slows_every_commit_under_its_folder(tmp_path: Path) -> None:
    count = tmp_path / "count"
    variables = env(build(tmp_path / "shim"), tmp_path / "slow", write_ms=1, count_file=count)
    commit_times(tmp_path / "slow", 10, variables)
    # the first write of each of the 10 commits (and of the table's creation)
    assert calls_slowed(count) >= 10


def test_the_shim_leaves_other_folders_alone(tmp_path: Path) -> None:
    count = tmp_path / "count"
    variables = env(
        build(tmp_path / "shim"), tmp_path / "slow", write_ms=1, sync_ms=1, count_file=count
    )
    commit_times(tmp_path / "elsewhere", 10, variables)
    assert calls_slowed(count) == 0


def test_flushes_are_slowed_when_asked(tmp_path: Path) -> None:
    count = tmp_path / "count"
    variables = env(build(tmp_path / "shim"), tmp_path / "slow", sync_ms=1, count_file=count)
    commit_times(tmp_path / "slow", 10, variables)
    assert calls_slowed(count) >= 10  # synchronous=FULL: one flush of the WAL per commit


def test_a_sibling_folder_that_shares_the_name_is_not_under_it(tmp_path: Path) -> None:
    count = tmp_path / "count"
    variables = env(build(tmp_path / "shim"), tmp_path / "slow", write_ms=1, count_file=count)
    commit_times(tmp_path / "slower", 10, variables)
    assert calls_slowed(count) == 0
