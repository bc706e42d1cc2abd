"""Checking, before any direct call, that the quickjs binding is built as native.py assumes.

native.py and watchdog.py call QuickJS's C functions with pointers read out of the
binding's Python context object and read the `JSValue`s those functions return. Both rest
on a layout the binding does not promise (native.EXPECTED). The rule here:

- A pointer is used only once verified, and verifying it dereferences nothing: its bytes
  and what it points to are read through the kernel (memread.py), which answers "not
  readable" instead of faulting. The JSContext must be readable and name the JSRuntime
  found beside it (the context's own record of its runtime: a second, independent
  route), the JSRuntime must be readable; only then do `JS_GetRuntime` and
  `JS_GetRuntimeOpaque` confirm the pair (the binding makes its context object the
  runtime's opaque, so the runtime is this object's and no other's).
- At start, once per process, a probe context answers known questions: an int, a float,
  a string, an object, undefined, null, booleans, a thrown value, a function call and a
  global set on each side, evaluated through direct calls and through the binding's own
  API (known_answers.py). The tags and payloads direct calls read must give what the
  binding reports. Then, only where those passed, the two ArrayBuffer calls binary values
  cross by (known bytes read in place and made for JS); where they fail, binary values
  go as base64 text inside the messages instead, said once. An
  interrupt handler set on the verified runtime must stop JS that the binding runs: the
  watchdog's way of stopping a turn.
- On a mismatch celld says once what did not match, and uses the binding's own methods:
  every turn goes through them (slower), scripts are parsed instead of loaded from
  bytecode. The CPU watchdog of Durable Objects needs only a verified runtime and a
  working interrupt, so it keeps working when only the `JSValue` checks failed; when the
  pointers are not at the expected offset, it takes them from the offset of the object
  where they pass every check above, the interrupt included. Only when none does, nothing
  can stop a runaway turn of a Durable Object (its isolate cannot use the binding's time
  limit), and `celld run` refuses projects with Durable Objects.

The probe costs about 4 ms, once per process; each new context, three kernel reads and
two calls (about 10 us, once, at load); turns pay nothing.
"""

from __future__ import annotations

import ctypes
import logging
import struct
import sys
import threading
from dataclasses import dataclass
from typing import Any

from celld.isolate import memread, native
from celld.isolate.known_answers import check_buffers, check_values

log = logging.getLogger("celld.isolate")

_WORD = ctypes.sizeof(ctypes.c_void_p)
#: Of a JSContext, the words searched for its runtime pointer (it is among the first).
_CONTEXT_WORDS = 8
#: Bytes of a JSRuntime that must be readable before a call reads its fields.
_RUNTIME_BYTES = 2048
#: Above any address a user-space pointer on a 64-bit system has.
_ADDRESS_LIMIT = 1 << 56


@dataclass(frozen=True)
class Verdict:
    """What the start-up checks found; None where a part passed, else what did not match."""

    #: The runtime and context pointers at the offset native.EXPECTED names.
    pointers: str | None
    #: The JSValue layout and tags (what direct turns and bytecode loading also need).
    values: str | None
    #: Where the watchdog reads a context's pointers: the expected offset, or the one
    #: where they were found and verified instead; None when none passed (no interrupts).
    runtime_at: int | None = None
    #: QuickJS's ArrayBuffer calls (known_answers.check_buffers), by which binary values
    #: cross the bridge as bytes; checked only where direct calls passed.
    buffers: str | None = None

    @property
    def direct_calls(self) -> bool:
        """Turns and script loads may call QuickJS directly."""
        return self.pointers is None and self.values is None

    @property
    def binary_values(self) -> bool:
        """Binary data of serialized values crosses direct calls as ArrayBuffers (else
        as base64 text inside the message, js/web/serialize.js)."""
        return self.direct_calls and self.buffers is None

    @property
    def interrupts(self) -> bool:
        """An interrupt handler can be set on a context's runtime (the CPU watchdog)."""
        return self.runtime_at is not None


_verdict: Verdict | None = None
_verdict_lock = threading.Lock()


def verdict() -> Verdict:
    """The checks' outcome, made on the first call (and said once in the log on a mismatch)."""
    global _verdict
    if _verdict is None:
        with _verdict_lock:
            if _verdict is None:
                _verdict = _probe()
                _report(_verdict)
    return _verdict


def direct_pointers(context: Any) -> tuple[int, int] | None:
    """(JSRuntime*, JSContext*) of `context` for direct calls, or None (binding methods)."""
    lib = native.library()
    if lib is None or not verdict().direct_calls:
        return None
    return _checked(lib, context, native.EXPECTED.pointers_at)


def interrupt_runtime(context: Any) -> int | None:
    """The JSRuntime* of `context` to set an interrupt handler on, or None."""
    lib = native.library()
    offset = verdict().runtime_at
    if lib is None or offset is None:
        return None
    pointers = _checked(lib, context, offset)
    return None if pointers is None else pointers[0]


def _checked(lib: Any, context: Any, offset: int) -> tuple[int, int] | None:
    found = verify_pointers(lib, id(context), id(context), offset)
    if isinstance(found, str):
        # The probe passed, so this context's object is built like the probe's: this is a
        # sign of memory corruption or a binding replaced at run time, not of a layout.
        log.warning("a QuickJS context failed pointer verification (%s): no direct calls", found)
        return None
    return found


def verify_pointers(
    lib: Any, address: int, owner: int, offset: int | None = None
) -> tuple[int, int] | str:
    """The (JSRuntime*, JSContext*) pair stored at `offset` (default: the expected one) in
    the binding's context object at `address`, or what did not match. `owner` is the object
    the runtime's opaque must name (the context object itself; tests point `address` at
    forged memory). Nothing is called on a pointer before its memory was read through the
    kernel and found consistent."""
    if offset is None:
        offset = native.EXPECTED.pointers_at
    raw = memread.read(address + offset, 2 * _WORD)
    if raw is None:
        return f"the binding's context object cannot be read at offset {offset}"
    runtime, context = struct.unpack("=QQ", raw)
    for name, pointer, at in (("JSRuntime", runtime, offset), ("JSContext", context, offset + 8)):
        if not _plausible(pointer):
            return f"the {name} pointer read at offset {at} is not an address ({pointer:#x})"
    words = memread.read(context, _CONTEXT_WORDS * _WORD)
    if words is None:
        return f"the JSContext pointer ({context:#x}) is not readable memory"
    if runtime not in struct.unpack(f"={_CONTEXT_WORDS}Q", words):
        return "the JSContext does not name the JSRuntime stored beside it"
    if memread.read(runtime, _RUNTIME_BYTES) is None:
        return f"the JSRuntime pointer ({runtime:#x}) is not readable memory"
    # Both pointers lead to readable memory that agrees: QuickJS may now read them.
    if lib.get_runtime(context) != runtime:
        return "JS_GetRuntime of the JSContext is not the JSRuntime stored beside it"
    if lib.get_runtime_opaque(runtime) != owner:
        return "the JSRuntime's opaque is not the binding's context object"
    return runtime, context


def _plausible(pointer: int) -> bool:
    return 0 < pointer < _ADDRESS_LIMIT and pointer % _WORD == 0


# -- the start-up probe --------------------------------------------------------------------


def _probe() -> Verdict:
    if ctypes.sizeof(ctypes.c_void_p) != 8 or sys.byteorder != "little":
        reason = "not a 64-bit little-endian build (the JSValue layout assumed is of those)"
        return Verdict(reason, reason)
    lib = native.library()
    if lib is None:
        reason = "the binding's shared library could not be loaded for direct calls"
        return Verdict(reason, reason)
    try:
        _check_reader()
    except OSError as error:
        reason = f"memory cannot be read safely here ({error})"
        return Verdict(reason, reason)
    import quickjs

    context = quickjs.Context()
    expected = native.EXPECTED.pointers_at
    found = verify_pointers(lib, id(context), id(context), expected)
    if isinstance(found, str):
        return _watchdog_only(lib, context, found)
    runtime, js_context = found
    try:
        pointers = _check_interrupt(lib, context, runtime)
    except Exception as error:  # noqa: BLE001 - a probe that breaks is a mismatch, reported
        pointers = f"checking the interrupt failed: {error!r}"
    try:
        lib.update_stack_top(runtime)
        values = check_values(lib, context, js_context)
    except Exception as error:  # noqa: BLE001 - as above
        values = f"a known-answer check failed: {error!r}"
    buffers = "not checked (direct calls are off)"
    if pointers is None and values is None:
        try:
            buffers = check_buffers(lib, context, js_context)
        except Exception as error:  # noqa: BLE001 - as above
            buffers = f"checking the ArrayBuffer calls failed: {error!r}"
    return Verdict(pointers, values, expected if pointers is None else None, buffers)


def _watchdog_only(lib: Any, context: Any, mismatch: str) -> Verdict:
    """The pointers are not where native.EXPECTED says. Direct calls stay off, but the CPU
    watchdog of Durable Objects may still read them elsewhere in the object: at an offset
    where they pass every check of `verify_pointers` and the interrupt stops JS."""
    not_checked = "not checked (the pointers are not where expected)"
    expected = native.EXPECTED.pointers_at
    for offset in range(0, type(context).__basicsize__ - 2 * _WORD + 1, _WORD):
        if offset == expected:
            continue
        found = verify_pointers(lib, id(context), id(context), offset)
        if isinstance(found, str):
            continue
        try:
            stops = _check_interrupt(lib, context, found[0]) is None
        except Exception:  # noqa: BLE001 - this offset is no good; the mismatch is reported
            stops = False
        if stops:
            return Verdict(mismatch, not_checked, offset)
    return Verdict(mismatch, not_checked)


def _check_reader() -> None:
    """The reader gives a known buffer's bytes, and refuses the page at address zero."""
    known = ctypes.create_string_buffer(b"celld-memread-check", 24)
    if memread.read(ctypes.addressof(known), 24) != known.raw:
        raise OSError("a readable buffer read back different bytes")
    if memread.read(8, 8) is not None:
        raise OSError("the page at address zero read as readable")


def _check_interrupt(lib: Any, context: Any, runtime: int) -> str | None:
    """An interrupt handler set on `runtime` stops JS the binding runs in `context`, and
    QuickJS hands it that runtime."""
    import quickjs

    seen: list[int] = []

    @native._INTERRUPT_HANDLER
    def stop(called_with: int | None, _opaque: int | None) -> int:
        seen.append(called_with or 0)
        return 1

    lib.set_interrupt_handler(runtime, stop, None)
    try:
        context.eval("for (let i = 0; i < 1e7; i++) {}")
    except quickjs.JSException as error:
        stopped = "interrupted" in str(error)
    else:
        stopped = False
    finally:
        lib.set_interrupt_handler(runtime, native._INTERRUPT_HANDLER(), None)
    if not stopped or set(seen) != {runtime}:
        return "an interrupt handler set on the verified JSRuntime did not stop its JS"
    return None


def _report(result: Verdict) -> None:
    if result.pointers is not None and result.runtime_at is None:
        log.warning(
            "direct calls into QuickJS are off: the quickjs binding's context layout is not "
            "the one expected (%s). Isolates use the binding's own methods (slower), and "
            "Durable Objects cannot run: their CPU limit needs an interrupt on a verified "
            "QuickJS runtime.",
            result.pointers,
        )
    elif result.pointers is not None:
        log.warning(
            "direct calls into QuickJS are off: the quickjs binding's context layout is not "
            "the one expected (%s). Isolates use the binding's own methods (slower); the CPU "
            "watchdog of Durable Objects uses the runtime pointer found and verified at "
            "offset %d instead.",
            result.pointers,
            result.runtime_at,
        )
    elif result.values is not None:
        log.warning(
            "direct calls into QuickJS are off: the quickjs binding's JSValue layout is not "
            "the one expected (%s). Isolates use the binding's own methods (slower).",
            result.values,
        )
    elif result.buffers is not None:
        log.warning(
            "binary values cross into QuickJS as base64 text: its ArrayBuffer calls did not "
            "pass their check (%s). Direct calls are on otherwise.",
            result.buffers,
        )
