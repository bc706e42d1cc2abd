"""One process of a `--workers N` cluster: what it does besides being a `celld run`.

The parent gives each child its place in the environment (`from_environment`). The child
runs every Worker of the session; it keeps their workflow instances in its own stores
(`store_dir`), runs the cron schedules only as process 0, routes Workflow binding calls
to their owners (`route`), answers the calls the others send it over its local socket
(`start`, once for the session), relays the WebSockets of Durable Objects another
process owns (celld.cluster.relay), and tells the parent once it listens (`ready`). It
stops itself if the parent is gone, so a killed parent leaves no children serving behind
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import orjson
from starlette.types import ASGIApp

from celld.cells.clock import ManualClock
from celld.cluster.bindings import BindingRouter, hosting_worker, opened_socket
from celld.cluster.channel import (
    ChannelClient,
    ChannelServer,
    PeerLost,
    PeerUnavailable,
    Reply,
    socket_path,
)
from celld.cluster.http import ClusterRoutes
from celld.cluster.placement import store_dir
from celld.cluster.queues import ProcessPlacement
from celld.cluster.relay import Links
from celld.cluster.router import WorkflowRouter
from celld.isolate.host import HostError, OpHandler, error_shape
from celld.isolate.websockets import SocketHub

if TYPE_CHECKING:
    from celld.cells.manager import CellManager
    from celld.queues.broker import QueueBroker
    from celld.server.service import Service

log = logging.getLogger("celld.cluster")

ENV_INDEX = "CELLD_CLUSTER_INDEX"
ENV_SIZE = "CELLD_CLUSTER_SIZE"
ENV_DIR = "CELLD_CLUSTER_DIR"
ENV_SOCKET_FD = "CELLD_CLUSTER_SOCKET_FD"
ENV_READY_FD = "CELLD_CLUSTER_READY_FD"
#: the manual clock's latest time, so a restarted child starts where the others are
CLOCK_FILE = "clock"


@dataclass
class Member:
    index: int
    size: int
    folder: Path
    socket_fd: int
    ready_fd: int
    _peers: dict[int, ChannelClient] = field(default_factory=dict)
    _server: ChannelServer | None = None
    #: each Worker's own Workflow binding operation, by Worker name
    _local_ops: dict[str, Any] = field(default_factory=dict)
    _app: ASGIApp | None = None
    _clock: ManualClock | None = None
    _watch: asyncio.Task[None] | None = None
    #: each Worker's Durable Object and D1 routing, by Worker name
    _bindings: dict[str, BindingRouter] = field(default_factory=dict)
    #: the session's Workers that started in this process, by name
    _services: dict[str, Service] = field(default_factory=dict)
    _links: Links | None = None
    #: how this process loads each Worker (by its place in the session) again when
    #: process 0, which alone watches the files, says they changed (celld.server.reload)
    reloads: dict[int, Callable[[], Awaitable[str | None]]] = field(default_factory=dict)
    #: the session's queues (their owner's side of the `queue` calls)
    _queues: QueueBroker | None = None
    #: how long process 0 waits for another process to load a new version
    #: (`CELLD_RELOAD_WAIT_S`, default 30 s): a stopped process must not stall the watch
    reload_wait_s: float = field(
        default_factory=lambda: float(os.environ.get("CELLD_RELOAD_WAIT_S", "30"))
    )

    @classmethod
    def from_environment(cls) -> Member | None:
        if ENV_INDEX not in os.environ:
            return None
        return cls(
            int(os.environ[ENV_INDEX]),
            int(os.environ[ENV_SIZE]),
            Path(os.environ[ENV_DIR]),
            int(os.environ[ENV_SOCKET_FD]),
            int(os.environ[ENV_READY_FD]),
        )

    # -- hooks into celld run ---------------------------------------------------------

    def store_dir(self, persist_to: Path) -> Path:
        return store_dir(persist_to, self.index)

    @property
    def runs_schedules(self) -> bool:
        return self.index == 0

    def clock_start(self) -> int | None:
        """Where a manual clock starts: where the cluster's is now."""
        try:
            return int((self.folder / CLOCK_FILE).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def route(self, cells: CellManager, worker: str) -> None:
        """Wrap Worker `worker`'s Workflow binding so calls reach their instance's owner."""
        local = self._local_ops[worker] = cells.ops["wf.binding"]

        def forward(owner: int, message: dict[str, Any]) -> Any:
            return self._forward_op(owner, worker, message)

        cells.ops["wf.binding"] = WorkflowRouter(self.index, self.size, local, forward).handle

    def _router(self, worker: str) -> BindingRouter:
        if worker not in self._bindings:

            async def forward(owner: int, op: str, message: dict[str, Any]) -> Any:
                return await self._forward_binding(owner, worker, op, message)

            self._bindings[worker] = BindingRouter(self.index, self.size, worker, forward)
        return self._bindings[worker]

    def route_bindings(self, ops: dict[str, OpHandler], worker: str) -> None:
        """Wrap Worker `worker`'s Durable Object and D1 operations so calls reach their
        owner."""
        self._router(worker).wrap(ops)

    def owns_object(self, worker: str, cls: str, object_id: str) -> bool:
        """Whether this process runs Worker `worker`'s object (its alarms fire only here)."""
        return self._router(worker).owns_object(cls, object_id)

    def place_queues(self, broker: QueueBroker) -> None:
        """Each queue's consumer runs in one process (celld.cluster.queues); before the
        broker opens (it indexes only its own queues)."""
        self._queues = broker
        broker.placement = ProcessPlacement(self.index, self.size, self._tell_queue)

    async def _tell_queue(self, owner: int, head: dict[str, Any]) -> None:
        reply, _ = await self._call(owner, head, what="queue")
        if "error" in reply:
            raise HostError(reply["error"])

    def wrap(self, app: ASGIApp) -> ASGIApp:
        self._app = app
        return ClusterRoutes(app, self.index, self.size, self._forward_http, self._clock_moved)

    async def start(self, service: Service) -> None:
        """Worker `service` started here; the first to start opens the local socket."""
        self._services[service.project.name] = service
        if self._server is not None:
            return
        if isinstance(service.options.clock, ManualClock):
            self._clock = service.options.clock
        self._links = Links(self.index, self._post, self._hub)
        self._server = ChannelServer(
            socket_path(self.folder, self.index), self._answer, self._posted
        )
        await self._server.start()
        self._watch = asyncio.create_task(self._watch_parent(os.getppid()))

    async def stop(self, service: Service) -> None:
        """Worker `service` stops; the last to stop closes the local socket."""
        self._services.pop(service.project.name, None)
        if self._services:
            return
        if self._watch is not None:
            self._watch.cancel()
        if self._server is not None:
            await self._server.stop()
        for peer in self._peers.values():
            await peer.close()

    def relayed(self) -> dict[str, int]:
        """WebSockets relayed to or from another process (celld.cluster.relay), by side."""
        return self._links.count() if self._links is not None else {"client": 0, "object": 0}

    def ready(self) -> None:
        """Tell the parent this process listens (one byte on its pipe)."""
        os.write(self.ready_fd, b"r")

    # -- calls to and from the other processes ----------------------------------------

    def _peer(self, index: int) -> ChannelClient:
        if index not in self._peers:
            self._peers[index] = ChannelClient(
                socket_path(self.folder, index), on_lost=lambda: self._lost(index)
            )
        return self._peers[index]

    def _lost(self, index: int) -> None:
        if self._links is not None:
            self._links.lost(index)

    def _hub(self, worker: str) -> SocketHub | None:
        service = self._services.get(worker)
        return service.sockets if service is not None else None

    def _post(self, peer: int, head: dict[str, Any]) -> None:
        client = self._peer(peer)
        client.post(head)

    def _posted(self, head: dict[str, Any]) -> None:
        """A post from another process: a relayed WebSocket's frame or claim."""
        assert self._links is not None
        if head.get("kind") == "ws.claim":
            self._links.claim(head)
            self._peer(int(head["peer"])).connect_soon()  # to notice the caller stop
        elif head.get("kind") in ("ws", "ws.gone"):
            self._links.received(head)
        else:
            log.error("an unknown post from another process: %r", head.get("kind"))

    async def _call(
        self, owner: int, head: dict[str, Any], body: bytes = b"", what: str = "instance"
    ) -> Any:
        try:
            return await self._peer(owner).call(head, body)
        except PeerUnavailable:
            raise HostError(
                f"celld's process {owner}, which owns this {what}, is not running (it is "
                "being restarted); nothing was changed: retry the call"
            ) from None
        except PeerLost:
            raise HostError(
                f"celld's process {owner}, which owns this {what}, stopped during the "
                f"call; it is restarted, but whether the call took effect is unknown: "
                f"check the {what} before retrying"
            ) from None

    async def _forward_op(self, owner: int, worker: str, message: dict[str, Any]) -> Any:
        reply, _ = await self._call(owner, {"kind": "op", "worker": worker, "message": message})
        if "error" in reply:
            raise HostError(reply["error"], reply.get("name") or "Error")
        return reply.get("ok")

    async def _forward_binding(
        self, owner: int, worker: str, op: str, message: dict[str, Any]
    ) -> Any:
        what = "Durable Object" if op == "do" else "D1 database"
        head = {"kind": "binding", "op": op, "worker": worker, "message": message}
        reply, _ = await self._call(owner, head, what=what)
        if "error" in reply:
            raise HostError(reply["error"], reply.get("name") or "Error")
        answer = reply.get("ok")
        remote = opened_socket(answer) if op == "do" else None
        if remote is not None:  # the object's WebSocket: relayed from its owner
            assert self._links is not None
            hosting = hosting_worker(worker, message)
            answer["response"]["webSocket"] = self._links.adopt(worker, owner, hosting, remote)
        return answer

    async def _forward_http(
        self, owner: int, request: dict[str, Any], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        try:
            reply, answer = await self._call(owner, {"kind": "http", "request": request}, body)
        except HostError as error:
            return 503, [("content-type", "text/plain")], f"{error}\n".encode()
        if "error" in reply:
            return 500, [("content-type", "text/plain")], f"{reply['error']}\n".encode()
        return reply["status"], [tuple(h) for h in reply["headers"]], answer  # type: ignore[misc]

    async def reload_others(self, worker: int) -> dict[int, str]:
        """Tell every other process to load Worker number `worker` of the session again
        (this one, process 0, watched, built and reloaded it); what went wrong, by
        process, as the end of a sentence that starts "process N". A process being
        restarted is waited for (it may already load the new files); one that does not
        answer within `reload_wait_s` (stopped, or stuck in a load) is not, so that
        process 0 goes on watching: the request stays with it and it loads the new
        version when it runs again."""
        peers = [peer for peer in range(self.size) if peer != self.index]
        outcomes = await asyncio.gather(
            *(
                asyncio.wait_for(
                    self._peer(peer).call({"kind": "reload", "worker": worker}),
                    self.reload_wait_s,
                )
                for peer in peers
            ),
            return_exceptions=True,
        )
        failed: dict[int, str] = {}
        for peer, outcome in zip(peers, outcomes, strict=True):
            if isinstance(outcome, PeerUnavailable):
                failed[peer] = "is being restarted (it starts on the files as they are)"
            elif isinstance(outcome, PeerLost):
                failed[peer] = "stopped while loading (restarted on the files as they are)"
            elif isinstance(outcome, TimeoutError):
                failed[peer] = (
                    f"did not answer within {self.reload_wait_s:g} s (it loads the new "
                    "version when it answers; until then it serves the previous one)"
                )
            elif isinstance(outcome, BaseException):
                raise outcome
            elif "error" in outcome[0]:
                failed[peer] = (
                    f"could not load the new version: {outcome[0]['error']}\n"
                    "(its previous version keeps serving until the next change)"
                )
        return failed

    async def _clock_moved(self, answer: bytes) -> None:
        now = int(orjson.loads(answer)["now"])
        (self.folder / f"{CLOCK_FILE}.{self.index}").write_text(str(now))
        os.replace(self.folder / f"{CLOCK_FILE}.{self.index}", self.folder / CLOCK_FILE)
        peers = [peer for peer in range(self.size) if peer != self.index]
        outcomes = await asyncio.gather(
            *(self._call(peer, {"kind": "clock", "now": now}) for peer in peers),
            return_exceptions=True,
        )
        for peer, outcome in zip(peers, outcomes, strict=True):
            if isinstance(outcome, HostError):
                # it is restarting: it starts from the clock file written above
                log.warning("the test clock could not be moved in process %d: %s", peer, outcome)
            elif isinstance(outcome, BaseException):
                raise outcome

    async def _answer(self, head: dict[str, Any], body: bytes) -> Reply:
        kind = head.get("kind")
        if kind == "op":
            local = self._local_ops.get(head.get("worker"))  # type: ignore[arg-type]
            if local is None:
                missing = f"celld: no Worker {head.get('worker')!r} runs workflows here"
                return {"error": missing}, b""
            try:
                return {"ok": await local(head["message"])}, b""
            except HostError as error:
                return {"error": str(error), "name": error.js_name}, b""
        if kind == "binding":
            router = self._bindings.get(head.get("worker"))  # type: ignore[arg-type]
            if router is None:
                return {"error": f"celld: Worker {head.get('worker')!r} has no Durable Objects "
                                 "or D1 here"}, b""  # fmt: skip
            try:
                return {"ok": await router.answer(head["op"], head["message"])}, b""
            except Exception as error:  # the caller's JS gets it, as it would here
                shape = error_shape(error)
                return {"error": shape["message"], "name": shape["name"]}, b""
        if kind == "queue":
            if self._queues is None:
                return {"error": "celld: this process has no queues"}, b""
            await self._queues.adopt(str(head["queue"]), [int(s) for s in head["seqs"]])
            return {}, b""
        if kind == "http":
            return await self._serve_http(head["request"], body)
        if kind == "reload":
            reload = self.reloads.get(int(head["worker"]))
            if reload is None:
                return {"error": f"Worker number {head['worker']} is not watched here"}, b""
            error = await reload()
            return ({"error": error} if error else {}), b""
        if kind == "clock":
            if self._clock is not None:
                self._clock.set(int(head["now"]))
            return {}, b""
        return {"error": f"unknown call {kind!r}"}, b""

    async def _serve_http(self, request: dict[str, Any], body: bytes) -> Reply:
        """Answer a request another process forwarded, through this process's app."""
        assert self._app is not None
        client = (request["client"][0], int(request["client"][1]))
        transport = httpx.ASGITransport(app=self._app, client=client)
        query = f"?{request['query']}" if request["query"] else ""
        url = f"http://cluster{request['path']}{query}"
        headers = [(k, v) for k, v in request["headers"] if k.lower() != "content-length"]
        async with httpx.AsyncClient(transport=transport, timeout=None) as client:
            answer = await client.request(request["method"], url, headers=headers, content=body)
        return {
            "status": answer.status_code,
            "headers": [[k, v] for k, v in answer.headers.multi_items()],
        }, answer.content

    async def _watch_parent(self, parent: int) -> None:
        while True:
            await asyncio.sleep(1.0)
            if os.getppid() != parent:
                log.warning("celld's parent process is gone: this process stops")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(os.getpid(), signal.SIGTERM)
                return
