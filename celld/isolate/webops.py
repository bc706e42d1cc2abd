"""Host operations behind the web platform globals (js/web/): entropy and fetch.

Binary data crosses the bridge as base64 inside JSON messages. crypto.subtle has its own
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
from typing import Any

import httpx

from celld.isolate.entropy import MAX_DELIVERY_BYTES, SEED_BYTES, fresh_bytes
from celld.isolate.host import HostError, OpHandler

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
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(300.0, connect=30.0),
            max_redirects=MAX_REDIRECTS,
            follow_redirects=False,
        )
        _clients[loop] = client
    return client


async def close_fetch_client() -> None:
    """Close this loop's shared fetch client (server shutdown, tests)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


async def op_fetch(message: dict[str, Any]) -> dict[str, Any]:
    """fetch(): {method, url, headers: [[k, v]], body: base64|null, redirect} -> response."""
    method = str(message.get("method") or "GET")
    url = str(message.get("url"))
    redirect = str(message.get("redirect") or "follow")
    headers = [(str(k), str(v)) for k, v in message.get("headers") or []]
    body = message.get("body")
    content = base64.b64decode(body) if body is not None else None
    client = _client()
    request = client.build_request(method, url, headers=headers, content=content)
    # Send only what the Worker asked for, not httpx's own defaults.
    names = {name.lower() for name, _ in headers}
    for name in ("user-agent", "accept", "accept-encoding", "connection"):
        if name not in names and name in request.headers:
            del request.headers[name]
    try:
        response = await client.send(request, follow_redirects=redirect == "follow")
        content_bytes = await response.aread()
        await response.aclose()
    except httpx.TooManyRedirects:
        raise HostError("fetch failed: too many redirects", "TypeError") from None
    except httpx.HTTPError as error:
        detail = str(error) or type(error).__name__
        raise HostError(f"fetch failed: {detail}", "TypeError") from None
    if redirect == "error" and response.status_code in _REDIRECT_STATUSES:
        raise HostError("fetch failed: unexpected redirect (redirect mode is 'error')", "TypeError")
    response_headers = response.headers.multi_items()
    encoding = response.headers.get("content-encoding", "identity").lower()
    if encoding not in ("", "identity") and method.upper() != "HEAD":
        # httpx decoded the body; the length and encoding headers no longer describe it.
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
        "body": base64.b64encode(content_bytes).decode("ascii"),
    }


def web_ops() -> dict[str, OpHandler]:
    return {"entropy": op_entropy, "fetch": op_fetch}
