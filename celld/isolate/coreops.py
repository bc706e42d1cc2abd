"""Host operations every isolate needs: console output and timers."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from celld.isolate.host import Later, OpHandler, Outcome

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


def op_timer(message: dict[str, Any]) -> Later:
    """Answer after `ms` milliseconds of wall time. An isolate holds one of these for its
    earliest timer (js/web/timers.js keeps the rest in a heap); it is an event-loop timer
    handle, not a task, and a withdrawn one (the timer was cleared) is taken off the loop."""
    delay = max(0.0, float(message.get("ms") or 0)) / 1000
    answer = Later()
    handle = asyncio.get_running_loop().call_later(delay, answer.resolve, None)

    def ended(outcome: Outcome) -> None:
        if outcome[0] == "w":
            handle.cancel()

    answer.then(ended)
    return answer


def core_ops() -> dict[str, OpHandler]:
    return {"log": op_log, "timer": op_timer}
