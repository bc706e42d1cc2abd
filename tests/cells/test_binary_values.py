"""Binary values (ArrayBuffer, every typed array, DataView) cross the bridge and land in
the store as bytes, and come back as the same type with the same bytes, replays included.
Real isolates, on both stores: a real SQLite file, and a real PostgreSQL database (where
one can be started: tests/postgres_fixtures.py); the params and event payloads a Worker
sends go through real `celld run` processes, killed and restarted between the steps."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from celld.cells.manager import CellSettings
from tests.celld_server import CelldServer
from tests.inprocess import call, params, running_service, wait_for

BINARY = Path(__file__).resolve().parents[1] / "projects" / "binary"
KINDS = [
    "ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array",
    "Uint16Array", "Int32Array", "Uint32Array", "Float32Array", "Float64Array",
    "BigInt64Array", "BigUint64Array",
]  # fmt: skip
START_MS = 1_800_000_000_000
HOUR_MS = 3_600_000


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> str | None:
    """None: SQLite under the test's folder; else a new PostgreSQL database's DSN."""
    if request.param == "sqlite":
        return None
    return str(request.getfixturevalue("postgres_dsn"))


def pattern(size: int, seed: int) -> bytes:
    """The bytes the workflow's `pattern(size, seed)` makes (tests/projects/binary)."""
    return bytes((i * 31 + seed * 7 + (i >> 8)) & 255 for i in range(size))


def described(data: bytes, kind: str) -> dict[str, Any]:
    return {
        "type": kind,
        "size": len(data),
        "own": len(data),
        "sha": hashlib.sha256(data).hexdigest(),
    }


def expected(size: int) -> dict[str, Any]:
    return {kind: described(pattern(size, i), kind) for i, kind in enumerate(KINDS)}


async def kinds_and_lengths(
    state: Path, store: str | None, table: str, column: str, key: str
) -> dict[Any, tuple[str, int]]:
    """{key: (the column's kind, 'blob' or 'text'; its length in bytes)} of `table`."""
    if store is None:
        db = next(state.rglob("*.sqlite3"))
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            rows = connection.execute(
                f"SELECT {key}, typeof({column}), length(CAST({column} AS BLOB)) FROM {table}"
            ).fetchall()
        finally:
            connection.close()
        return {name: (kind, length) for name, kind, length in rows}
    connection = await asyncpg.connect(store)
    try:
        rows = await connection.fetch(
            f"SELECT {key}, CASE WHEN get_byte({column}, 0) = 0 THEN 'blob' ELSE 'text' END, "
            f"length({column}) FROM {table}"
        )
    finally:
        await connection.close()
    return {row[0]: (row[1], row[2]) for row in rows}


@pytest.mark.parametrize("replay_every_step", [False, True])
async def test_every_kind_round_trips_as_bytes(
    tmp_path: Path, replay_every_step: bool, store: str | None
) -> None:
    state = tmp_path / "state"
    settings = CellSettings(replay_every_step=replay_every_step)
    size = 4096
    async with running_service(state, BINARY, cells=settings, store=store) as service:
        await call(service, "binary-workflow", "create", id="b", params=params({"size": size}))
        final = await wait_for(service, "binary-workflow", ["b"], {"complete", "errored"})
        assert final["b"]["status"] == "complete", final
        assert orjson.loads(final["b"]["output"]) == expected(size)
    # Each result is one BLOB: its bytes and a few dozen bytes of JSON, no base64.
    found = await kinds_and_lengths(state, store, "steps", "value", "name")
    for kind in KINDS:
        kind_of, length = found[f"kind {kind}"]
        assert kind_of == "blob", (kind, kind_of)
        assert size < length < size + 100, (kind, length)


async def test_step_result_limit_counts_bytes(tmp_path: Path, store: str | None) -> None:
    """1,000,000 bytes fit the 1 MiB limit (their base64 would not); 1,048,577 do not, and
    the attempt fails with Cloudflare's error."""
    state = tmp_path / "state"
    payload = {"size": 8, "kinds": ["Uint8Array"], "fits": 1_000_000, "tooLarge": 1_048_577}
    async with running_service(state, BINARY, store=store) as service:
        await call(service, "binary-workflow", "create", id="big", params=params(payload))
        final = await wait_for(service, "binary-workflow", ["big"], {"complete", "errored"})
    assert final["big"]["status"] == "errored", final
    error = final["big"]["error"]
    assert error["message"] == (
        "WorkflowInternalError: Step too large-1 output is too large. Maximum allowed size is 1MiB."
    ), error
    found = await kinds_and_lengths(state, store, "steps", "value", "name")
    kind_of, length = found["fits"]
    assert kind_of == "blob" and 1_000_000 < length < 1_000_100, found["fits"]


def _until(server: CelldServer, what: str, condition: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        view = server.describe("binary-workflow", "p")
        if condition(view):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}: {view}")
        time.sleep(0.05)


def _has_step(name: str) -> Any:
    return lambda view: any(row["name"] == name for row in view["steps"])


async def test_params_and_event_payload_from_js_as_bytes(tmp_path: Path, store: str | None) -> None:
    """A Worker creates an instance with an ArrayBuffer as params and sends it a
    Uint8Array as an event payload; both are stored as bytes, and reach the run with the
    same type and bytes after celld is killed and restarted (replays from the store): once
    with the event buffered before its wait, once with the wait done."""
    state = tmp_path / "state"
    args = ("--store", store) if store else ()
    sizes = (70_000, 90_000)

    def server(at: int) -> CelldServer:
        return CelldServer(BINARY, state, manual_clock=at, args=args).start()

    def first_life() -> None:
        node = server(START_MS)
        try:
            created = node.post("/create", params={"id": "p", "size": sizes[0]})
            assert created.status_code == 200, created.text
            _until(node, "asleep before the event", _has_step("before the event"))
            sent = node.post("/event", params={"id": "p", "size": sizes[1]})
            assert sent.status_code == 200, sent.text
        finally:
            node.kill()

    await asyncio.to_thread(first_life)
    # The params and the buffered event are stored as bytes, not base64.
    (params_kind, params_length) = (await kinds_and_lengths(
        state, store, "instances", "params", "id"
    ))["p"]  # fmt: skip
    assert params_kind == "blob" and sizes[0] < params_length < sizes[0] + 100
    (payload_kind, payload_length) = (await kinds_and_lengths(
        state, store, "events", "payload", "type"
    ))["bytes"]  # fmt: skip
    assert payload_kind == "blob" and sizes[1] < payload_length < sizes[1] + 100

    def second_life() -> None:  # the first sleep is over: the wait takes the buffered event
        node = server(START_MS + 2 * HOUR_MS)
        try:
            _until(node, "asleep after the event", _has_step("after the event"))
        finally:
            node.kill()

    await asyncio.to_thread(second_life)

    def third_life() -> dict[str, Any]:  # a replay of the wait done, to the end
        node = server(START_MS + 4 * HOUR_MS)
        try:
            # (the second life may have been killed before its last sleep was committed:
            # then it starts again here, an hour from now)
            view = _until(node, "asleep after the event", _has_step("after the event"))
            row = next(row for row in view["steps"] if row["name"] == "after the event")
            if row["state"] != "done" and row["wake_at"] > START_MS + 4 * HOUR_MS:
                # asleep until an hour from now: nothing of the run is in flight, so the
                # clock may jump (a jump while run() awaits its digest outside a step
                # would pass the 60 s it may wait on work outside a step)
                node.advance(2 * HOUR_MS)
            return dict(_until(node, "complete", lambda view: view["status"] == "complete"))
        finally:
            node.stop()

    view = await asyncio.to_thread(third_life)
    assert orjson.loads(view["output"]) == {
        "param": described(pattern(sizes[0], 21), "ArrayBuffer"),
        "event": described(pattern(sizes[1], 22), "Uint8Array"),
    }, view["output"]
