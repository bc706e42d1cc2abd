"""Recorder harness: SIGKILL celld the moment an effect leaves it, restart, compare.

celld's promise is that code after `await step.do(...)` may rely on that step's result
being durable, so nothing a Workflow sends out may carry a value its journal later
contradicts. This harness tests that from outside. Each effect of the recorder project
(tests/projects/recorder) is a fetch to an HTTP server in this process whose body lists
claims, `{instance, step, value}`: a value JS holds and the step whose result it is.
The moment the first effect of a trial reaches the recorder, the recorder SIGKILLs the
celld process (before answering); the harness restarts celld on the same state folder,
waits for every instance of the trial to finish, and reads each claimed step's result
from the journal over the operator API. A result that was not durable when the effect
left runs again after the restart and draws a new `crypto.randomUUID()`, so a leak shows
as a claim whose value the journal contradicts. Invariant: no effect carried a value
the journal later contradicts.

Scenarios (`SCENARIOS`):

* `between-steps`: two steps, a `console.log` between them, the second started on its
  own and finished in the same turn; the effect carries both results.
* `between-steps-quiet`: the same without the log line.
* `warm-secret`: a writer's last step draws a secret it leaves in module state and its
  run ends; readers created right after take the writer's warm isolate and send the
  secret out as their first act.

The holes show only when commits are slow, so celld runs on a slow disk
(tests/slowdisk: an LD_PRELOAD shim that delays every flush under the state folder).

`run_trials` starts and restarts celld itself (one state folder, fresh instances per
trial). `run_trial` is the reusable form for other harnesses: it takes a running
celld's URL and pid and a way to bring it (or another node) back, and returns one
trial's effects and contradictions.

Short form in CI (tests/e2e/test_effects_after_commits.py); long form:

    python -m tests.recorder_harness --scenario between-steps --trials 100
    python -m tests.recorder_harness --scenario warm-secret --trials 100
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx

from celld.client import CelldError, Client, Instance
from tests import slowdisk
from tests.celld_server import CelldServer
from tests.e2e.counter import QuietHandler, serving

PROJECT = Path(__file__).resolve().parent / "projects" / "recorder"
#: How long each commit of the slow disk waits before its data reaches the file (ms).
WRITE_MS = 40


# -- the recorder ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """A value an effect carried and the step whose result it says it is."""

    instance: str
    step: str
    value: Any


@dataclass(frozen=True)
class Effect:
    """One fetch that reached the recorder."""

    sender: str  # the instance that sent it
    claims: tuple[Claim, ...]
    killed: bool  # this effect made the recorder SIGKILL celld


class Recorder:
    """Records every effect; the first one after `arm(pid)` SIGKILLs `pid` (its whole
    process group when it leads one) before the fetch gets any answer."""

    def __init__(self) -> None:
        self.url = ""
        self.effects: list[Effect] = []
        self.fired = threading.Event()
        self._armed: int | None = None
        self._lock = threading.Lock()

    def arm(self, pid: int) -> None:
        with self._lock:
            self._armed = pid
            self.fired.clear()

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    def since(self, mark: int) -> list[Effect]:
        with self._lock:
            return list(self.effects[mark:])

    def mark(self) -> int:
        with self._lock:
            return len(self.effects)

    def receive(self, sender: str, body: bytes) -> bool:
        """Record one effect; True when it killed celld (then it gets no answer)."""
        claims = tuple(
            Claim(str(c["instance"]), str(c["step"]), c["value"])
            for c in json.loads(body)["claims"]
        )
        with self._lock:
            pid, self._armed = self._armed, None
            if pid is not None:
                # Said before it is done: a request the kill cuts short must find the
                # recorder fired when it fails, or it would be taken for a real failure.
                self.fired.set()
                kill(pid)
            self.effects.append(Effect(sender, claims, killed=pid is not None))
        return pid is not None


def kill(pid: int) -> None:
    """SIGKILL `pid`, with its process group when it leads one (`celld run` started in a
    session of its own)."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone


@contextmanager
def recorder_server() -> Iterator[Recorder]:
    """A recorder listening on a free local port (it outlives the celld it kills)."""
    recorder = Recorder()

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            query = parse_qs(urlparse(self.path).query)
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            if recorder.receive(query.get("instance", ["?"])[0], body):
                self.close_connection = True
                return  # celld is dead: nobody is left to answer
            self.answer_ok()

        def do_GET(self) -> None:  # noqa: N802 - `/warm`: an answer, nothing recorded
            self.answer_ok()

    with serving(Handler) as url:
        recorder.url = url
        yield recorder


def warm(url: str, recorder: Recorder) -> None:
    """Have the celld at `url` fetch the recorder once (the project's `GET /warm`). A
    celld process sets its HTTP client up at its first fetch, which takes longer than a
    slow commit: a trial's effect would then leave late enough to hide a leak."""
    response = httpx.get(f"{url}/warm", params={"recorder": recorder.url}, timeout=30)
    response.raise_for_status()


# -- scenarios --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """What one trial creates. `start(client, recorder, prefix, ids)` creates the
    trial's instances, each id starting with `prefix` and appended to `ids` before its
    create is sent (a create cut short by the kill may have landed), and may stop early
    once the recorder fired."""

    name: str
    workflow: str
    start: Callable[[Client, Recorder, str, list[str]], None]


def _between_steps(log: bool) -> Callable[[Client, Recorder, str, list[str]], None]:
    def start(client: Client, recorder: Recorder, prefix: str, ids: list[str]) -> None:
        ids.append(f"{prefix}-run")
        params = {"recorder": recorder.url, "log": log}
        client.workflow("between-steps-workflow").create(id=ids[-1], params=params)

    return start


#: Readers created after a writer, one after the other, until one sends an effect (a
#: later reader still finds the writer's isolate if it goes back to the pool only once
#: the writer's last commit has landed).
READERS = 6
#: How long the writer's step takes (ms): its result comes while the commit of the
#: first reader's create is under way (a commit takes WRITE_MS on the slow disk).
WRITER_HOLD_MS = WRITE_MS // 2


def _warm_secret(client: Client, recorder: Recorder, prefix: str, ids: list[str]) -> None:
    workflow = client.workflow("secret-workflow")
    writer = f"{prefix}-writer"
    ids.append(writer)
    workflow.create(id=writer, params={"recorder": recorder.url, "hold": WRITER_HOLD_MS})
    for n in range(READERS):
        if recorder.fired.is_set():
            return
        ids.append(f"{prefix}-reader{n}")
        params = {"recorder": recorder.url, "role": "reader", "writer": writer}
        workflow.create(id=ids[-1], params=params)


SCENARIOS = {
    "between-steps": Scenario("between-steps", "between-steps-workflow", _between_steps(True)),
    "between-steps-quiet": Scenario(
        "between-steps-quiet", "between-steps-workflow", _between_steps(False)
    ),
    "warm-secret": Scenario("warm-secret", "secret-workflow", _warm_secret),
}


# -- one trial ----------------------------------------------------------------------------------


@dataclass
class Trial:
    """One trial's outcome. `contradictions` non-empty means an effect leaked."""

    prefix: str
    killed: bool
    effects: list[Effect]
    contradictions: list[str] = field(default_factory=list)


def run_trial(
    scenario: Scenario,
    prefix: str,
    *,
    url: str,
    pid: int,
    recorder: Recorder,
    restart: Callable[[], str],
    timeout: float = 120,
) -> Trial:
    """One trial against a running celld at `url` whose process is `pid`: create the
    scenario's instances (ids start with `prefix`); the first effect SIGKILLs `pid`;
    `restart()` then brings celld back (the same state, or another node that takes over)
    and returns its URL. Every instance is waited for, and every claim of every effect
    of the trial is checked against the journal. A trial whose instances all finished
    without sending an effect has `killed` False (nothing was tested)."""
    mark = recorder.mark()
    recorder.arm(pid)
    ids: list[str] = []
    try:
        with Client(url) as client:
            try:
                scenario.start(client, recorder, prefix, ids)
                _wait_fired_or_finished(client, scenario.workflow, ids, recorder, timeout)
            except CelldError:
                if not recorder.fired.is_set():
                    raise  # not the kill: a real failure
    finally:
        recorder.disarm()
    killed = recorder.fired.is_set()
    if killed:
        url = restart()
    with Client(url) as client:
        workflow = client.workflow(scenario.workflow)
        for instance_id in ids:
            try:
                instance = workflow.get(instance_id)
            except CelldError as error:
                if killed and error.status == 404 and instance_id == ids[-1]:
                    continue  # its create was cut short by the kill and never landed
                raise
            instance.wait_for_status("complete", timeout=timeout)
        effects = [e for e in recorder.since(mark) if e.sender.startswith(f"{prefix}-")]
        trial = Trial(prefix, killed, effects)
        trial.contradictions = contradictions(client, scenario.workflow, effects)
    return trial


def _wait_fired_or_finished(
    client: Client, workflow: str, ids: list[str], recorder: Recorder, timeout: float
) -> None:
    """Until the recorder fires or every instance is final (an effect may never come)."""
    deadline = time.monotonic() + timeout
    instances = [Instance(client.workflow(workflow), i) for i in ids]
    while not recorder.fired.wait(0.05):
        statuses = [instance.status()["status"] for instance in instances]
        if all(status in ("complete", "errored", "terminated") for status in statuses):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{ids} neither finished nor sent an effect: {statuses}")


def contradictions(client: Client, workflow: str, effects: list[Effect]) -> list[str]:
    """Every claim whose step's recorded result differs from the value the effect
    carried (the invariant: no effect carried a value the journal later contradicts)."""
    problems: list[str] = []
    journals: dict[str, dict[str, Any]] = {}
    for effect in effects:
        for claim in effect.claims:
            if claim.instance not in journals:
                journals[claim.instance] = client.workflow(workflow).get(claim.instance).describe()
            recorded = _step_result(journals[claim.instance], claim.step)
            if recorded != claim.value:
                when = "the effect that was killed" if effect.killed else "an effect"
                problems.append(
                    f"{when} from {effect.sender} carried {claim.instance}/{claim.step} = "
                    f"{claim.value!r}, the journal says {recorded!r}"
                )
    return problems


def _step_result(details: dict[str, Any], step: str) -> Any:
    for row in details["steps"]:
        if row.get("name") == step and row.get("count") == 1 and row.get("state") == "done":
            return row.get("output")
    return None


# -- many trials on a celld this harness runs ---------------------------------------------------


@dataclass
class Report:
    scenario: str
    trials: int
    killed: int = 0  # trials in which an effect arrived (and celld was killed)
    leaked: int = 0  # trials with an effect the journal contradicts
    calls_slowed: int = 0  # writes and flushes the slow disk delayed in the last celld
    examples: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.scenario}: {self.leaked}/{self.trials} leaked "
            f"({self.killed} trials sent an effect and were killed; "
            f"{self.calls_slowed} disk calls slowed in the last celld)"
        )


def run_trials(
    scenario: str,
    trials: int,
    *,
    write_ms: int = WRITE_MS,
    sync_ms: int = 0,
    timeout: float = 120,
    folder: Path | None = None,
) -> Report:
    """`trials` trials of `scenario` against one `celld run` on a slow disk (each commit
    to its state folder waits `write_ms` ms before its data reaches the file, each flush
    `sync_ms` ms), restarted on the same state after each kill. Raises
    slowdisk.CannotBuild without a C compiler."""
    with tempfile.TemporaryDirectory(prefix="celld-recorder-") as name:
        where = folder or Path(name)
        disk = {"write_ms": write_ms, "sync_ms": sync_ms}
        return _run(SCENARIOS[scenario], trials, where, disk, timeout)


def _run(
    scenario: Scenario, trials: int, folder: Path, disk: dict[str, int], timeout: float
) -> Report:
    state = folder / "state"
    count_file = folder / "calls-slowed"
    library = slowdisk.build(folder / "shim")
    env = slowdisk.env(library, state, count_file=count_file, **disk)
    report = Report(scenario.name, trials)
    server = CelldServer(PROJECT, state, env=env)
    server.log_path = folder / "recorder-celld.log"

    def restart() -> str:
        server.kill()  # reaps the process the recorder killed
        server.start()
        warm(server.url, recorder)
        return server.url

    with recorder_server() as recorder:
        server.start()
        warm(server.url, recorder)
        try:
            for n in range(trials):
                assert server.process is not None
                trial = run_trial(
                    scenario, f"t{n}", url=server.url, pid=server.process.pid,
                    recorder=recorder, restart=restart, timeout=timeout,
                )  # fmt: skip
                report.killed += trial.killed
                if trial.contradictions:
                    report.leaked += 1
                    report.examples.extend(trial.contradictions[:1])
        finally:
            server.stop()
    report.calls_slowed = slowdisk.calls_slowed(count_file)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="between-steps")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--write-ms", type=int, default=WRITE_MS, help="commit delay (ms)")
    parser.add_argument("--sync-ms", type=int, default=0, help="flush delay (ms)")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    started = time.monotonic()
    report = run_trials(
        args.scenario, args.trials, write_ms=args.write_ms, sync_ms=args.sync_ms,
        timeout=args.timeout,
    )  # fmt: skip
    print(f"{report.summary()}, {time.monotonic() - started:.1f} s")
    for example in report.examples[:5]:
        print("LEAK:", example)
    raise SystemExit(1 if report.leaked else 0)


if __name__ == "__main__":
    main()
