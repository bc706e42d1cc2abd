"""Host operations every isolate needs: console output and timers."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from celld.isolate.host import OpHandler

console_log = logging.getLogger("celld.console")

_LEVELS = {
    "debug": logging.DEBUG,
    "log": logging.INFO,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}


def op_log(message: dict[str, Any]) -> None:
    """console.* output goes to the server log under `celld.console`."""
    level = _LEVELS.get(str(message.get("level")), logging.INFO)
    console_log.log(level, "%s", message.get("text", ""))


async def op_timer(message: dict[str, Any]) -> None:
    """setTimeout and friends: answer after `ms` milliseconds of wall time."""
    delay = max(0.0, float(message.get("ms") or 0)) / 1000
    await asyncio.sleep(delay)


def core_ops() -> dict[str, OpHandler]:
    return {"log": op_log, "timer": op_timer}
