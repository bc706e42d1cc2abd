"""bench/run.py's report: issue 17's targets are judged from the measured figures (never
written by hand), every target names a workload and a figure that workload reports, and the
plain-request client of `http_under_load` (bench/pinger.py) times real requests."""

from __future__ import annotations

import http.server
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return load("run")


def goal(run: ModuleType, workload: str, figure: str) -> object:
    return next(g for g in run.goals() if g.workload == workload and g.figure == figure)


def test_every_target_names_a_workload_and_one_of_its_figures(run: ModuleType) -> None:
    for quick in (False, True):
        columns = {w.key: {c[0] for c in w.columns} for w in run.workloads(quick, False)}
        for g in run.goals():
            assert g.workload in columns, g
            assert g.figure in columns[g.workload], g
            if g.bound_key is not None:
                assert g.bound_key in columns[g.workload], g


def test_a_ratio_target_is_met_only_at_that_ratio_of_wrangler_devs_figure(
    run: ModuleType,
) -> None:
    g = goal(run, "throughput_k10", "steps_s")
    wrangler = run.Result({"steps_s": 100.0})
    assert g.met(run.Result({"steps_s": 2000.0}), wrangler) == "yes"
    assert g.met(run.Result({"steps_s": 1999.0}), wrangler) == "no"
    assert (
        g.describe(run.Result({"steps_s": 1.0}), wrangler) == "≥ 20x wrangler dev (= 2,000 steps/s)"
    )
    assert g.met(run.Result({"steps_s": 2000.0}), None) == "not measured"
    assert g.met(run.Result({"steps_s": 2000.0}), run.Result(skipped="failed")) == "not measured"


def test_bounds_are_strict_or_not_as_the_issue_words_them(run: ModuleType) -> None:
    under = goal(run, "create_to_complete", "p50_ms")  # "under 10 ms"
    assert under.met(run.Result({"p50_ms": 9.9}), None) == "yes"
    assert under.met(run.Result({"p50_ms": 10.0}), None) == "no"
    at_most = goal(run, "replay", "us_step_5000")  # "at most 5 us"
    assert at_most.met(run.Result({"us_step_5000": 5.0}), None) == "yes"
    assert at_most.met(run.Result(skipped="failed: TimeoutError"), None) == "not measured"


def test_the_memory_budget_is_the_figure_celld_reported_beside_it(run: ModuleType) -> None:
    peak = goal(run, "create_batch_sleepers", "peak_mib")
    assert peak.met(run.Result({"peak_mib": 900.0, "budget_mib": 812.5}), None) == "no"
    assert peak.met(run.Result({"peak_mib": 800.0, "budget_mib": 812.5}), None) == "yes"
    assert peak.describe(run.Result({"budget_mib": 812.5}), None) == "≤ budget = 812 MiB"
    assert peak.met(run.Result({"peak_mib": 800.0}), None) == "not measured"
    # wrangler dev runs fewer sleepers: its RSS is shown but not compared
    sleepers = next(w for w in run.workloads(False, False) if w.key == "create_batch_sleepers")
    celld = run.Result({"inst_s": 1200.0, "peak_mib": 700.0, "budget_mib": 812.5})
    rows = run.goals_table([(sleepers, celld, run.Result({"inst_s": 20.0, "peak_mib": 690.0}))])
    assert rows.splitlines()[2].endswith("| ≥ 1,000 inst/s | 1,200 | 20.0 | 60.0x | yes |")
    assert rows.splitlines()[3].endswith("| ≤ budget = 812 MiB | 700 | 690 |  | yes |")


def test_the_targets_table_lists_only_workloads_that_ran(run: ModuleType) -> None:
    chosen = {w.key: w for w in run.workloads(False, False)}
    results = [
        (chosen["wake_lag"], run.Result({"p99_ms": 80.0}), run.Result({"p99_ms": 2000.0})),
        (chosen["http_under_load"], run.Result(skipped="failed: boom"), None),
    ]
    lines = run.goals_table(results).splitlines()
    assert len(lines) == 4
    assert lines[2].endswith("| < 100 ms | 80.0 | 2,000 | 25.0x | yes |")
    assert "| failed: boom | (not asked: --wrangler) |  | not measured |" in lines[3]
    assert run.goals_table([(chosen["long_1000"], run.Result({"wall_s": 1.0}), None)]) == ""


def test_metric_reads_one_sample_of_prometheus_text(run: ModuleType) -> None:
    text = (
        "# HELP celld_instances x\n# TYPE celld_instances gauge\n"
        'celld_instances{status="complete"} 7\ncelld_instances{status="waiting"} 50000\n'
        "celld_cells_max_resident 753\n"
    )
    assert run.metric(text, "celld_cells_max_resident") == 753
    assert run.metric(text, "celld_instances", 'status="waiting"') == 50000
    assert run.metric(text, "celld_instances", 'status="queued"') is None


def test_the_pinger_times_each_request_until_told_to_stop() -> None:
    pinger = load("pinger")
    statuses = iter([200, 200, 503] + [200] * 10_000)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else headers and body wait out a delayed ACK

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(next(statuses))
            self.send_header("content-length", "4")
            self.end_headers()
            self.wfile.write(b"pong")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    try:
        samples = pinger.ping_until(f"http://127.0.0.1:{server.server_port}/ping", 5, stop)
    finally:
        server.shutdown()
    assert 10 <= len(samples) <= 80  # one every 5 ms for 0.3 s, give or take the machine
    assert [s[2] for s in samples[:3]] == [200, 200, 503]
    assert all(s[1] > 0 for s in samples)
    assert samples == sorted(samples, key=lambda s: s[0])
