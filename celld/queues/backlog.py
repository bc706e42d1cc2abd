"""What one queue holds, in memory: messages waiting for their time, ready, or in flight.

The store is the truth (it is read back whole at start); this is its index, so that forming
a batch never scans the disk. Messages carry no bodies here: a batch reads its bodies when it
is delivered.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, replace

from celld.queues.store import StoredMessage


@dataclass
class Backlog:
    #: (visible_at, seq) of messages not yet visible
    delayed: list[tuple[int, int]]
    #: (visible_at, seq) of messages ready, oldest first
    ready: deque[tuple[int, int]]
    messages: dict[int, StoredMessage]
    in_flight: set[int]
    #: bytes of the bodies of `messages`
    size: int = 0
    #: seqs that left while a read of the store was in progress (broker.py `_read`)
    removed: set[int] | None = None

    @classmethod
    def empty(cls) -> Backlog:
        return cls([], deque(), {}, set())

    def add(self, message: StoredMessage) -> None:
        old = self.messages.get(message.seq)
        self.size += message.size - (old.size if old is not None else 0)
        self.messages[message.seq] = message
        heapq.heappush(self.delayed, (message.visible_at, message.seq))

    def clear(self) -> None:
        """Forget everything (the queue moved to another owner, or is read again whole)."""
        self.delayed.clear()
        self.ready.clear()
        self.messages.clear()
        self.in_flight.clear()
        self.size = 0

    def promote(self, now_ms: int) -> None:
        """Move the messages whose time has come to the ready line."""
        while self.delayed and self.delayed[0][0] <= now_ms:
            self.ready.append(heapq.heappop(self.delayed))

    @property
    def ready_count(self) -> int:
        return len(self.ready)

    @property
    def oldest_ready(self) -> int | None:
        return self.ready[0][0] if self.ready else None

    @property
    def next_visible(self) -> int | None:
        return self.delayed[0][0] if self.delayed else None

    def take(self, count: int) -> list[StoredMessage]:
        """Up to `count` ready messages, now in flight."""
        batch = []
        while self.ready and len(batch) < count:
            _, seq = self.ready.popleft()
            self.in_flight.add(seq)
            batch.append(self.messages[seq])
        return batch

    def done(self, seq: int) -> StoredMessage | None:
        """A message in flight leaves this queue (acknowledged, dropped or moved)."""
        self.in_flight.discard(seq)
        message = self.messages.pop(seq, None)
        if message is not None:
            self.size -= message.size
        if self.removed is not None:
            self.removed.add(seq)
        return message

    def again(self, seq: int, visible_at: int, failed: int) -> None:
        """A message in flight waits for another delivery."""
        self.in_flight.discard(seq)
        message = replace(self.messages[seq], visible_at=visible_at, failed=failed)
        self.add(message)

    def back(self, seq: int) -> None:
        """A delivery whose outcome could not be stored: the message is ready again, as it
        is on disk."""
        self.in_flight.discard(seq)
        message = self.messages[seq]
        heapq.heappush(self.delayed, (message.visible_at, seq))

    def metrics(self) -> dict[str, int]:
        """Cloudflare's `metrics()`: messages not yet acknowledged, their bytes, and the
        timestamp of the one that arrived first (0 when there is none)."""
        first = next(iter(self.messages.values()), None)
        return {
            "backlogCount": len(self.messages),
            "backlogBytes": self.size,
            "oldestMessageTimestamp": first.timestamp_ms if first is not None else 0,
        }
