"""Owned background work: no task of the cells layer is fire-and-forget.

Every task is started through a :class:`TaskOwner`, which keeps it until it is done,
logs its failure with what it was doing, and hands the error to the caller's handler
(a cell whose bookkeeping task failed is reloaded from the store, say). Stopping the
owner cancels and awaits everything it started.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("celld.cells")

ErrorHandler = Callable[[BaseException], None]


class TaskOwner:
    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: dict[asyncio.Task[Any], tuple[str, ErrorHandler | None]] = {}
        self.failures = 0
        self.closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self,
        coroutine: Coroutine[Any, Any, Any],
        what: str,
        on_error: ErrorHandler | None = None,
    ) -> asyncio.Task[Any] | None:
        """Start `coroutine` as an owned task; once the owner is closed nothing starts."""
        if self.closed:
            coroutine.close()
            return None
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks[task] = (what, on_error)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        what, on_error = self._tasks.pop(task, ("?", None))
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        self.failures += 1
        log.error("%s: %s failed", self.name, what, exc_info=error)
        if on_error is not None:
            try:
                on_error(error)
            except Exception:  # noqa: BLE001 - a failing handler must not hide the first error
                log.exception("%s: handling the failure of %s failed too", self.name, what)

    async def close(self) -> None:
        self.closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
