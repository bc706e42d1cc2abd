"""Stopping a runaway turn of an isolate that runs without QuickJS's time limit.

The quickjs binding refuses calls from JS into Python functions while its time limit is
armed, so an isolate that needs such calls (a Durable Object's synchronous storage) runs
without one. A loop that never ends would then hold its JS thread for good, and with it
every isolate placed on that thread.

The watchdog gives those turns a CPU limit of their own. A turn arms it with the JS
thread's CPU clock and a deadline on that clock; one daemon thread watches the armed
turns and, once a thread's CPU time passes its deadline, installs QuickJS's interrupt
handler on the turn's runtime. JS stops at its next interrupt check with the same
"interrupted" error the time limit raises, and the owner faults the isolate as for any
CPU limit.

QuickJS's `JS_SetInterruptHandler` is not exposed by the binding, so it is called through
ctypes on the binding's own shared library, on the runtime pointer of the context object,
verified as celld/isolate/layout.py verifies every pointer before use (read through the
kernel, cross-checked, and shown at start to stop JS when interrupted; found elsewhere in
the object if the binding moved it). The rule: the CPU
limit of an isolate with host callables never silently disappears. Where no runtime can
be verified, `runtime_of` raises `NoCpuLimit` instead of loading the isolate without a
limit, and `celld run` refuses a project with Durable Objects at start (`require`).
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass
from typing import Any

from celld.isolate.layout import interrupt_runtime, verdict

#: How often the watchdog looks at the armed turns' CPU clocks.
POLL_S = 0.01
_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


@_HANDLER
def _interrupt(_runtime: int | None, _opaque: int | None) -> int:
    return 1  # stop: QuickJS throws "interrupted" at its next check


_NO_HANDLER = _HANDLER()


class NoCpuLimit(Exception):
    """An isolate with host callables would run without a CPU limit: it is not started."""


class _QuickJsRuntime:
    """The C function of the binding's library the watchdog calls (from its own thread,
    letting the GIL go)."""

    def __init__(self) -> None:
        import _quickjs

        library = ctypes.CDLL(_quickjs.__file__)
        self._set_handler = library.JS_SetInterruptHandler
        self._set_handler.restype = None
        self._set_handler.argtypes = [ctypes.c_void_p, _HANDLER, ctypes.c_void_p]

    def interrupt(self, runtime: int) -> None:
        self._set_handler(runtime, _interrupt, None)

    def clear(self, runtime: int) -> None:
        self._set_handler(runtime, _NO_HANDLER, None)


@dataclass
class _Armed:
    runtime: int
    clock: int  # the JS thread's CPU clock id
    deadline: float  # seconds on that clock
    fired: bool = False


class Watchdog:
    """One thread watching every armed turn of the process."""

    def __init__(self) -> None:
        self._armed: dict[int, _Armed] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._quickjs: _QuickJsRuntime | None = None

    def runtime_of(self, context: Any) -> int:
        """The runtime to arm `context`'s turns with. Raises NoCpuLimit where its pointer
        cannot be verified: such an isolate is not started rather than run unlimited."""
        reason = self.unavailable()
        runtime = None if reason is not None else interrupt_runtime(context)
        if runtime is None:
            raise NoCpuLimit(_refusal(reason or "this context's runtime failed verification"))
        if self._quickjs is None:
            self._quickjs = _QuickJsRuntime()
        return runtime

    @staticmethod
    def unavailable() -> str | None:
        """Why the watchdog cannot stop turns in this process, or None when it can."""
        found = verdict()
        return None if found.interrupts else found.pointers or "no verified runtime"

    def require(self, what: str) -> None:
        """Raise NoCpuLimit, naming `what` needs the watchdog, where it cannot work."""
        reason = self.unavailable()
        if reason is not None:
            raise NoCpuLimit(f"{what}: {_refusal(reason)}")

    def arm(self, runtime: int, cpu_limit_s: float) -> None:
        """Called on the JS thread as a turn starts: stop it once this thread has used
        `cpu_limit_s` more seconds of CPU."""
        clock = time.pthread_getcpuclockid(threading.get_ident())
        armed = _Armed(runtime, clock, time.clock_gettime(clock) + cpu_limit_s)
        with self._lock:
            self._armed[runtime] = armed
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="celld-cpu-watchdog", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def disarm(self, runtime: int) -> bool:
        """Called on the JS thread as the turn ends; True if the watchdog stopped it (its
        interrupt handler is removed again here, on the runtime's own thread)."""
        with self._lock:
            armed = self._armed.pop(runtime, None)
        if armed is not None and armed.fired and self._quickjs is not None:
            self._quickjs.clear(runtime)
            return True
        return False

    def _watch(self) -> None:
        while True:
            with self._lock:
                armed = list(self._armed.values())
            if not armed:
                self._wake.wait()
                self._wake.clear()
                continue
            for turn in armed:
                try:
                    used_up = time.clock_gettime(turn.clock) >= turn.deadline
                except OSError:  # the thread is gone; its turn is disarmed right after
                    continue
                if turn.fired or not used_up:
                    continue
                with self._lock:
                    if self._armed.get(turn.runtime) is not turn:
                        continue  # the turn ended meanwhile
                    turn.fired = True
                    assert self._quickjs is not None
                    self._quickjs.interrupt(turn.runtime)
            time.sleep(POLL_S)


def _refusal(reason: str) -> str:
    return (
        "celld cannot stop a runaway turn of an isolate with host callables (a Durable "
        "Object: the quickjs binding refuses its time limit for those), because the "
        "QuickJS runtime of the binding's contexts could not be verified here "
        f"({reason}); install the quickjs-ng release pinned in celld's pyproject.toml"
    )


WATCHDOG = Watchdog()
