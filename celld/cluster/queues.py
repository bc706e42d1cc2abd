"""Queues on `celld run --workers N`: each queue's consumer runs in one process.

Every process opens the same queue file (celld/queues/store.py) and commits what its
producers send there before the send resolves. A queue belongs to process
blake2b("queue", name) mod N, as Durable Objects are placed: only that process indexes,
delivers and settles its messages, so `max_concurrency`, `max_batch_size` and
`max_batch_timeout` hold for the whole cluster and no message is handed to two consumers.
A process that committed rows of a queue it does not own tells the owner which (a
``queue`` call over the channel); a call that fails (the owner is restarting) is only
logged, since the restarted owner reads its queues from the file, and every owner reads
them again every few seconds (celld/queues/placement.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from celld.cluster.placement import owner_of_key

log = logging.getLogger("celld.queues")

Call = Callable[[int, dict[str, Any]], Awaitable[Any]]


def queue_key(queue: str) -> str:
    return f"queue\0{queue}"


class ProcessPlacement:
    """The queue placement of one process of a `--workers N` cluster."""

    shared = True

    def __init__(self, index: int, size: int, call: Call) -> None:
        self.index = index
        self.size = size
        self.call = call
        self._telling: set[asyncio.Task[None]] = set()

    def owner(self, queue: str) -> int:
        return owner_of_key(queue_key(queue), self.size)

    def owns(self, queue: str) -> bool:
        return self.owner(queue) == self.index

    def arrived(self, queue: str, seqs: list[int]) -> None:
        task = asyncio.get_running_loop().create_task(self._tell(queue, seqs))
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    async def _tell(self, queue: str, seqs: list[int]) -> None:
        owner = self.owner(queue)
        try:
            await self.call(owner, {"kind": "queue", "queue": queue, "seqs": seqs})
        except Exception as error:  # the owner reads the file again when it is back
            log.warning(
                "queue %s: could not tell process %d of %d new message(s): %s "
                "(it reads them from the queue file)",
                queue, owner, len(seqs), error,
            )  # fmt: skip
