"""The number of processes `celld run` picks without `--workers` (celld.cluster.default), on
real state folders and configs; the e2e side is tests/e2e/test_default_workers.py."""

from __future__ import annotations

import json
from pathlib import Path

from celld.cluster.default import cores, default_workers
from celld.cluster.placement import RECORD_FILE, settle_workers


def test_a_fresh_folder_gets_one_process_per_core(tmp_path: Path) -> None:
    chosen = default_workers([tmp_path / "state"], None)
    assert chosen.count == cores() and chosen.said is None
    assert default_workers([tmp_path / "state"], "sqlite").count == cores()


def test_a_sharded_folder_without_instances_may_take_any_number(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / RECORD_FILE).write_text(json.dumps({"workers": 7}))
    assert default_workers([state], None).count == cores()
    assert settle_workers(state, cores()) == cores()  # not refused: nothing to strand
    assert json.loads((state / RECORD_FILE).read_text()) == {"workers": cores()}


def test_postgresql_is_one_process_quietly(tmp_path: Path) -> None:
    chosen = default_workers([tmp_path], "postgresql://celld@127.0.0.1:5432/celld")
    assert chosen.count == 1 and chosen.said is None
