"""Which process or node runs a queue's consumer when several share its messages.

Every process of `celld run --workers N`, and every node on one PostgreSQL store, may send
to any queue: a send commits its rows to the shared store (the queue file every process
opens, or the ``queue_messages`` table) before it resolves, so a `kill -9` of any of them
loses no acknowledged send. But a queue has one consumer across the whole cluster, as on
Cloudflare: exactly one process or node *owns* it, keeps its backlog in memory, forms its
batches (`max_batch_size`, `max_batch_timeout`), runs at most `max_concurrency` of them at
once, and settles their outcomes (retries, dead letter queue). The others only insert and
then tell the owner which rows are new (`arrived`); an owner also reads its queues again
from the store every `RESYNC_S`, so a message whose sender died before telling it (or
whose notification was lost) is still delivered.

Three placements:

* `Alone`: one process owns every queue (a plain `celld run`).
* `ProcessPlacement` (celld.cluster.member): `--workers N`; a queue belongs to process
  blake2b("queue", name) mod N, fixed, as Durable Objects are placed; a dead owner is
  restarted by the parent and reads its queues' messages from the file again.
* `NodePlacement` (celld.queues.pgqueues): PostgreSQL nodes; a queue belongs to the node
  whose fencing token its ``queue_consumers`` row names, claimed as Durable Objects are
  (free, or its owner's lease ran out), and a settle from a node that lost it is refused
  (`QueueFenced`), so after a lease expiry a batch may be delivered twice, never settled
  twice.
"""

from __future__ import annotations

from typing import Protocol

#: Seconds between an owner's reads of its queues from the store (what it was not told).
RESYNC_S = 2.0
#: Every this many reads, the whole queue is read (the others read what follows the last).
FULL_EVERY = 15


class QueueFenced(Exception):
    """This process or node no longer owns the queue: its batch's outcome was not stored."""


class QueuePlacement(Protocol):
    #: whether other processes or nodes share the messages (an owner reads them again)
    shared: bool

    def owns(self, queue: str) -> bool:
        """Whether this process runs `queue`'s consumer (and keeps its backlog)."""
        ...

    def arrived(self, queue: str, seqs: list[int]) -> None:
        """Tell `queue`'s owner (not this process) that rows `seqs` were committed."""
        ...


class Alone:
    """One process: every queue is its own."""

    shared = False

    def owns(self, queue: str) -> bool:
        return True

    def arrived(self, queue: str, seqs: list[int]) -> None:
        raise AssertionError("a process alone owns every queue")
