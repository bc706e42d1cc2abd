"""WebSockets between the processes of a cluster: a Durable Object's socket, relayed.

A client's connection is accepted by whichever process took it; the Durable Object that
answers its upgrade runs in its owning process (celld.cluster.bindings), which makes the
socket's pair in its own hub and accepts the server end there, hibernatable or not. The
client end the object answers with cannot leave that process, so the calling process
makes a pair of its own: one end goes to the caller's JS in place of the object's (and
from there to the client's connection), the other is *linked* to the object's client
end. A linked end's sink posts every event it receives over the cluster channel to the
other process, which has its own linked end send it (SocketHub.send), so each side sees
exactly the events it would in one process, closes and their codes included.

Hibernation is untouched: the object's server end stays in its owner's hub, whose
events wake the object there (celld/objects/manager.py), and its idle eviction frees the
isolate while the link holds the socket open.

The object's client end gets no sink until the caller *claims* it (a post naming the
caller's end): frames the object sends before the claim wait in that end's backlog, so
none overtakes the answer that introduced the socket. A process that loses its channel
connection to a peer (the peer stopped or was killed) ends every link through it:
the client's end closes with 1011 in the calling process (the object is gone with its
process, as a restart of one process closes its sockets), and the object's end sees the
client go away (1006, not clean) in the owner.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from celld.isolate.websockets import GONE_REASON, End, Event, SocketHub

log = logging.getLogger("celld.cluster")

#: The close a client sees when the process running its Durable Object stops.
OWNER_GONE = (1011, "the celld process running this WebSocket's Durable Object stopped")

#: (peer, post) -> None: sends a post to process `peer` (celld.cluster.channel)
Post = Callable[[int, dict[str, Any]], None]


@dataclass(eq=False)
class LinkSink:
    """The sink of a linked end: what it receives, its twin in `peer` sends."""

    links: Links
    peer: int
    worker: str
    twin: str

    def deliver(self, end: End, event: Event) -> None:
        if not self.links.linked(end):
            return  # the link ended with its peer process: nothing goes there any more
        self.links.post(self.peer, {"kind": "ws", "worker": self.worker, "to": self.twin,
                                    "event": event})  # fmt: skip
        if end.done:
            self.links.forget(end)


@dataclass
class Links:
    """The linked ends of one process, by the peer each is linked through."""

    index: int
    post: Post
    #: the socket hub of a Worker of this process, by name (None: no such Worker)
    hubs: Callable[[str], SocketHub | None]
    #: peer -> end id -> (its hub, the end, the close it gets if the peer stops)
    _by_peer: dict[int, dict[str, tuple[SocketHub, End, tuple[int, str]]]] = field(
        default_factory=dict
    )

    # -- the calling process ------------------------------------------------------------

    def adopt(self, worker: str, owner: int, owner_worker: str, remote: str) -> str:
        """The object in process `owner` (its Worker `owner_worker`) answered with its end
        `remote`: a local end linked to it, for Worker `worker`'s JS to use instead."""
        hub = self.hubs(worker)
        if hub is None:
            raise LookupError(f"celld: no Worker {worker!r} runs in this process")
        mine, linked = hub.pair(f"link-{uuid.uuid4().hex}")
        self._keep(owner, hub, linked, OWNER_GONE)
        claim = {"kind": "ws.claim", "worker": owner_worker, "end": remote}
        self.post(owner, {**claim, "peer": self.index, "peer_worker": worker, "twin": linked.id})
        hub.attach(linked, LinkSink(self, owner, owner_worker, remote))
        return mine.id

    # -- the owning process -------------------------------------------------------------

    def claim(self, head: dict[str, Any]) -> None:
        """Process `peer` took the object's end `end`: its events go there from now on."""
        peer, twin, peer_worker = int(head["peer"]), str(head["twin"]), str(head["peer_worker"])
        hub = self.hubs(str(head["worker"]))
        end = hub.ends.get(head["end"]) if hub is not None else None
        if hub is None or end is None or end.sink is not None:
            # this process restarted since it answered (or the end was taken): the
            # caller's socket ends as if the object's process had stopped
            log.warning("a relayed WebSocket %s is not here to claim", head["end"])
            self.post(peer, {"kind": "ws.gone", "worker": peer_worker, "to": twin})
            return
        self._keep(peer, hub, end, (1006, GONE_REASON))  # as a client that went away
        hub.attach(end, LinkSink(self, peer, peer_worker, twin))

    # -- both -----------------------------------------------------------------------------

    def received(self, head: dict[str, Any]) -> None:
        """A post from the twin of one of this process's linked ends."""
        hub = self.hubs(str(head.get("worker")))
        end = hub.ends.get(head.get("to")) if hub is not None else None  # type: ignore[arg-type]
        if hub is None or end is None:
            return  # closed here already (both sides' closes crossed): nothing to deliver
        if head["kind"] == "ws.gone":
            self.forget(end)
            hub.gone(end, *OWNER_GONE)
            return
        hub.send(end, head["event"])
        if end.done:
            self.forget(end)

    def lost(self, peer: int) -> None:
        """The channel connection to `peer` ended: every link through it ends."""
        linked = self._by_peer.pop(peer, {})
        for hub, end, (code, reason) in linked.values():
            if hub.ends.get(end.id) is end:
                hub.gone(end, code, reason)
        if linked:
            log.warning("process %d stopped: %d relayed WebSockets closed", peer, len(linked))

    def linked(self, end: End) -> bool:
        return any(end.id in linked for linked in self._by_peer.values())

    def forget(self, end: End) -> None:
        for linked in self._by_peer.values():
            linked.pop(end.id, None)

    def _keep(self, peer: int, hub: SocketHub, end: End, close: tuple[int, str]) -> None:
        self._by_peer.setdefault(peer, {})[end.id] = (hub, end, close)

    def count(self) -> dict[str, int]:
        """Linked ends held here: for a client whose object runs elsewhere ("client"),
        and for an object whose client is connected elsewhere ("object")."""
        sides = {"client": 0, "object": 0}
        for linked in self._by_peer.values():
            for _, _, close in linked.values():
                sides["client" if close == OWNER_GONE else "object"] += 1
        return sides
