"""Drive the signup example on two servers at once and print what each one saw.

Start the example under celld and under wrangler dev, then pass both base URLs:

    celld run examples/signup --port 8787 &
    (cd examples/signup && npx wrangler dev --port 8788) &
    python examples/signup/compare.py http://127.0.0.1:8787 http://127.0.0.1:8788

Every scenario sends the same requests to both servers at the same moments (real time, short
durations), polls `GET /signup/:id` every 100 ms and records the sequence of statuses, the
final output and any error. Ids and timestamps are replaced by placeholders before comparing.
Only the Python standard library is needed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

POLL = 0.1
DEADLINE = 30.0

# name: (POST /signup body, seconds after create to send the confirmation or None)
SCENARIOS: dict[str, tuple[dict[str, Any], float | None]] = {
    "confirmed while waiting for the event": (
        {"email": "ada@example.com", "sleep": "1 second", "confirmTimeout": "10 seconds"},
        2.5,
    ),
    "confirmed during the sleep (event kept)": (
        {"email": "bob@example.com", "sleep": "2 seconds", "confirmTimeout": "10 seconds"},
        0.5,
    ),
    "never confirmed (timeout, reminder)": (
        {"email": "eve@example.com", "sleep": "1 second", "confirmTimeout": "2 seconds"},
        None,
    ),
}

# Differences docs/semantics.md names (celld's semantics where its sources differ): celld reports
# `waiting` during a sleep or waitForEvent where wrangler dev's engine reports `running`.
KNOWN_STATUS_ALIASES = {"waiting": "running"}
# Seen but not named there: celld may report `queued` for the moment between create() and the
# run starting (a production status); wrangler dev's engine never reports it.
UNNAMED_STATUS_ALIASES = {**KNOWN_STATUS_ALIASES, "queued": "running"}
# get() of an unknown id: celld throws production's message (docs/semantics.md),
# wrangler dev a shorter local one.
KNOWN_MESSAGES = {
    "WorkflowError: (instance.not_found) Instance not found": "instance.not_found",
}

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base + path, data=data, method=method, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def placeholders(value: Any) -> Any:
    """The value with ids and timestamps replaced, so two runs can be compared."""
    return json.loads(ISO_TIME.sub("<time>", UUID.sub("<uuid>", json.dumps(value))))


def collapse(items: list[str]) -> list[str]:
    return [item for i, item in enumerate(items) if i == 0 or items[i - 1] != item]


def run_scenario(base: str, body: dict[str, Any], confirm_at: float | None) -> dict[str, Any]:
    start = time.monotonic()
    code, created = call(base, "POST", "/signup", body)
    if code != 200:
        return {"statuses": [], "final": {"http": code, "body": created}}
    instance = created["id"]
    seen: list[str] = []
    timeline: list[str] = []  # "status@seconds" at each change, for the detailed print
    while True:
        elapsed = time.monotonic() - start
        if confirm_at is not None and elapsed >= confirm_at:
            confirm_at = None
            call(base, "POST", f"/signup/{instance}/confirm")
            timeline.append(f"[confirm sent]@{elapsed:.1f}s")
        code, state = call(base, "GET", f"/signup/{instance}")
        status = state.get("status", f"HTTP {code}")
        if not timeline or not timeline[-1].startswith(f"{status}@"):
            timeline.append(f"{status}@{elapsed:.1f}s")
        seen.append(status)
        if status in ("complete", "errored", "terminated") or elapsed > DEADLINE:
            break
        time.sleep(POLL)
    final = {key: state.get(key) for key in ("status", "output", "error") if key in state}
    return {"statuses": collapse(seen), "timeline": timeline, "final": placeholders(final)}


def error_cases(base: str) -> dict[str, Any]:
    unknown = call(base, "GET", "/signup/no-such-instance")
    bad_body = call(base, "POST", "/signup", {"name": "no email"})
    return {"GET unknown id": list(unknown), "POST without email": list(bad_body)}


def observe(base: str) -> dict[str, Any]:
    """Every scenario on one server, each in its own thread (so they take real time once)."""
    results: dict[str, Any] = {}

    def one(name: str, body: dict[str, Any], confirm_at: float | None) -> None:
        results[name] = run_scenario(base, body, confirm_at)

    threads = [
        threading.Thread(target=one, args=(name, *scenario)) for name, scenario in SCENARIOS.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results["errors"] = error_cases(base)
    return results


def verdict(a: Any, b: Any, known: Any = None, unnamed: Any = None) -> str:
    if a == b:
        return "identical"
    if known is not None and known(a) == known(b):
        return "same except the differences docs/semantics.md names"
    if unnamed is not None and unnamed(a) == unnamed(b):
        return "DIFFERENT only by celld's transient `queued` (not named in docs/semantics.md)"
    return "DIFFERENT"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("celld", help="base URL of `celld run examples/signup`")
    parser.add_argument("wrangler", help="base URL of `wrangler dev` in examples/signup")
    args = parser.parse_args()
    bases = {"celld": args.celld.rstrip("/"), "wrangler": args.wrangler.rstrip("/")}

    seen: dict[str, dict[str, Any]] = {}
    threads = [
        threading.Thread(target=lambda n=name, b=base: seen.__setitem__(n, observe(b)))
        for name, base in bases.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    def statuses_alias(statuses: list[str], aliases: dict[str, str]) -> list[str]:
        return collapse([aliases.get(s, s) for s in statuses])

    def message_alias(cases: dict[str, Any]) -> str:
        text = json.dumps(cases)
        for ours, theirs in KNOWN_MESSAGES.items():
            text = text.replace(json.dumps(ours)[1:-1], json.dumps(theirs)[1:-1])
        return text

    different = False
    for name in SCENARIOS:
        c, w = seen["celld"][name], seen["wrangler"][name]
        print(f"== {name}")
        for label, result in (("celld", c), ("wrangler", w)):
            print(f"  {label:8} statuses: {' -> '.join(result['timeline'])}")
        for label, result in (("celld", c), ("wrangler", w)):
            print(f"  {label:8} final:    {json.dumps(result['final'])}")
        status_verdict = verdict(
            c["statuses"],
            w["statuses"],
            lambda s: statuses_alias(s, KNOWN_STATUS_ALIASES),
            lambda s: statuses_alias(s, UNNAMED_STATUS_ALIASES),
        )
        final_verdict = verdict(c["final"], w["final"])
        print(f"  => statuses {status_verdict}; final status and output {final_verdict}\n")
        different |= "DIFFERENT" in status_verdict + final_verdict

    c, w = seen["celld"]["errors"], seen["wrangler"]["errors"]
    print("== errors")
    for case in c:
        print(f"  {'celld':8} {case}: {json.dumps(c[case])}")
        print(f"  {'wrangler':8} {case}: {json.dumps(w[case])}")
    errors_verdict = verdict(c, w, message_alias)
    print(f"  => {errors_verdict}")
    different |= errors_verdict == "DIFFERENT"
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
