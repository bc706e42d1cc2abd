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
* a route about every instance of a workflow (list, counts, delete all, batch delete,
  introspection sessions, ``latest``) needs every shard: it is refused with 501 and
  says so, rather than answered from one process's shard.

Anything else (health, metrics, the Worker's scheduled handler) is answered here and
concerns this process only.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from celld.cluster.placement import owner_of

EXPLORER = "/cdn-cgi/local/explorer/api/workflows/"
API = "/cdn-cgi/celld/api/workflows/"
VIEW = "/cdn-cgi/celld/workflows/"
CLOCK = "/cdn-cgi/celld/clock"

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


def whole_workflow_route(method: str, path: str) -> bool:
    """True for routes that read or change every instance of a workflow."""
    if path.startswith(API) and path.endswith("/introspection") and "/instances/" not in path:
        return True
    if path.startswith(API) and path.endswith("/introspection/modify"):
        return True
    if not path.startswith(EXPLORER):
        return False
    rest = path[len(EXPLORER) :].rstrip("/")
    if "/" not in rest:
        return bool(rest)  # details or delete of one workflow
    return rest.endswith("/instances") and method == "GET" or rest.endswith("/batch/delete")


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


def _refusal(size: int, what: str) -> bytes:
    return orjson.dumps(
        {
            "success": False,
            "errors": [
                {
                    "code": 10000,
                    "message": f"{what} needs every process's instances, and this celld runs "
                    f"{size} processes (--workers {size}) that each hold a shard: it is not "
                    "served in this mode; run celld with --workers 1 to use it",
                }
            ],
        }
    )


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
        named = instance_route(path)
        if named is not None and named[1] == "latest":
            body = _refusal(self.size, "the instance id 'latest'")
            await _answer(send, 501, [("content-type", "application/json")], body)
            return
        if named is None and whole_workflow_route(method, path):
            body = _refusal(self.size, f"{method} {path}")
            await _answer(send, 501, [("content-type", "application/json")], body)
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
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        scope = {**scope, "headers": _with_length(scope["headers"], len(body))}
        await self.app(scope, replay, send)

    async def _move_clock(self, scope: Scope, receive: Receive, send: Send) -> None:
        status = 200
        headers: list[tuple[str, str]] = []
        chunks: list[bytes] = []

        async def keep(message: dict[str, Any]) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k.decode("latin-1"), v.decode("latin-1"))
                           for k, v in message.get("headers", [])]  # fmt: skip
            else:
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, keep)
        answer = b"".join(chunks)
        if status == 200:
            await self.clock_moved(answer)
        await _answer(send, status, headers, answer)


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
