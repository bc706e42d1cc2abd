"""Generated messages across the bridge, both ways.

Inbound: arbitrary messages (known and unknown kinds, garbage fields) delivered to a
Worker isolate never fault it, and it still serves a request afterwards. Outbound:
arbitrary values handed to `__celld_host.notify` / `request` are sent, or refused
with a clear TypeError; the isolate keeps working either way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from celld.isolate.host import IsolateHost
from celld.isolate.isolate import Isolate, IsolateFault, Limits
from celld.isolate.ops import isolate_ops
from celld.isolate.program import build_program
from celld.isolate.threads import JsThread
from tests.e2e.conftest import PROJECTS

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


class WorkerIsolate:
    """The hostile test project's Worker in one real isolate, driven synchronously."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = JsThread("fuzz-bridge")
        program = build_program(PROJECTS / "hostile" / "src" / "index.js")
        self.isolate = Isolate(self.thread, Limits(cpu_ms=5_000))
        self.loop.run_until_complete(self.isolate.load([program.script]))
        self.answers: dict[int, dict[str, Any]] = {}
        self.faults: list[dict[str, Any]] = []
        self.isolate_faults: list[IsolateFault] = []
        ops = isolate_ops()
        ops["respond"] = lambda m: self.answers.__setitem__(int(m["id"]), m)
        ops["done"] = lambda m: None
        ops["fault"] = self.faults.append
        self.host = IsolateHost(self.isolate, ops, on_fault=self.isolate_faults.append)
        self.next_id = 1_000_000
        self.post({"k": "env", "vars": {}, "workflows": []})

    def post(self, message: dict[str, Any]) -> None:
        async def go() -> None:
            self.host.post(message)
            await asyncio.sleep(0)
            await self.host.wait_idle()

        self.loop.run_until_complete(go())

    def ping(self) -> dict[str, Any]:
        self.next_id += 1
        request = {"method": "GET", "url": "http://x/ping", "headers": [], "body": None}
        self.post({"k": "fetch", "id": self.next_id, "request": request})
        return self.answers.pop(self.next_id)

    def close(self) -> None:
        self.loop.run_until_complete(self.host.close())
        self.loop.close()
        self.thread.shutdown()


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerIsolate]:
    isolate = WorkerIsolate()
    yield isolate
    isolate.close()


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53), 2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=10),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
KINDS = ["fetch", "settle", "drop", "reset", "env", "no-such-kind", "constructor", "__proto__"]
FIELDS = ["id", "t", "v", "e", "request", "vars", "workflows", "of", "k2"]
messages = st.builds(
    lambda kind, fields: {**fields, "k": kind},
    st.one_of(st.sampled_from(KINDS), st.text(max_size=6)),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4),
)
requests = st.fixed_dictionaries(
    {
        "method": st.one_of(st.sampled_from(["GET", "POST", "PUT", ""]), st.text(max_size=5)),
        "url": st.one_of(st.just("http://x/ping"), st.text(max_size=15)),
        "headers": st.one_of(
            st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=3),
            json_values,
        ),
        "body": st.one_of(st.none(), st.text(max_size=8), json_values),
    }
)


@FUZZ
@given(st.lists(messages, max_size=5))
def test_arbitrary_inbound_messages_never_break_the_isolate(
    worker: WorkerIsolate, inbox: list[dict[str, Any]]
) -> None:
    for message in inbox:
        worker.post(message)
    assert worker.isolate.fault is None
    assert not worker.isolate_faults
    assert worker.ping()["response"]["status"] == 200


@FUZZ
@given(requests)
def test_malformed_fetch_messages_get_an_error_answer(
    worker: WorkerIsolate, request: dict[str, Any]
) -> None:
    worker.next_id += 1
    worker.post({"k": "fetch", "id": worker.next_id, "request": request})
    answer = worker.answers.pop(worker.next_id, None)
    if answer is not None:  # an answer, or (for an unread stream body) a hung request
        assert "response" in answer or answer["error"]["name"]
    assert worker.isolate.fault is None
    assert worker.ping()["response"]["status"] == 200


SEND = """(() => {
  const p = __celld_primordials;
  let value;
  try { value = %s; } catch (e) { return p.JSONStringify("skip"); }
  try {
    __celld_host.notify("log", { level: "debug", text: "fuzz", value });
    return p.JSONStringify("sent");
  } catch (e) {
    return p.JSONStringify(e.name + ": " + e.message);
  }
})()"""


@FUZZ
@given(
    st.one_of(
        json_values.map(json.dumps),
        st.integers(1, 3000).map(
            lambda n: f"(() => {{ let v = 1; for (let i = 0; i < {n}; i++) v = [v]; return v; }})()"
        ),
        st.sampled_from(
            [
                "(() => { const o = {}; o.o = o; return o; })()",
                "[1n]",
                "({ toJSON() { throw new Error('no'); } })",
                "new Proxy({}, { ownKeys() { throw new Error('trap'); } })",
                "({ get x() { throw new Error('getter'); } , y: 1 })",
            ]
        ),
    )
)
def test_outbound_values_are_sent_or_refused_clearly(worker: WorkerIsolate, source: str) -> None:
    outcome = json.loads(worker.loop.run_until_complete(worker.isolate.eval(SEND % source)))
    assert outcome in ("sent", "skip") or outcome.startswith("TypeError: celld:"), outcome
    assert worker.isolate.fault is None
    assert worker.ping()["response"]["status"] == 200
