"""Cluster harness: every storage kind and a Workflow in flight while processes die.

Client threads drive tests/projects/everything through a cluster (`celld run --workers
N`, or several nodes on one PostgreSQL): KV puts, R2 puts (streamed), D1 inserts, Durable
Object turns, queue sends and Workflow creations, round robin, each recorded once its
answer is 200 (acknowledged). The test kills (SIGKILL) and stops (SIGSTOP, then SIGCONT)
processes and nodes meanwhile, waiting on acknowledgements between faults rather than on
time. Before a process is killed, `Load.hold` puts calls in flight on objects it owns:
each object's turn fetches `Gate`, an HTTP server in this process that holds the answer,
and the kill comes only once the gate has every one of them, so that calls are in flight
when the process dies whatever the machine's load. Then `Book.check` proves, through
every live entry point:

* every acknowledged KV value and R2 object reads back byte for byte, and every
  acknowledged D1 row is there;
* every object's turns are numbered 1..n without a gap, every acknowledged turn is
  recorded as answered, no number was acknowledged twice, and each live copy of an
  object (its `life`) ran one unbroken run of turns with its calls counted 1, 2, 3...:
  two live owners of one object would interleave two lives;
* every acknowledged queue send is delivered (at least once: a fault may deliver a
  message again; the consumer counts deliveries per message and the check reports the
  duplicates);
* every acknowledged instance completes, with its KV value, R2 object, D1 row and
  object turn written; a create whose answer was lost either never landed or completes;
* the recorder invariant of the output gate (tests/recorder_harness.py): each instance's
  last act is an effect to an outside recorder carrying its step results, and no effect
  carried a value the journal later contradicts.

Short form in CI (tests/cluster/test_harness_workers.py: one SIGKILL, one SIGSTOP and one
hung child killed; tests/cluster/test_harness_nodes.py: a hung node SIGKILLed, another
SIGSTOPped past its lease, the first started again). Long form on `--workers 2`:

    CELLD_HARNESS_ROUNDS=10 python -m pytest -s tests/cluster/test_harness_workers.py
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx

from celld.client import Client
from tests.e2e.counter import QuietHandler, serving
from tests.recorder_harness import Recorder, contradictions

WORKFLOW = "everything"
OBJECTS = ["c0", "c1", "c2", "c3"]
#: one of each per round
KINDS = ("do", "kv", "do", "d1", "q", "do", "r2", "wf")


def _chunks(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _operator_view(http: httpx.Client, url: str, instance_id: str) -> Any:
    """The operator's view of a stuck instance (status, deadlines, residency, steps), to
    say in the failure where it stands."""
    try:
        view = http.get(f"{url}/cdn-cgi/celld/workflows/everything/instances/{instance_id}")
        seen = view.json()
    except (httpx.HTTPError, ValueError) as error:
        return f"(not read: {error!r})"
    if isinstance(seen, dict):
        seen.pop("output", None)
        for row in seen.get("steps") or []:
            row.pop("value", None)
    return seen


@dataclass
class Book:
    """What the cluster acknowledged, and what it answered otherwise."""

    kv: dict[str, bytes] = field(default_factory=dict)
    r2: dict[str, bytes] = field(default_factory=dict)
    d1: set[str] = field(default_factory=set)
    #: queue messages sent (by body id)
    queue: set[str] = field(default_factory=set)
    turns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    instances: list[str] = field(default_factory=list)
    #: creates whose answer never came (cut off by a fault): may or may not exist
    unsure: list[str] = field(default_factory=list)
    #: answers other than 200 and lost connections, each after the phases it was sent
    #: and answered in ("calm-kill: ...")
    failures: list[str] = field(default_factory=list)
    acked: int = 0

    def failed_in(self, *phases: str) -> list[str]:
        """The failures of calls sent and answered within one of `phases`: with no
        fault under way, none may fail."""
        return [f for f in self.failures if any(f.startswith(f"{p}-{p}:") for p in phases)]

    def check(self, urls: list[str], recorder: Recorder, timeout: float = 120) -> dict[str, int]:
        """Every invariant of the module docstring, through each of `urls`; what was
        checked, counted."""
        with httpx.Client(timeout=60) as http:
            for url in urls:
                self._check_storage(http, url)
                for name, acked in self.turns.items():
                    check_turns(http.get(f"{url}/do/{name}/turns").json(), acked)
            deliveries = self._wait_delivered(http, urls[-1], timeout)
            finished = self._wait_instances(http, urls[0], timeout)
            for instance_id, output in finished.items():
                self._check_instance(http, urls[-1], instance_id, output)
        effects = [e for e in recorder.effects if e.sender in finished]
        assert {e.sender for e in effects} == set(finished), "a complete instance sent no effect"
        with Client(urls[0]) as client:
            wrong = contradictions(client, WORKFLOW, effects)
        assert wrong == [], wrong[:5]
        return {
            "kv": len(self.kv),
            "r2": len(self.r2),
            "d1": len(self.d1),
            "turns": sum(len(t) for t in self.turns.values()),
            "sent": len(self.queue),
            # deliveries beyond the first of each message (a fault redelivered it)
            "redelivered": sum(n - 1 for n in deliveries.values()),
            # delivered, though the send's answer was lost
            "unacked delivered": len(set(deliveries) - self.queue),
            "instances": len(finished),
            "effects": len(effects),
        }

    def _check_storage(self, http: httpx.Client, url: str) -> None:
        for kind, written in (("kv", self.kv), ("r2", self.r2)):
            for key, body in written.items():
                got = http.get(f"{url}/{kind}/{key}")
                assert got.status_code == 200, (f"acknowledged {kind} lost", key, got.text)
                assert got.content == body, f"{kind} {key}: other bytes than acknowledged"
        rows = set(http.get(f"{url}/d1-list").json())
        missing = self.d1 - rows
        assert not missing, f"acknowledged D1 rows lost: {sorted(missing)[:5]}"

    def _wait_delivered(self, http: httpx.Client, url: str, timeout: float) -> dict[str, int]:
        """How often each message was delivered, once every acknowledged send was."""
        deadline = time.monotonic() + timeout
        while True:
            deliveries = {row["id"]: row["n"] for row in http.get(f"{url}/q-list").json()}
            missing = self.queue - set(deliveries)
            if not missing:
                assert all(n >= 1 for n in deliveries.values()), deliveries
                return deliveries
            assert time.monotonic() < deadline, f"acknowledged sends lost: {sorted(missing)[:5]}"
            time.sleep(0.2)

    def _wait_instances(self, http: httpx.Client, url: str, timeout: float) -> dict[str, Any]:
        """Each acknowledged instance's output once it completes (and each unsure one's
        that exists)."""
        outputs: dict[str, Any] = {}
        deadline = time.monotonic() + timeout
        for instance_id in [*self.instances, *self.unsure]:
            while True:
                status = http.get(f"{url}/wf/{instance_id}").json()
                if instance_id in self.unsure and "error" in status:
                    assert "not_found" in status["error"]["message"], status
                    break  # its create never landed
                if status.get("status") == "complete":
                    outputs[instance_id] = status["output"]
                    break
                assert status.get("status") in ("queued", "running", "waiting"), status
                if time.monotonic() >= deadline:
                    seen = _operator_view(http, url, instance_id)
                    raise AssertionError(f"{instance_id} stuck: {status}; celld's view: {seen}")
                time.sleep(0.2)
        return outputs

    def _check_instance(
        self, http: httpx.Client, url: str, instance_id: str, output: dict[str, Any]
    ) -> None:
        key = f"wf/{instance_id}"
        assert output["id"] == instance_id, output
        draw = output["draw"].encode()
        assert http.get(f"{url}/kv/{key}").content == draw, key
        assert http.get(f"{url}/r2/{key}").content == draw, key
        assert key in set(http.get(f"{url}/d1-list").json()), key
        turns = http.get(f"{url}/do/wf-{instance_id}/turns").json()
        check_turns(turns, [])
        assert any(t["seq"] == output["turn"] and t["kind"] == key for t in turns), turns


def check_turns(turns: list[dict[str, Any]], acknowledged: list[dict[str, Any]]) -> None:
    """One object's recorded turns against the turns acknowledged to clients."""
    numbers = [t["seq"] for t in turns]
    assert numbers == list(range(1, len(turns) + 1)), f"turn numbers with a gap: {numbers}"
    recorded = {t["seq"]: t for t in turns}
    seqs = [a["seq"] for a in acknowledged]
    assert len(seqs) == len(set(seqs)), "one turn number acknowledged twice: two owners"
    for turn in acknowledged:
        stored = recorded.get(turn["seq"])
        assert stored is not None and stored["life"] == turn["life"], ("lost turn", turn)
    lives: list[str] = []
    calls: dict[str, int] = {}
    for turn in turns:
        if not lives or lives[-1] != turn["life"]:
            assert turn["life"] not in calls, f"two live copies of one object: {turns}"
            lives.append(turn["life"])
        calls[turn["life"]] = calls.get(turn["life"], 0) + 1
        # a copy that counted a call its storage does not hold ran beside another copy
        assert turn["call"] == calls[turn["life"]], f"a live copy skipped a turn: {turn}"


class Gate:
    """An HTTP server that holds each `GET /hold?key=K` until `release(K)`: a call that
    fetches it is in flight, and `wait_held` tells when the server has it."""

    def __init__(self) -> None:
        self.url = ""
        self.held: list[str] = []
        self._released: set[str] = set()
        self._closed = False
        self._changed = threading.Condition()

    def wait_held(self, keys: list[str], timeout: float = 120) -> None:
        """Until a call for each of `keys` is held here."""
        with self._changed:
            reached = self._changed.wait_for(lambda: set(keys) <= set(self.held), timeout)
        assert reached, f"calls never reached the gate: {sorted(set(keys) - set(self.held))}"

    def release(self, keys: list[str]) -> None:
        with self._changed:
            self._released.update(keys)
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _hold(self, key: str) -> None:
        with self._changed:
            self.held.append(key)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._closed or key in self._released, 300)


@contextmanager
def gate_server() -> Iterator[Gate]:
    """A `Gate` on a free local port; it releases whatever it holds when it closes."""
    gate = Gate()

    class Handler(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            gate._hold(parse_qs(urlparse(self.path).query)["key"][0])
            self.answer_ok()

    with serving(Handler) as url:
        gate.url = url
        try:
            yield gate
        finally:
            gate.close()


class Load:
    """Client threads writing every kind through `urls()` until `stop()`; `phase` names
    the fault under way, for the failures it causes."""

    def __init__(
        self,
        urls: Callable[[], list[str]],
        recorder: Recorder,
        *,
        threads: int = 4,
        seed: int = 1,
    ) -> None:
        self.urls = urls
        self.recorder = recorder
        self.book = Book(turns={name: [] for name in OBJECTS})
        self.phase = "calm"
        self._threads = [
            threading.Thread(target=self._client, args=(seed * 100 + n,), daemon=True)
            for n in range(threads)
        ]
        self._stop = threading.Event()
        self._acked = threading.Condition()
        self._held: list[threading.Thread] = []

    def start(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in [*self._threads, *self._held]:
            thread.join(180)
            assert not thread.is_alive(), "a client is still waiting for an answer"

    def wait_acked(self, more: int, timeout: float = 120) -> None:
        """Until `more` further writes are acknowledged (fails after `timeout`)."""
        with self._acked:
            goal = self.book.acked + more
            reached = self._acked.wait_for(lambda: self.book.acked >= goal, timeout)
        assert reached, f"writes stalled in phase {self.phase}: {self.book.failures[-5:]}"

    def hold(self, url: str, obj: str, gate: Gate) -> None:
        """One turn of the object `obj` through `url`, answered only once `gate` releases
        it (`gate.wait_held([obj])` tells when it is in flight); recorded as the load's
        calls are (acknowledged or failed, under the phases it was sent and answered in)."""
        self.book.turns.setdefault(obj, [])

        def call() -> None:
            phase = self.phase
            try:
                with httpx.Client(timeout=300) as http:
                    response = http.post(f"{url}/do/{obj}/hold", params={"gate": gate.url})
            except httpx.TransportError as error:
                self._failed("hold", obj, f"{phase}-{self.phase}: hold {error!r}")
                return
            self._answered(
                "hold", obj, phase, response, lambda r: self.book.turns[obj].append(r.json())
            )

        thread = threading.Thread(target=call, daemon=True)
        self._held.append(thread)
        thread.start()

    def _client(self, seed: int) -> None:
        rng = random.Random(seed)
        n = 0
        while not self._stop.is_set():
            n += 1
            phase = self.phase  # read before the entry point is chosen
            kind, name, url = KINDS[n % len(KINDS)], f"s{seed}-{n}", rng.choice(self.urls())
            try:
                # a new connection each time: any process of a cluster may take it
                with httpx.Client(timeout=120) as http:
                    response, record = self._call(http, url, kind, name, rng)
            except httpx.TransportError as error:
                self._failed(kind, name, f"{phase}-{self.phase}: {kind} {error!r}")
                continue
            self._answered(kind, name, phase, response, record)

    def _answered(
        self,
        kind: str,
        name: str,
        phase: str,
        response: httpx.Response,
        record: Callable[[httpx.Response], Any],
    ) -> None:
        if response.status_code != 200:
            text = f"{response.status_code} {response.text[:200]}"
            self._failed(kind, name, f"{phase}-{self.phase}: {kind} {text}")
            return
        with self._acked:
            record(response)
            self.book.acked += 1
            self._acked.notify_all()

    def _failed(self, kind: str, name: str, text: str) -> None:
        with self._acked:
            if kind == "wf":
                self.book.unsure.append(name)
            self.book.failures.append(text)

    def _call(
        self, http: httpx.Client, url: str, kind: str, name: str, rng: random.Random
    ) -> tuple[httpx.Response, Callable[[httpx.Response], Any]]:
        book = self.book
        if kind == "do":
            obj = rng.choice(OBJECTS)
            return http.post(f"{url}/do/{obj}/inc"), lambda r: book.turns[obj].append(r.json())
        if kind == "wf":
            response = http.post(f"{url}/wf/{name}", params={"recorder": self.recorder.url})
            return response, lambda r: book.instances.append(name)
        if kind == "d1":
            return http.put(f"{url}/d1/{name}"), lambda r: book.d1.add(name)
        if kind == "q":
            return http.post(f"{url}/q/{name}"), lambda r: book.queue.add(name)
        if kind == "kv":
            body = rng.randbytes(rng.choice([10, 2_000]))
            return http.put(f"{url}/kv/{name}", content=body), lambda r: book.kv.update(
                {name: body}
            )
        body = rng.randbytes(rng.choice([1_000, 200_000]))
        response = http.put(f"{url}/r2/{name}", content=_chunks(body))
        return response, lambda r: book.r2.update({name: body})
