"""One log line per Worker request, as wrangler dev prints it: ``GET /signup 200 OK (3ms)``.

The line is written when the response is ready (its headers and buffered body), like
wrangler dev's, which times the Worker's fetch until it returns a Response. It costs one
formatted record per request and nothing more: no task, no await, and nothing at all
below `info` (``--log-level warning``, as benchmarks run).

Status texts are Node's (``http.STATUS_CODES``), the ones wrangler dev prints; they differ
from Python's in a few places ("Payload Too Large", "URI Too Long"...).
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("celld.request")

STATUS_TEXT: dict[int, str] = {
    100: "Continue", 101: "Switching Protocols", 102: "Processing", 103: "Early Hints",
    200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information",
    204: "No Content", 205: "Reset Content", 206: "Partial Content", 207: "Multi-Status",
    208: "Already Reported", 226: "IM Used",
    300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other",
    304: "Not Modified", 305: "Use Proxy", 307: "Temporary Redirect", 308: "Permanent Redirect",
    400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
    407: "Proxy Authentication Required", 408: "Request Timeout", 409: "Conflict",
    410: "Gone", 411: "Length Required", 412: "Precondition Failed",
    413: "Payload Too Large", 414: "URI Too Long", 415: "Unsupported Media Type",
    416: "Range Not Satisfiable", 417: "Expectation Failed", 418: "I'm a Teapot",
    421: "Misdirected Request", 422: "Unprocessable Entity", 423: "Locked",
    424: "Failed Dependency", 425: "Too Early", 426: "Upgrade Required",
    428: "Precondition Required", 429: "Too Many Requests",
    431: "Request Header Fields Too Large", 451: "Unavailable For Legal Reasons",
    500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
    503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
    506: "Variant Also Negotiates", 507: "Insufficient Storage", 508: "Loop Detected",
    509: "Bandwidth Limit Exceeded", 510: "Not Extended", 511: "Network Authentication Required",
}  # fmt: skip


def log_request(method: str, path: str, status: int, started: float) -> None:
    """Log a served request; `started` is its `time.perf_counter()` at arrival."""
    if not log.isEnabledFor(logging.INFO):
        return
    ms = round((time.perf_counter() - started) * 1000)
    reason = STATUS_TEXT.get(status, "")
    log.info(
        "%s %s %d %s (%dms)",
        method,
        path,
        status,
        reason,
        ms,
        extra={
            "request": (method, path, status, reason, ms),
            "fields": {"method": method, "path": path, "status": status, "duration_ms": ms},
        },
    )
