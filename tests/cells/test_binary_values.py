"""Binary values (ArrayBuffer, every typed array, DataView) cross the bridge and land in
the store as bytes, and come back as the same type with the same bytes, replays included.
Real isolates, a real SQLite file (PostgreSQL where CELLD_TEST_POSTGRES is set)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from celld.cells.manager import CellSettings
from tests.inprocess import call, params, running_service, wait_for

BINARY = Path(__file__).resolve().parents[1] / "projects" / "binary"
KINDS = [
    "ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array",
    "Uint16Array", "Int32Array", "Uint32Array", "Float32Array", "Float64Array",
    "BigInt64Array", "BigUint64Array",
]  # fmt: skip


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


def stored_values(state: Path) -> dict[str, tuple[str, int]]:
    """step name -> (SQLite's type of its stored value, its length in bytes)."""
    db = next(state.rglob("*.sqlite*"))
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = connection.execute(
            "SELECT name, typeof(value), length(CAST(value AS BLOB)) FROM steps"
        ).fetchall()
    finally:
        connection.close()
    return {name: (kind, length) for name, kind, length in rows}


@pytest.mark.parametrize("replay_every_step", [False, True])
async def test_every_kind_round_trips_as_bytes(tmp_path: Path, replay_every_step: bool) -> None:
    state = tmp_path / "state"
    settings = CellSettings(replay_every_step=replay_every_step)
    size = 4096
    async with running_service(state, BINARY, cells=settings) as service:
        await call(service, "binary-workflow", "create", id="b", params=params({"size": size}))
        final = await wait_for(service, "binary-workflow", ["b"], {"complete", "errored"})
        assert final["b"]["status"] == "complete", final
        assert orjson.loads(final["b"]["output"]) == expected(size)
    # Each result is one BLOB: its bytes and a few dozen bytes of JSON, no base64.
    stored = stored_values(state)
    for kind in KINDS:
        kind_of, length = stored[f"kind {kind}"]
        assert kind_of == "blob", (kind, kind_of)
        assert size < length < size + 100, (kind, length)
