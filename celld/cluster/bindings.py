"""Durable Objects and D1 databases in a cluster: each lives in one process.

A Durable Object's storage is one SQLite file its isolate writes synchronously, and its
output gate (celld/isolate/gate.py) assumes one live instance; a D1 database is a SQLite
file whose transactions celld serialises on one thread. So each object and each database
has exactly one owning process, found from a hash of its class and id (a database: its
id) as instances are placed (celld.cluster.placement), and every `do` and `d1` host call
made in another process is forwarded to the owner over the local socket and answered
there, storage included. A restarted owner opens the object's or database's own file
again on the next call. A Durable Object's fetch that answers with a WebSocket keeps the
socket in the owner and relays its frames to the caller (celld.cluster.relay).

Every process runs every Worker of the session: an object is owned by the hash of the
Worker that defines its class, the class and the id, so calls to it from any Worker of
any process meet in one process.

KV namespaces and R2 buckets are not routed: every process opens the same SQLite files
(WAL, synchronous=FULL, SQLite's locks between processes), as `celld kv`/`celld r2`
already do beside a running `celld run` (see DECISIONS.md for the measurements).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from celld.cluster.placement import owner_of_key
from celld.isolate.host import HostError, OpHandler

#: The host operations whose calls run in the owner of what they name.
ROUTED = ("do", "d1")

Forward = Callable[[int, str, dict[str, Any]], Awaitable[Any]]


def owned_key(worker: str, op: str, message: dict[str, Any]) -> str | None:
    """What a call of Worker `worker` is about (None: a malformed call the local handler
    refuses). An object belongs to the Worker that defines its class (`worker` in the
    message when it is another Worker of the session), so calls to it from any Worker
    reach one owner."""
    if op == "d1":
        db = message.get("id")
        return f"d1\0{worker}\0{db}" if isinstance(db, str) else None
    cls, object_id = message.get("cls"), message.get("id")
    if isinstance(cls, str) and isinstance(object_id, str):
        return object_key(hosting_worker(worker, message), cls, object_id)
    return None


def hosting_worker(worker: str, message: dict[str, Any]) -> str:
    """The Worker whose Durable Object a `do` call of Worker `worker` is for."""
    other = message.get("worker")
    return other if isinstance(other, str) and other else worker


def object_key(worker: str, cls: str, object_id: str) -> str:
    return f"do\0{worker}\0{cls}\0{object_id.lower()}"


def opened_socket(answer: Any) -> str | None:
    """The WebSocket end a Durable Object's fetch answered with (a 101), if any."""
    response = answer.get("response") if isinstance(answer, dict) else None
    socket = response.get("webSocket") if isinstance(response, dict) else None
    return socket if isinstance(socket, str) else None


class BindingRouter:
    """Wraps the `do` and `d1` operations of one Worker of one process so calls reach
    their owner."""

    def __init__(self, index: int, size: int, worker: str, forward: Forward) -> None:
        self.index = index
        self.size = size
        self.worker = worker
        self.forward = forward
        #: the handlers that run a call here (forwarded calls from the others use them)
        self.local: dict[str, OpHandler] = {}

    def owner(self, op: str, message: dict[str, Any]) -> int:
        key = owned_key(self.worker, op, message)
        return self.index if key is None else owner_of_key(key, self.size)

    def owns_object(self, cls: str, object_id: str) -> bool:
        """Whether this process runs this Worker's object (cls, id)."""
        return owner_of_key(object_key(self.worker, cls, object_id), self.size) == self.index

    def wrap(self, ops: dict[str, OpHandler]) -> None:
        """Replace the routed operations in `ops` (the dict every isolate is given)."""
        for op in ROUTED:
            if op in ops:
                self.local[op] = ops[op]
                ops[op] = self._routed(op)

    def _routed(self, op: str) -> OpHandler:
        local = self.local[op]

        async def handle(message: dict[str, Any]) -> Any:
            owner = self.owner(op, message)
            if owner == self.index:
                return await local(message)
            return await self.forward(owner, op, message)

        return handle

    async def answer(self, op: str, message: dict[str, Any]) -> Any:
        """A call another process forwarded here (it found this process the owner)."""
        handler = self.local.get(op)
        if handler is None:
            raise HostError(f"celld: this process serves no {op!r} calls")
        return await handler(message)
