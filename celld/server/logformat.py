"""How `celld run` writes its log: wrangler dev's look for people, JSON lines for machines.

`pretty` (the default) prints each record as wrangler dev prints its own,
``[celld:info] GET /signup 200 OK (3ms)``, in colour on a terminal (the level in the
prefix's colour, a request's method in bold, its status coloured by class and its time in
grey) and plain otherwise, following the same switches as wrangler's colour library:
``NO_COLOR`` and ``TERM=dumb`` turn colours off, ``FORCE_COLOR`` (not ``0``) on.

`json` prints one object per record (``time``, ``level``, ``logger``, ``message`` and the
record's structured ``fields``: a request's method, path, status and duration, an
instance's workflow, id and event), for log shippers.

A record carries structured fields as ``extra={"fields": {...}}``; a request line also
carries ``request=(method, path, status, status text, ms)`` so the pretty formatter can
colour its parts without parsing the message.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import UTC, datetime
from typing import IO, Any

import orjson

LEVEL_NAMES = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warn",
    logging.ERROR: "error",
    logging.CRITICAL: "error",
}

_RESET = "\x1b[0m"
_BOLD, _UNBOLD = "\x1b[1m", "\x1b[22m"
_GREEN, _YELLOW, _RED, _BLUE, _GREY = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[34m", "\x1b[90m"
_FG_OFF = "\x1b[39m"
_LEVEL_COLOUR = {"debug": _GREY, "info": _GREEN, "warn": _YELLOW, "error": _RED}

FORMATS = ("pretty", "json")


def colour_wanted(stream: IO[str], environ: dict[str, str] | None = None) -> bool:
    """Whether to colour `stream`, decided as wrangler's colour library (kleur) decides."""
    env = os.environ if environ is None else environ
    if "NODE_DISABLE_COLORS" in env or "NO_COLOR" in env or env.get("TERM") == "dumb":
        return False
    forced = env.get("FORCE_COLOR")
    if forced is not None and forced != "0":
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _status_colour(status: int) -> str:
    if 200 <= status < 300:
        return _GREEN
    if 400 <= status < 500:
        return _YELLOW
    if status >= 500:
        return _RED
    return _BLUE


class PrettyFormatter(logging.Formatter):
    """``[celld:<level>] <message>``, coloured when `colour` is set."""

    def __init__(self, colour: bool) -> None:
        super().__init__()
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        level = LEVEL_NAMES.get(record.levelno, record.levelname.lower())
        prefix = f"[celld:{level}]"
        request = getattr(record, "request", None)
        if self.colour:
            prefix = f"{_LEVEL_COLOUR.get(level, '')}{prefix}{_FG_OFF}"
            if request is not None:
                message = self._coloured_request(*request)
            else:
                message = record.getMessage()
        else:
            message = record.getMessage()
        text = f"{prefix} {message}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text

    @staticmethod
    def _coloured_request(method: str, path: str, status: int, reason: str, ms: int) -> str:
        """wrangler dev's request line: bold method, status in its class's colour, time
        in grey."""
        colour = _status_colour(status)
        return (
            f"{_RESET}{_BOLD}{method}{_UNBOLD} {path} "
            f"{colour}{_BOLD}{status}{_UNBOLD} {reason} {_FG_OFF}"
            f"{_GREY}({ms}ms){_FG_OFF}{_RESET}"
        )


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": LEVEL_NAMES.get(record.levelno, record.levelname.lower()),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(level: str, fmt: str = "pretty", stream: IO[str] | None = None) -> None:
    """Send every record at `level` and above to `stream` (stderr) in format `fmt`.

    uvicorn's own loggers go through the same handler (celld does not let uvicorn set up
    logging); its startup chatter stays quiet at `info`, as wrangler dev prints only its
    "Ready on" line.
    """
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    target = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(target)
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else PrettyFormatter(colour_wanted(target))
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = getattr(logging, level.upper())
    root.setLevel(numeric)
    quiet = max(numeric, logging.WARNING) if numeric >= logging.INFO else numeric
    for name in ("uvicorn", "uvicorn.error", "uvicorn.asgi"):
        logging.getLogger(name).setLevel(quiet)
        logging.getLogger(name).propagate = True
        for old in list(logging.getLogger(name).handlers):
            logging.getLogger(name).removeHandler(old)
    logging.getLogger("uvicorn.access").disabled = True
    # httpx logs each request it makes at info ("HTTP Request: ..."): those celld makes
    # itself (an operator route a `--workers N` process forwards to the owner through
    # its app) are not requests to log; the request log has the client's.
    logging.getLogger("httpx").setLevel(quiet)
