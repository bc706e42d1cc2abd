"""bench/run.py's report: issue 24's targets (and issue 17's remaining ones) are judged from
the measured figures (never written by hand), every target names a workload and a figure that
workload reports, every issue 24 target is listed whether its workload ran or not, the header
gives the machine's load, and the plain-request client of `http_under_load`
(bench/pinger.py) times real requests."""

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
    every = run.goals() + run.earlier_goals()
    return next(g for g in every if g.workload == workload and g.figure == figure)


def test_every_target_names_a_workload_and_one_of_its_figures(run: ModuleType) -> None:
    for quick in (False, True):
        columns = {w.key: {c[0] for c in w.columns} for w in run.workloads(quick, False)}
        for g in run.goals() + run.earlier_goals():
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
    rows = run.goals_table(
        [(sleepers, celld, run.Result({"inst_s": 20.0, "peak_mib": 690.0}))], run.earlier_goals()
    )
    assert rows.splitlines()[2].endswith("| ≥ 1,000 inst/s | 1,200 | 20.0 | 60.0x | yes |")
    assert rows.splitlines()[3].endswith("| ≤ budget = 812 MiB | 700 | 690 |  | yes |")


def test_the_earlier_targets_table_lists_only_workloads_that_ran(run: ModuleType) -> None:
    chosen = {w.key: w for w in run.workloads(False, False)}
    results = [
        (chosen["wake_lag"], run.Result({"p99_ms": 80.0}), run.Result({"p99_ms": 2000.0})),
        (chosen["replay"], run.Result(skipped="failed: boom"), None),
    ]
    lines = run.goals_table(results, run.earlier_goals()).splitlines()
    assert len(lines) == 4
    assert lines[2].endswith(
        "| ≤ 5.00 us | failed: boom | (not asked: --wrangler) |  | not measured |"
    )
    assert lines[3].endswith("| < 100 ms | 80.0 | 2,000 | 25.0x | yes |")
    long = [(chosen["long_1000"], run.Result({"wall_s": 1.0}), None)]
    assert run.goals_table(long, run.earlier_goals()) == ""


def test_every_issue_24_target_is_listed_run_or_not(run: ModuleType) -> None:
    every = {w.key: w for w in run.workloads(False, False)}
    results = [(every["wake_due_at_once"], run.Result({"p99_ms": 240.0}), None)]
    lines = run.goals_table(results, run.goals(), every).splitlines()[2:]
    assert len(lines) == len(run.goals())
    judged = [line for line in lines if not line.endswith("| not run |")]
    assert len(judged) == 1 and judged[0].endswith(
        "| < 250 ms | 240 | (not asked: --wrangler) |  | yes |"
    )
    million = next(line for line in lines if "hibernated_million" in line)
    assert "| opt-in: `--only hibernated_million` |" in million
    # the report repeats issue 24's steps/s and plain-HTTP targets nowhere else
    earlier = {(g.workload, g.figure) for g in run.earlier_goals()}
    assert not earlier & {(g.workload, g.figure) for g in run.goals()}


def test_a_target_at_a_size_is_judged_only_at_that_size(run: ModuleType) -> None:
    rss = goal(run, "sleepers_one_client", "rss_mb")  # "20,000 hibernated: < 100 MB"
    assert rss.met(run.Result({"n": 20_000, "rss_mb": 99.0}), None) == "yes"
    assert rss.met(run.Result({"n": 20_000, "rss_mb": 100.0}), None) == "no"
    small = rss.met(run.Result({"n": 5_000, "rss_mb": 60.0}), None)
    assert small == "not judged: ran 5,000, the target is at 20,000"
    million = goal(run, "hibernated_million", "rss_mb")
    assert million.met(run.Result({"n": 1_000_000, "rss_mb": 499.0}), None) == "yes"
    # a run that stopped at its deadline has no RSS once asleep: not measured, not "yes"
    assert million.met(run.Result({"n": 1_000_000, "reached": 700_000}), None) == "not measured"


def test_the_one_client_workload_sends_from_one_client_and_the_million_is_opt_in(
    run: ModuleType,
) -> None:
    chosen = {w.key: w for w in run.workloads(False, False)}
    assert "one sequential client: 20,000" in chosen["sleepers_one_client"].title
    assert chosen["hibernated_million"].opt_in
    assert not any(w.opt_in for k, w in chosen.items() if k != "hibernated_million")
    sized = {w.key: w for w in run.workloads(False, False, million=2_500)}
    assert "4 clients: 2,500 hibernated" in sized["hibernated_million"].title


def test_the_report_header_gives_the_load_average_at_start_and_end(run: ModuleType) -> None:
    every = {w.key: w for w in run.workloads(False, False)}
    load = ((0.5, 0.4, 0.3), (1.75, 0.9, 0.35))
    text = run.report([], None, "python bench/run.py", 60.0, every, load)
    head = text.split("## Targets (issue 24)")[0]
    assert "Load average: 0.50 at start, 1.75 at end (1 minute;" in head
    assert "## Earlier targets" not in text  # none of its workloads ran


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
