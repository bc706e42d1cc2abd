"""A step's result may reach JS before its commit lands, but nothing the workflow does
after it acts outside celld until then: the next step's `fetch` reaches the outside
only once the result before it is in the store (what the early answer saves in commits:
tests/cells/test_start_commit.py)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from tests.e2e.counter import counter_server
from tests.inprocess import call, params, running_service, until


def _done_steps(db: Path, instance: str) -> set[str]:
    """The step rows the store holds as finished right now (a reader of its own)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT name FROM steps WHERE instance_id = ? AND state = 'done'", (instance,)
        ).fetchall()
    finally:
        connection.close()
    return {name for (name,) in rows}


def _lock_for(db: Path, seconds: float) -> None:
    connection = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")

    def unlock() -> None:
        connection.execute("COMMIT")
        connection.close()

    threading.Timer(seconds, unlock).start()


async def test_nothing_acts_outside_before_the_result_before_it_is_durable(
    tmp_path: Path,
) -> None:
    seen: dict[str, set[str]] = {}
    async with running_service(tmp_path / "state") as service:
        assert service.store is not None
        db = Path(service.store.path)  # type: ignore[attr-defined]
        with counter_server() as counter:
            record = counter.record

            def recording(step: str, value: str) -> None:
                # what the store holds when the outside hears of this step's callback
                seen.setdefault(step, _done_steps(db, "one"))
                record(step, value)
                if step == "one/a#1":
                    # another writer holds the store for a second from now: a's result
                    # is answered to JS meanwhile, but cannot be committed until then
                    _lock_for(db, 1.0)

            counter.record = recording  # type: ignore[method-assign]
            await call(
                service, "harness-workflow", "create", id="one",
                params=params({"upstream": counter.url}),
            )  # fmt: skip
            # a, b (a retry a second later), a two-second sleep, then c1 and c2 at once
            await until(lambda: "one/c1#1" in seen and "one/c2#1" in seen, "c1 and c2 ran")
    # b's callback ran after a's result was answered: a was durable before b's fetch left
    assert "a" in seen["one/b#1"], seen
    assert {"a", "b"} <= seen["one/c1#1"], seen
