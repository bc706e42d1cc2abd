"""Run the compatibility suite against each target and write compat/REPORT.md.

    python -m compat.report                      # celld and wrangler dev (installs wrangler)
    python -m compat.report --target celld       # one target; the other keeps its last results
    python -m compat.report --no-run             # rebuild REPORT.md from compat/results/*.json
    python -m compat.report --no-run --check --produced-by ".ci/run"   # what CI does

Each target's run writes compat/results/<target>.json (one record per scenario: outcome,
summary, declared difference); the report puts them side by side, one row per scenario, so a
difference that is not declared shows up as a failure in that target's column. ``--check``
fails (exit 1) when a scenario passes on one target and not on the other without a declared
difference, or ran on only one of them; `.ci/run` writes the report on every landing with it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
REPORT = HERE / "REPORT.md"
TARGETS = ("celld", "wrangler")
MARKS = {"passed": "pass", "failed": "**FAIL**", "error": "**ERROR**", "skipped": "skip",
         "xfailed": "xfail (known bug)", None: "not run"}  # fmt: skip


def run_target(target: str, extra: list[str]) -> int:
    """Run the suite against `target`, recording results; returns pytest's exit code."""
    RESULTS.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "CELLD_COMPAT_TARGET": target,
        "CELLD_COMPAT_RESULTS": str(RESULTS / f"{target}.json"),
    }
    command = [sys.executable, "-m", "pytest", "compat", "-q", "-p", "no:cacheprovider", *extra]
    print(f"== {target}: {' '.join(command)}", flush=True)
    return subprocess.call(command, cwd=REPO, env=env)


def load(target: str) -> dict[str, Any] | None:
    path = RESULTS / f"{target}.json"
    return json.loads(path.read_text()) if path.exists() else None


#: where `npm ci` in tests/wrangler puts the wrangler dev the suite runs against
WRANGLER_MODULES = REPO / "tests" / "wrangler" / "node_modules"


def _package_version(name: str) -> str:
    path = WRANGLER_MODULES / name / "package.json"
    return json.loads(path.read_text())["version"] if path.is_file() else "?"


def version_note(target: str) -> str:
    if target == "celld":
        return "celld (this checkout, `celld run` with the manual test clock)"
    return (
        f"wrangler dev {_package_version('wrangler')} (miniflare {_package_version('miniflare')}, "
        f"workerd {_package_version('workerd')}; tests/wrangler's lockfile; real time)"
    )


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def provenance(produced_by: str) -> str:
    """Which run wrote the report: the command, the commit (and whether the tree held
    uncommitted changes), the time and the machine."""
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown commit"
    # what the run itself writes (the results and this report) does not count as a change
    changed = _git("status", "--porcelain", "--", ".", ":!compat/results", ":!compat/REPORT.md")
    dirty = " plus uncommitted changes" if changed else ""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores"
    return f"Produced by {produced_by} at commit `{commit}`{dirty}, {when}, on {machine}."


def check(runs: dict[str, dict[str, Any]]) -> list[str]:
    """Scenarios whose outcome differs between the targets without a declared difference,
    and scenarios that ran on only one target (empty when the targets agree)."""
    outcomes: dict[str, dict[str, dict[str, Any]]] = {}
    for target, run in runs.items():
        for record in run["scenarios"]:
            outcomes.setdefault(record["id"], {})[target] = record
    problems = [f"not run on {t}: no results recorded" for t in TARGETS if t not in runs]
    for scenario_id, by_target in sorted(outcomes.items()):
        missing = [t for t in runs if t not in by_target]
        if missing:
            problems.append(f"{scenario_id}: ran on {', '.join(by_target)}, not on "
                            f"{', '.join(missing)}")  # fmt: skip
            continue
        passed = {t: r["outcome"] == "passed" for t, r in by_target.items()}
        declared = any(r.get("difference") for r in by_target.values())
        if len(set(passed.values())) > 1 and not declared:
            detail = "; ".join(f"{t}: {r['outcome']} {r['detail']}".strip()
                               for t, r in by_target.items())  # fmt: skip
            problems.append(f"{scenario_id}: passes on one target only, no declared "
                            f"difference ({detail})")  # fmt: skip
    return problems


def render(runs: dict[str, dict[str, Any]], produced_by: str = "`python -m compat.report`") -> str:
    """REPORT.md from the recorded runs."""
    rows: dict[str, dict[str, Any]] = {}
    for target, run in runs.items():
        for record in run["scenarios"]:
            row = rows.setdefault(record["id"], {"record": record, "outcomes": {}})
            row["outcomes"][target] = record
            if record.get("difference"):
                row["record"] = record
    lines = [
        "# Compatibility report: celld vs wrangler dev",
        "",
        f"{provenance(produced_by)} One row per scenario (compat/scenarios); the same "
        "scenario code runs against each target. CI (`.ci/run`) runs the suite against both "
        "on every landing, writes this file and fails when a scenario passes on one target "
        "and not on the other without a declared difference.",
        "",
    ]
    for target in TARGETS:
        if target in runs:
            counts: dict[str, int] = {}
            for record in runs[target]["scenarios"]:
                counts[record["outcome"]] = counts.get(record["outcome"], 0) + 1
            summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            run = runs[target]
            when = f"; run finished {run['finished']}" if "finished" in run else ""
            took = f", its pytest session took {run['seconds']} s" if "seconds" in run else ""
            lines.append(f"- **{target}**: {summary}. {version_note(target)}{when}{took}.")
        else:
            lines.append(f"- **{target}**: not run.")
    declared = sum(1 for row in rows.values() if row["record"].get("difference"))
    lines += [
        f"- Scenarios: {len(rows)}; with a declared difference: {declared}.",
        "",
        "A *declared difference* is a place where celld follows Cloudflare production on "
        "purpose (docs/semantics.md) and wrangler dev "
        "does not; the scenario asserts each target's own behaviour there. Anything else that "
        "differs fails the scenario on one side.",
        "",
        "| # | scenario | what it checks | celld | wrangler dev | declared difference |",
        "|---|---|---|---|---|---|",
    ]
    for n, (scenario_id, row) in enumerate(sorted(rows.items(), key=_order), start=1):
        record = row["record"]
        cells = [MARKS.get(row["outcomes"].get(t, {}).get("outcome")) for t in TARGETS]
        reason = record.get("difference", "") or ""
        doc = record.get("doc", "").replace("|", "\\|")
        lines.append(
            f"| {n} | `{record['module']}::{scenario_id}` | {doc} | {cells[0]} | {cells[1]} | "
            f"{reason.replace('|', '/')} |"
        )
    failures = [
        (t, r) for t, run in runs.items() for r in run["scenarios"] if r["outcome"] != "passed"
    ]
    if failures:
        lines += ["", "## Not passing", ""]
        for target, record in failures:
            lines.append(f"- {target} `{record['id']}`: {record['outcome']}: {record['detail']}")
    reasons = sorted({row["record"]["difference"] for row in rows.values()
                      if row["record"].get("difference")})  # fmt: skip
    if reasons:
        lines += ["", "## Declared differences", ""]
        lines += [f"- {reason}" for reason in reasons]
    return "\n".join(lines) + "\n"


def _order(item: tuple[str, dict[str, Any]]) -> tuple[str, str]:
    return (item[1]["record"]["module"], item[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="append", choices=TARGETS)
    parser.add_argument("--no-run", action="store_true", help="only rebuild REPORT.md")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 on an undeclared difference between targets"
    )
    parser.add_argument(
        "--produced-by",
        default="`python -m compat.report`",
        help="what ran the suite, named in the report",
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = parser.parse_args(argv)
    status = 0
    if not args.no_run:
        for target in args.target or TARGETS:
            status |= run_target(target, args.pytest_args)
    runs = {t: run for t in TARGETS if (run := load(t)) is not None}
    REPORT.write_text(render(runs, args.produced_by))
    print(f"wrote {REPORT.relative_to(REPO)}")
    if args.check:
        problems = check(runs)
        for problem in problems:
            print(f"compat: {problem}", file=sys.stderr)
        if problems:
            print(f"compat: {len(problems)} undeclared difference(s) between the targets "
                  "(declare one in compat/differences.py or fix it)", file=sys.stderr)  # fmt: skip
            status |= 1
        else:
            print("compat: celld and wrangler dev agree on every scenario (declared "
                  "differences aside)")  # fmt: skip
    return status


if __name__ == "__main__":
    raise SystemExit(main())
