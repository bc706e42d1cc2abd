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
  API. The tags and payloads direct calls read must give what the binding reports. An
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

Each new context costs three kernel reads and two calls (a few microseconds, at load);
turns pay nothing.
"""

from __future__ import annotations

import ctypes
import logging
import secrets
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celld.isolate import memread, native

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

    @property
    def direct_calls(self) -> bool:
        """Turns and script loads may call QuickJS directly."""
        return self.pointers is None and self.values is None

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
        values = _check_values(lib, context, js_context)
    except Exception as error:  # noqa: BLE001 - as above
        values = f"a known-answer check failed: {error!r}"
    return Verdict(pointers, values, expected if pointers is None else None)


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


# -- known answers -------------------------------------------------------------------------


def _check_values(lib: Any, context: Any, js_context: int) -> str | None:
    """Values made by direct calls, read as direct calls read them, against the binding's
    answers for the same source; the first mismatch, named, or None."""
    import quickjs

    tags = native.EXPECTED.tags
    text = _reader(lib, js_context)

    def as_int(value: native.JSValue) -> Any:
        return struct.unpack("=i", struct.pack("=Q", value.u)[:4])[0]

    def as_float(value: native.JSValue) -> Any:
        return struct.unpack("=d", struct.pack("=Q", value.u))[0]

    def as_bool(value: native.JSValue) -> Any:
        return bool(as_int(value))

    def as_object(value: native.JSValue) -> Any:
        # A pointer to readable memory, and the object the binding wraps.
        return quickjs.Object if memread.read(value.u, 8) is not None else None

    def as_none(value: native.JSValue) -> Any:
        return None

    cases: list[tuple[str, str, int, Callable[[native.JSValue], Any]]] = [
        ("an int", "42", tags.integer, as_int),
        ("a negative int", "-7", tags.integer, as_int),
        ("a float", "0.5", tags.float64, as_float),
        ("a string", "'celld \\u00e9\\ud83d\\ude00'", tags.string, text),
        ("an object", "({ celld: 1 })", tags.obj, as_object),
        ("undefined", "undefined", tags.undefined, as_none),
        ("null", "null", tags.null, as_none),
        ("true", "true", tags.boolean, as_bool),
        ("false", "false", tags.boolean, as_bool),
    ]
    for name, source, tag, read in cases:
        expected = context.eval(source)
        if isinstance(expected, quickjs.Object):
            expected = quickjs.Object
        problem = _compare(lib, js_context, name, source, tag, read, expected)
        if problem:
            return problem
    return (
        _check_exception(lib, context, js_context)
        or _check_call(lib, context, js_context)
        or _check_identity(lib, context, js_context)
    )


def _compare(
    lib: Any,
    js_context: int,
    name: str,
    source: str,
    tag: int,
    read: Callable[[native.JSValue], Any],
    expected: Any,
) -> str | None:
    value = _eval(lib, js_context, source)
    try:
        if value.tag != tag:
            return f"{name} ({source}) has tag {value.tag} where {tag} was expected"
        got = read(value)
        if got != expected:
            return f"{name} ({source}) reads as {got!r}; the binding gives {expected!r}"
        return None
    finally:
        # The same bits back: right whatever the layout (see _eval).
        lib.free_value(js_context, value)


def _check_exception(lib: Any, context: Any, js_context: int) -> str | None:
    import quickjs

    try:
        context.eval("throw 7")
    except quickjs.JSException:
        pass
    else:
        return "the binding did not raise for `throw 7`"
    tags = native.EXPECTED.tags
    value = _eval(lib, js_context, "throw 7")
    if value.tag != tags.exception:
        lib.free_value(js_context, value)
        return f"a throw has tag {value.tag} where {tags.exception} was expected"
    thrown = lib.get_exception(js_context)
    try:
        if thrown.tag != tags.integer or struct.pack("=Q", thrown.u)[:4] != struct.pack("=i", 7):
            return f"the value thrown by `throw 7` reads as tag {thrown.tag}, {thrown.u:#x}"
    finally:
        lib.free_value(js_context, thrown)
    return None


def _check_call(lib: Any, context: Any, js_context: int) -> str | None:
    """A function the binding defined, called as turns call the bridge: by name from the
    global object, with a string made here, its result read as text."""
    tags = native.EXPECTED.tags
    context.eval("globalThis.__celld_probe_echo = (s) => s + '!';")
    argument = "ab\u00e9".encode()
    global_object = lib.global_object(js_context)
    if global_object.tag != tags.obj:
        lib.free_value(js_context, global_object)
        return f"the global object has tag {global_object.tag} where {tags.obj} was expected"
    held = [global_object]
    try:
        function = lib.get_property(js_context, global_object, b"__celld_probe_echo")
        held.append(function)
        undefined = lib.get_property(js_context, global_object, b"undefined")
        held.append(undefined)
        if function.tag != tags.obj or undefined.tag != tags.undefined:
            return f"a function and undefined have tags {function.tag}, {undefined.tag}"
        text = lib.new_string(js_context, argument, len(argument))
        held.append(text)
        if text.tag != tags.string:
            return f"a new string has tag {text.tag} where {tags.string} was expected"
        result = lib.call(js_context, function, undefined, 1, ctypes.byref(text))
        held.append(result)
        if result.tag != tags.string:
            return f"a call's result has tag {result.tag} where {tags.string} was expected"
        answer = native._value_text(lib, js_context, result).decode()
        if answer != "ab\u00e9!":
            return f"a call returned {answer!r} where 'ab\u00e9!' was expected"
    finally:
        for value in reversed(held):
            lib.free_value(js_context, value)
    return None


def _check_identity(lib: Any, context: Any, js_context: int) -> str | None:
    """The JSContext is the binding's context: what one side sets, the other reads."""
    tags = native.EXPECTED.tags
    nonce = secrets.randbelow(1 << 30) + 1
    context.eval(f"globalThis.__celld_probe_nonce = {nonce};")
    global_object = lib.global_object(js_context)
    try:
        value = lib.get_property(js_context, global_object, b"__celld_probe_nonce")
        try:
            if value.tag != tags.integer or value.u & 0xFFFFFFFF != nonce:
                return "a global set through the binding is not seen by direct calls"
        finally:
            lib.free_value(js_context, value)
    finally:
        lib.free_value(js_context, global_object)
    done = _eval(lib, js_context, f"globalThis.__celld_probe_back = 'n{nonce}';")
    lib.free_value(js_context, done)
    if context.get("__celld_probe_back") != f"n{nonce}":
        return "a global set by direct calls is not seen through the binding"
    return None


def _eval(lib: Any, js_context: int, source: str) -> native.JSValue:
    """`source` evaluated by a direct call. Whatever the value, it goes back to
    `free_value` with the same bits: correct for the 16-byte JSValue, and for an 8-byte
    one too (it travels in the first register either way)."""
    code = source.encode()
    return lib.eval(js_context, code, len(code), b"<celld-probe>", 0)  # type: ignore[no-any-return]


def _reader(lib: Any, js_context: int) -> Callable[[native.JSValue], Any]:
    def text(value: native.JSValue) -> Any:
        return native._value_text(lib, js_context, value).decode("utf-8", "surrogatepass")

    return text


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
