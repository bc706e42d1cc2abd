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
ctypes on the binding's own shared library, with the runtime pointer read from the
context object. The layout is checked against `JS_GetRuntime` before the watchdog is
used; if it does not match (another version of the binding), the watchdog stays off, it
says so once in the log, and such turns are only stopped when they end.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("celld.isolate")

#: How often the watchdog looks at the armed turns' CPU clocks.
POLL_S = 0.01
_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


@_HANDLER
def _interrupt(_runtime: int | None, _opaque: int | None) -> int:
    return 1  # stop: QuickJS throws "interrupted" at its next check


_NO_HANDLER = _HANDLER()


class _QuickJsRuntime:
    """The two C functions of the binding's library the watchdog needs."""

    def __init__(self) -> None:
        import _quickjs

        library = ctypes.CDLL(_quickjs.__file__)
        self._get_runtime = library.JS_GetRuntime
        self._get_runtime.restype = ctypes.c_void_p
        self._get_runtime.argtypes = [ctypes.c_void_p]
        self._set_handler = library.JS_SetInterruptHandler
        self._set_handler.restype = None
        self._set_handler.argtypes = [ctypes.c_void_p, _HANDLER, ctypes.c_void_p]
        self._pointer = ctypes.sizeof(ctypes.c_void_p)

    def runtime_of(self, context: Any) -> int | None:
        """The JSRuntime* of a `quickjs.Context`: the first two fields after the object
        header are the runtime and the context pointers; trusted only if they agree."""
        base = id(context) + 2 * self._pointer  # ob_refcnt, ob_type
        runtime = ctypes.c_void_p.from_address(base).value
        js_context = ctypes.c_void_p.from_address(base + self._pointer).value
        if not runtime or not js_context or self._get_runtime(js_context) != runtime:
            return None
        return runtime

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
        self._unavailable = False

    def runtime_of(self, context: Any) -> int | None:
        """The runtime to arm turns with, or None when the watchdog cannot be used."""
        if self._unavailable:
            return None
        try:
            if self._quickjs is None:
                self._quickjs = _QuickJsRuntime()
            runtime = self._quickjs.runtime_of(context)
        except (OSError, AttributeError, ImportError) as error:
            runtime, reason = None, str(error)
        else:
            reason = "the binding's context layout is not the one expected"
        if runtime is None:
            self._unavailable = True
            log.warning(
                "the CPU watchdog for isolates without a time limit is off (%s): a turn "
                "of a Durable Object that never ends holds its JS thread",
                reason,
            )
        return runtime

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


WATCHDOG = Watchdog()
