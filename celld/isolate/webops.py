"""Host operations behind the web platform globals (js/web/): entropy and fetch.

Binary data crosses the bridge as base64 inside JSON messages; fetch bodies larger than one
message stream both ways through celld/isolate/streams.py. crypto.subtle has its own
operation (celld/isolate/webcrypto).

Entropy contract (see js/web/random.js): the runtime keeps a pool of OS random bytes in
JS. `entropy_script()` hands it its first bytes; evaluate a fresh one per isolate, before
the runtime or right after it, and before user code. Refills are `entropy` requests
answered by `op_entropy`.
"""

from __future__ import annotations

import asyncio
import base64
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from celld.isolate.entropy import MAX_DELIVERY_BYTES, SEED_BYTES, fresh_bytes
from celld.isolate.host import HostError, OpHandler
from celld.isolate.outbound import fence_writes
from celld.isolate.streams import STREAMS, StreamAborted

#: Responses of at most this many bytes (by their Content-Length) come whole in the answer.
INLINE_BODY_BYTES = 64 * 1024
_NULL_BODY_STATUSES = {101, 103, 204, 205, 304}
_ONE_TIME_BODY = (
    "A request with a one-time-use body (it was initialized from a stream, not a buffer) "
    "encountered a redirect requiring the body to be retransmitted. To avoid this error in "
    "the future, construct this request from a buffer-like body initializer."
)

#: Redirects a `follow` fetch takes before failing (the fetch spec's limit).
MAX_REDIRECTS = 20
_REDIRECT_STATUSES = {301, 302, 303, 307, 308}


def op_entropy(message: dict[str, Any]) -> str:
    """`bytes` fresh OS random bytes (base64) for an isolate's pool."""
    count = int(message.get("bytes") or 0)
    if not SEED_BYTES < count <= MAX_DELIVERY_BYTES:
        raise HostError(
            f"entropy: ask for more than {SEED_BYTES} and at most {MAX_DELIVERY_BYTES} bytes",
            "RangeError",
        )
    return fresh_bytes(count)


# One client per event loop: an httpx client is bound to the loop that first used it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def _client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        # each write asks the fence of the isolate that asked for the fetch (outbound.py)
        client = fence_writes(
            httpx.AsyncClient(
                timeout=httpx.Timeout(300.0, connect=30.0),
                max_redirects=MAX_REDIRECTS,
                follow_redirects=False,
            )
        )
        _clients[loop] = client
    return client


async def close_fetch_client() -> None:
    """Close this loop's shared fetch client (server shutdown, tests)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


def op_fetch(message: dict[str, Any]) -> Awaitable[dict[str, Any]]:
    """fetch(): {method, url, headers: [[k, v]], body: base64|null, bodyStream?, redirect}
    -> the response's head, with its body inline (`body`) when small and known to be, else
    as a host source JS reads as it goes (`stream`).

    A streamed request body (`bodyStream`: a pipe JS writes, or a host source such as the
    incoming request's body) is taken here, before the pipe's first piece is dispatched."""
    body = message.get("bodyStream")
    stream = STREAMS.body_of(body) if body is not None else None
    return _fetch(message, stream)


async def _fetch(
    message: dict[str, Any],
    stream: tuple[AsyncIterator[bytes], int | None, Callable[[str], None]] | None,
) -> dict[str, Any]:
    method = str(message.get("method") or "GET")
    url = str(message.get("url"))
    redirect = str(message.get("redirect") or "follow")
    headers = [(str(k), str(v)) for k, v in message.get("headers") or []]
    body = message.get("body")
    content: bytes | AsyncIterator[bytes] | None = (
        base64.b64decode(body) if body is not None else None
    )
    if stream is not None:
        content = stream[0]
        # A body of known length (bytes, an incoming request's) goes with its Content-Length,
        # as workerd sends it; httpx then sends it as it is, not chunked.
        if stream[1] is not None and all(k.lower() != "content-length" for k, _ in headers):
            headers.append(("content-length", str(stream[1])))
    client = _client()
    try:
        request = client.build_request(method, url, headers=headers, content=content)
    except Exception:
        if stream is not None:
            stream[2]("fetch failed before the body was sent")
        raise
    # Send only what the Worker asked for, not httpx's own defaults.
    names = {name.lower() for name, _ in headers}
    for name in ("user-agent", "accept", "accept-encoding", "connection"):
        if name not in names and name in request.headers:
            del request.headers[name]
    try:
        response = await client.send(request, follow_redirects=redirect == "follow", stream=True)
    except StreamAborted as error:  # the Worker's body stream failed: so does the fetch
        raise error.as_host_error("") from None
    except httpx.StreamConsumed:
        raise HostError(_ONE_TIME_BODY, "TypeError") from None
    except httpx.TooManyRedirects:
        raise HostError("fetch failed: too many redirects", "TypeError") from None
    except httpx.HTTPError as error:
        detail = str(error) or type(error).__name__
        raise HostError(f"fetch failed: {detail}", "TypeError") from None
    finally:
        if stream is not None:
            stream[2]("the request body is no longer wanted")  # a no-op once it was all sent
    try:
        if redirect == "error" and response.status_code in _REDIRECT_STATUSES:
            raise HostError(
                "fetch failed: unexpected redirect (redirect mode is 'error')", "TypeError"
            )
        answer = _head(method, response)
        declared = response.headers.get("content-length", "")
        # (Not a compressed body: its Content-Length says nothing of its decoded size.)
        small = (
            declared.isdigit()
            and int(declared) <= INLINE_BODY_BYTES
            and "content-encoding" not in response.headers
        )
        if method.upper() == "HEAD" or response.status_code in _NULL_BODY_STATUSES or small:
            answer["body"] = base64.b64encode(await response.aread()).decode("ascii")
            await response.aclose()
            return answer
    except BaseException:
        await response.aclose()
        raise
    length = (
        int(declared) if declared.isdigit() and "content-encoding" not in response.headers else None
    )
    sid = STREAMS.add_source(_body_chunks(response), close=response.aclose, length=length)
    answer["stream"] = {"id": sid, "length": length}
    return answer


async def _body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The response body as it arrives (decoded as httpx decodes it)."""
    try:
        async for chunk in response.aiter_bytes():
            yield chunk
    except httpx.HTTPError as error:
        detail = str(error) or type(error).__name__
        raise HostError(f"fetch failed while reading the body: {detail}", "TypeError") from None


def _head(method: str, response: httpx.Response) -> dict[str, Any]:
    """The status, headers and URL of a fetch's response, as JS builds a Response of them."""
    response_headers = response.headers.multi_items()
    encoding = response.headers.get("content-encoding", "identity").lower()
    if encoding not in ("", "identity") and method.upper() != "HEAD":
        # httpx decodes the body; the length and encoding headers no longer describe it.
        response_headers = [
            (k, v)
            for k, v in response_headers
            if k.lower() not in ("content-encoding", "content-length")
        ]
    return {
        "status": response.status_code,
        "statusText": response.reason_phrase,
        "headers": [[k, v] for k, v in response_headers],
        "url": str(response.url),
        "redirected": bool(response.history),
        "body": None,
    }


def web_ops() -> dict[str, OpHandler]:
    return {"entropy": op_entropy, "fetch": op_fetch}
