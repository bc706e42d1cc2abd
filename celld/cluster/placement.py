"""Which process of a `--workers N` cluster owns a workflow instance, and where its store is.

An instance's owner is a hash of its workflow and id modulo N, so every process finds the
owner without asking anyone, and two creates of one id meet in one store (which refuses
the second). Instances a cron schedule starts have ids no user can choose (spaces,
``*``); only process 0 runs the schedules, so those ids belong to process 0.

The placement depends on N, so a state folder remembers the N it was sharded over
(``workers.json``): a different ``--workers`` on a folder that still holds instances is
refused with what to do, never served from the wrong shards.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from celld.engine import WorkflowError, validate_instance_id

#: The store file of process 0 is the one a single-process `celld run` uses.
STORE_FILE = "celld.sqlite3"
RECORD_FILE = "workers.json"


def owner_of(workflow: str, instance_id: str, size: int) -> int:
    """The index (0..size-1) of the process that owns this instance."""
    if size <= 1:
        return 0
    try:
        validate_instance_id(instance_id)
    except WorkflowError:
        return 0  # a cron schedule's id (or no valid id: process 0 gives the error)
    return owner_of_key(f"{workflow}\0{instance_id}", size)


def owner_of_key(key: str, size: int) -> int:
    """The process (0..size-1) that owns what `key` names: an instance, a Durable Object,
    a D1 database (celld.cluster.bindings)."""
    if size <= 1:
        return 0
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % size


def store_dir(persist_to: Path, index: int) -> Path:
    """The folder of process `index`'s workflow store (process 0: --persist-to itself).
    `processes/`, not `workers/`: that one holds the session's other Workers by name, and a
    Worker may be named "1"."""
    return persist_to if index == 0 else persist_to / "processes" / str(index)


def recorded_workers(persist_to: Path) -> int | None:
    """The N this state folder's instances were sharded over, if it was ever sharded."""
    try:
        return int(json.loads((persist_to / RECORD_FILE).read_text())["workers"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{persist_to / RECORD_FILE} is damaged ({error}); remove it") from None


def holds_instances(store: Path) -> bool:
    """Whether the workflow store file `store` holds any instance."""
    if not store.exists():
        return False
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return bool(connection.execute("SELECT EXISTS(SELECT 1 FROM instances)").fetchone()[0])
    except sqlite3.OperationalError:  # no instances table yet: never used
        return False
    finally:
        connection.close()


def shards_hold_instances(persist_to: Path, shards: int) -> bool:
    """Whether any of the `shards` process stores of this state folder holds an instance."""
    return any(
        holds_instances(store_dir(persist_to, index) / STORE_FILE) for index in range(shards)
    )


def settle_workers(persist_to: Path, workers: int) -> int:
    """Check and record that this state folder is served by `workers` processes (--workers,
    else celld.cluster.default's choice). Changing the number is refused while any shard
    holds instances (they would be looked for in the wrong store); the number is recorded
    once the folder is sharded."""
    recorded = recorded_workers(persist_to) or 1
    if workers != recorded and shards_hold_instances(persist_to, recorded):
        raise ValueError(
            f"the workflow instances in {persist_to} are sharded over {recorded} "
            f"process(es) (--workers {recorded}); run with --workers {recorded}, or "
            f"delete its instances (or the folder) before changing the number"
        )
    if workers > 1 or (persist_to / RECORD_FILE).exists():
        persist_to.mkdir(parents=True, exist_ok=True)
        (persist_to / RECORD_FILE).write_text(json.dumps({"workers": workers}) + "\n")
    return workers
