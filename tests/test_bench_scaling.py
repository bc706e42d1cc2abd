"""bench/scaling.py's tables: each rate's scaling factor is taken against the one-process
row for `--workers` rows and the one-node row for PostgreSQL rows (never across kinds,
never against a row of 2), a workload or baseline not measured shows as such rather than
as a number, and the CPU table gives the cores and the machine's idle share per cell."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def scaling() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scaling", BENCH / "scaling.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


def figure(scaling: ModuleType, rate: float, p99: float | None = 10.0) -> object:
    return scaling.Figure(
        rate=rate, p99_ms=p99, celld_ms=1.5, db_ms=0.25, celld_cores=0.9, db_cores=0.1, idle=0.4
    )


def row(scaling: ModuleType, key: str, **rates: float) -> object:
    config = next(c for c in scaling.CONFIGS if c.key == key)
    result = scaling.Row(config, load_before=1.0, load_after=2.5)
    for workload, rate in rates.items():
        result.figures[workload] = figure(scaling, rate)
    return result


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_factors_are_against_the_first_row_of_the_same_kind(scaling: ModuleType) -> None:
    rows = [
        row(scaling, "workers1", steps=200.0, http=1000.0),
        row(scaling, "workers2", steps=300.0, http=1800.0),
        row(scaling, "pg1", steps=100.0, http=900.0),
        row(scaling, "pg2", steps=150.0, http=900.0),
        row(scaling, "pg3", steps=250.0, http=450.0),
    ]
    lines = scaling.table(rows, ["steps", "http"])
    assert len(lines) == 2 + len(rows)
    body = {cells(line)[0]: cells(line) for line in lines[2:]}
    # configuration, load, then (rate, p99, CPU) per workload
    assert body["`--workers 2`, SQLite"][2] == "300 (1.50x)"
    assert body["`--workers 2`, SQLite"][5] == "1800 (1.80x)"
    assert body["PostgreSQL, 2 nodes"][2] == "150 (1.50x)"  # against pg1, not workers1
    assert body["PostgreSQL, 3 nodes"][2] == "250 (2.50x)"
    assert body["PostgreSQL, 3 nodes"][5] == "450 (0.50x)"
    assert body["PostgreSQL, 1 node"][2] == "100 (1.00x)"
    assert body["`--workers 1`, SQLite"][1] == "1.0 → 2.5"
    assert body["`--workers 1`, SQLite"][3:5] == ["10.0", "1.50 + 0.25"]


def test_no_factor_without_the_one_process_or_one_node_row(scaling: ModuleType) -> None:
    lines = scaling.table([row(scaling, "pg2", rpc=80.0), row(scaling, "pg3", rpc=90.0)], ["rpc"])
    assert [cells(line)[2] for line in lines[2:]] == ["80.0", "90.0"]


def test_a_workload_not_measured_or_without_p99_shows_a_dash(scaling: ModuleType) -> None:
    partial = row(scaling, "workers1", steps=200.0)
    partial.figures["http"] = figure(scaling, 1000.0, p99=None)
    line = cells(scaling.table([partial], ["steps", "rpc", "http"])[2])
    assert line[5:8] == ["-", "-", "-"]  # rpc not measured
    assert line[8:10] == ["1000 (1.00x)", "-"]  # http measured, no p99


def test_the_cpu_table_gives_cores_and_machine_idle_per_cell(scaling: ModuleType) -> None:
    lines = scaling.cpu_table([row(scaling, "pg2", steps=150.0)], ["steps", "rpc"])
    assert cells(lines[0]) == [
        "configuration",
        "steps: cores celld + db, machine idle",
        "rpc: cores celld + db, machine idle",
    ]
    assert cells(lines[2]) == ["PostgreSQL, 2 nodes", "0.90 + 0.10, 40 % idle", "-"]


def test_connections_are_split_evenly_over_the_nodes(scaling: ModuleType) -> None:
    assert scaling.split(16, 3) == [6, 5, 5]
    assert scaling.split(8, 2) == [4, 4]
    assert scaling.split(2, 3) == [1, 1, 1]  # every node gets load
