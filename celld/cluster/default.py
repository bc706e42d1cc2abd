"""How many processes `celld run` runs when `--workers` is not given: one per core, unless
that would strand state.

The order, first that applies:

1. a state folder sharded (its ``workers.json``) whose shards hold instances: that
   number, since placement depends on it and instances cannot be moved between shards
   (an empty one may take any number);
2. a folder holding workflow instances from a run with one process: 1, said with how to
   use every core (resharding is not supported, so a changed number would be refused);
3. ``--store postgresql://...``: 1, quietly: nodes are the unit there (several `celld
   run` nodes on one database), and `--workers N` with it is refused;
4. else one process per core this process may run on.

Cores are counted with ``os.sched_getaffinity(0)`` where the system has it (Linux): a
`celld run` started under ``taskset`` or in a container limited to some CPUs
(``--cpuset-cpus``) runs on those only, and more processes than that would contend for
them. ``os.cpu_count()`` (every core of the machine) elsewhere. A CPU quota (``docker
--cpus``) is not a CPU set and is not seen by either: give ``--workers`` there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from celld.cluster.placement import (
    STORE_FILE,
    holds_instances,
    recorded_workers,
    shards_hold_instances,
)
from celld.store.choice import is_postgres


@dataclass(frozen=True)
class DefaultWorkers:
    """The number of processes without `--workers`, and why it is not one per core (a
    line for the log; None when there is nothing to say)."""

    count: int
    said: str | None = None


def cores() -> int:
    """The cores this process may run on (module docstring: why not always cpu_count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def default_workers(folders: Sequence[Path], store: str | None) -> DefaultWorkers:
    """The number of processes for a session whose Workers keep their state in `folders`
    (the served Worker's first) when `--workers` is not given."""
    for folder in folders:
        recorded = recorded_workers(folder)
        if recorded is not None and shards_hold_instances(folder, recorded):
            return DefaultWorkers(recorded)
    for folder in folders:
        if holds_instances(folder / STORE_FILE):
            return DefaultWorkers(
                1,
                f"one process: {folder} holds workflow instances from a run with one "
                "process, and instances cannot be moved between processes. To use every "
                "core, serve a new state folder (--persist-to) or delete its instances, "
                "then run without --workers (or with --workers N); --workers 1 keeps this "
                "folder as it is without this line",
            )
    if is_postgres(store):
        return DefaultWorkers(1)
    return DefaultWorkers(cores())
