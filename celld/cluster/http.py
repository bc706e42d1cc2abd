"""celld's own routes in a cluster: sent to the process whose state they read or change.

Worker requests are answered by whichever process accepted them. Of the operator and
test routes under /cdn-cgi/:

* a route naming one instance (explorer, test helpers, introspection of one instance,
  the instance view) is forwarded to the instance's owner, which answers it as if it
  had been called directly (its operator guard included);
* creating an instance through the explorer gets its id here (when the body has none)
  and is forwarded to the owner;
* moving the manual test clock moves it in every process (and in any process started
  later), so timers fire cluster-wide;
* a route about every instance of a workflow (the instance list, the workflow's details
  and counts, delete every instance, introspection sessions) is sent to every process,
  each answering from its shard, and the answers merged (celld.cluster.fanout);
  ``latest`` as an instance id is resolved to the newest instance across the shards
  and the request sent to that instance's owner; a batch delete is answered here: the
  Workflow binding's deleteBatch already splits it by owner (celld.cluster.router).

The queue list (`celld queues list`) is asked of every process, each listing the
queues it consumes (celld.cluster.queues), and the lists joined.

Anything else (health, metrics, the Worker's scheduled handler) is answered here and
concerns this process only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from celld.cluster import fanout
from celld.cluster.placement import owner_of

EXPLORER = "/cdn-cgi/local/explorer/api/workflows/"
API = "/cdn-cgi/celld/api/workflows/"
VIEW = "/cdn-cgi/celld/workflows/"
CLOCK = "/cdn-cgi/celld/clock"
QUEUES = "/cdn-cgi/celld/queues"

#: (owner, request head, body) -> (status, headers, body)
Forward = Callable[
    [int, dict[str, Any], bytes], Awaitable[tuple[int, list[tuple[str, str]], bytes]]
]


def instance_route(path: str) -> tuple[str, str] | None:
    """(workflow, first id segment) when `path` names one instance."""
    for prefix in (EXPLORER, API, VIEW):
        if path.startswith(prefix):
            workflow, sep, rest = path[len(prefix) :].partition("/instances/")
            if sep and rest and rest != "batch/delete" and "/" not in workflow:
                return workflow, rest.split("/", 1)[0]
    return None


def whole_workflow_route(method: str, path: str) -> str | None:
    """What a route that reads or changes every instance of a workflow does ("list",
    "details", "change", "session": starting an introspection session), else None."""
    if path.startswith(API) and "/instances/" not in path:
        if path.endswith("/introspection"):
            return "session" if method == "POST" else "change"
        if path.endswith("/introspection/modify"):
            return "change"
    if not path.startswith(EXPLORER):
        return None
    rest = path[len(EXPLORER) :].rstrip("/")
    if rest and "/" not in rest:  # one workflow: its details, or delete every instance
        return {"GET": "details", "DELETE": "change"}.get(method)
    if rest.endswith("/instances") and rest.count("/") == 1 and method == "GET":
        return "list"
    return None


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _answer(send: Send, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers
           if k.lower() != "content-length"]  # fmt: skip
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


@dataclass
class ClusterRoutes:
    """ASGI middleware sending instance routes to their owner (see the module doc)."""

    app: ASGIApp
    index: int
    size: int
    forward: Forward
    clock_moved: Callable[[bytes], Awaitable[None]]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/cdn-cgi/"):
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if path == CLOCK and method == "POST":
            await self._move_clock(scope, receive, send)
            return
        if path == QUEUES and method == "GET":  # each process lists the queues it owns
            await _answer(send, *await fanout.every_queue(self._asker(scope, path), self.size))
            return
        named = instance_route(path)
        if named is not None and named[1] == "latest" and not path.startswith(VIEW):
            scope, named = await self._latest(scope, named[0])
        whole = whole_workflow_route(method, path) if named is None else None
        if whole is not None:
            body = await _read_body(receive)
            await _answer(send, *await self._everywhere(whole, scope, body))
            return
        body = b""
        creates = path.startswith(EXPLORER) and path.rstrip("/").endswith("/instances")
        if named is None and method == "POST" and creates:
            body = await _read_body(receive)
            named, body = self._created(path, body)
        if named is None:
            await self._local(scope, receive, send, body)
            return
        owner = owner_of(named[0], named[1], self.size)
        if owner == self.index:
            await self._local(scope, receive, send, body)
            return
        if not body:
            body = await _read_body(receive)
        status, headers, answer = await self.forward(owner, _request_head(scope), body)
        await _answer(send, status, headers, answer)

    async def _everywhere(self, what: str, scope: Scope, body: bytes) -> fanout.Answer:
        ask = self._asker(scope, scope["path"])
        query = scope.get("query_string", b"").decode("latin-1")
        if what == "list":
            return await fanout.list_instances(ask, self.size, query)
        if what == "details":
            return await fanout.workflow_details(ask, self.size, query)
        undo = "DELETE" if what == "session" else None
        return await fanout.apply_everywhere(
            ask, self.size, scope["method"], query, body, undo=undo
        )

    async def _latest(self, scope: Scope, workflow: str) -> tuple[Scope, tuple[str, str] | None]:
        """The request with `latest` replaced by the newest instance's id, and that
        instance; unchanged (and answered here: "no instances") when there is none."""
        prefix = EXPLORER if scope["path"].startswith(EXPLORER) else API
        listing = f"{EXPLORER}{workflow}/instances"
        ask = self._asker({**scope, "method": "GET"}, listing)
        newest = await fanout.newest_id(ask, self.size, "")
        if newest is None:
            return scope, None
        head = f"{prefix}{workflow}/instances/"
        rest = scope["path"][len(head) + len("latest") :]
        raw = scope.get("raw_path") or scope["path"].encode()
        raw_head = raw[: raw.index(b"/instances/") + len(b"/instances/")]
        raw_rest = raw[len(raw_head) + len(b"latest") :]
        changed = {
            **scope,
            "path": f"{head}{newest}{rest}",
            "raw_path": raw_head + quote(newest, safe="").encode() + raw_rest,
        }
        return changed, (workflow, newest)

    def _asker(self, scope: Scope, path: str) -> fanout.Ask:
        """Ask process i the request `scope` makes, at `path` (each answers from its own
        shard: a forwarded request reaches the app under this middleware)."""
        raw_path = quote(path).encode()

        async def ask(index: int, method: str, query: str, body: bytes) -> fanout.Answer:
            headers = _with_length(scope["headers"], len(body))
            asked = {**scope, "method": method, "path": path, "raw_path": raw_path,
                     "query_string": query.encode("latin-1"), "headers": headers}  # fmt: skip
            if index != self.index:
                return await self.forward(index, _request_head(asked), body)
            return await _capture(self.app, asked, body)

        return ask

    def _created(self, path: str, body: bytes) -> tuple[tuple[str, str] | None, bytes]:
        """The instance an explorer create makes, with an id given here if it has none."""
        workflow = path[len(EXPLORER) :].split("/", 1)[0]
        try:
            parsed = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError:
            return None, body  # the local route says what is wrong
        if not isinstance(parsed, dict):
            return None, body
        if parsed.get("id") is None:
            parsed["id"] = str(uuid.uuid4())
            body = orjson.dumps(parsed)
        if not isinstance(parsed["id"], str):
            return None, body
        return (workflow, parsed["id"]), body

    async def _local(self, scope: Scope, receive: Receive, send: Send, body: bytes) -> None:
        if not body:
            await self.app(scope, receive, send)
            return
        scope = {**scope, "headers": _with_length(scope["headers"], len(body))}
        await self.app(scope, _replaying(body, receive), send)

    async def _move_clock(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        status, headers, answer = await _capture(self.app, scope, body)
        if status == 200:
            await self.clock_moved(answer)
        await _answer(send, status, headers, answer)


def _replaying(body: bytes, then: Receive) -> Receive:
    """A `receive` that gives the whole `body` first, then whatever `then` gives."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await then()

    return receive


async def _capture(app: ASGIApp, scope: Scope, body: bytes) -> fanout.Answer:
    """Run one request through `app` and keep its answer."""
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def nothing_more() -> dict[str, Any]:
        await asyncio.Event().wait()  # the request is whole and nobody disconnects
        raise AssertionError("unreachable")

    async def keep(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [(k.decode("latin-1"), v.decode("latin-1"))
                       for k, v in message.get("headers", [])]  # fmt: skip
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, _replaying(body, nothing_more), keep)
    return status, headers, b"".join(chunks)


def _with_length(headers: list[tuple[bytes, bytes]], length: int) -> list[tuple[bytes, bytes]]:
    dropped = (b"content-length", b"transfer-encoding")
    kept = [(k, v) for k, v in headers if k.lower() not in dropped]
    return [*kept, (b"content-length", str(length).encode())]


def _request_head(scope: Scope) -> dict[str, Any]:
    client = scope.get("client") or ("127.0.0.1", 0)
    return {
        "method": scope["method"],
        "path": scope.get("raw_path", scope["path"].encode()).decode("latin-1"),
        "query": scope.get("query_string", b"").decode("latin-1"),
        "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
        "client": [client[0], client[1]],
    }
