"""Known answers that prove the JSValue layout and tags the direct calls read (layout.py).

A probe context evaluates the same sources through direct calls (native.py) and through
the binding's own API: an int, a negative int, a float, a string beyond ASCII, an object,
undefined, null and both booleans, then a thrown value, a call of a function the binding
defined with a string made by a direct call (as turns call the bridge), and a global set
on each side (the JSContext is the binding's). The tags must be those of
native.EXPECTED.tags and the payloads, read as direct calls read them, what the binding
reports. Apart (`check_buffers`), the two calls binary values cross the bridge by:
an ArrayBuffer the binding made, read in place, and one made by a direct call, read by
the binding's JS. A value is read further (as text, as a pointer) only once its tag matched; every
value goes back to `JS_FreeValue` with the bits it came with, which is right whatever the
layout, so a failed check leaks nothing into the probe's runtime.
"""

from __future__ import annotations

import ctypes
import secrets
import struct
from collections.abc import Callable
from typing import Any

from celld.isolate import memread, native


def check_values(lib: Any, context: Any, js_context: int) -> str | None:
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
        text = lib.new_string(js_context, argument, len(argument))
        problem, answer = _call_global(
            lib, js_context, global_object, b"__celld_probe_echo", (text, "string"), held
        )
        if problem:
            return problem
        if answer != "ab\u00e9!":
            return f"a call returned {answer!r} where 'ab\u00e9!' was expected"
    finally:
        for value in reversed(held):
            lib.free_value(js_context, value)
    return None


def _call_global(
    lib: Any,
    js_context: int,
    global_object: native.JSValue,
    name: bytes,
    argument: tuple[native.JSValue, str],
    held: list[native.JSValue],
) -> tuple[str | None, str]:
    """`globalThis[name](value)` by direct calls, as turns call the bridge, where
    `argument` is (value, the name of the tag it must have): (what did not match, or None;
    the result as text). The value and what this makes go into `held` (the caller frees
    them)."""
    tags = native.EXPECTED.tags
    value, kind = argument
    held.append(value)
    if value.tag != getattr(tags, kind):
        return f"a new {kind} has tag {value.tag} where {getattr(tags, kind)} was expected", ""
    function = lib.get_property(js_context, global_object, name)
    held.append(function)
    undefined = lib.get_property(js_context, global_object, b"undefined")
    held.append(undefined)
    if function.tag != tags.obj or undefined.tag != tags.undefined:
        return f"a function and undefined have tags {function.tag}, {undefined.tag}", ""
    result = lib.call(js_context, function, undefined, 1, ctypes.byref(value))
    held.append(result)
    if result.tag != tags.string:
        return f"a call's result has tag {result.tag} where {tags.string} was expected", ""
    return None, native._value_text(lib, js_context, result).decode()


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


def check_buffers(lib: Any, context: Any, js_context: int) -> str | None:
    """`JS_GetArrayBuffer` and `JS_NewArrayBufferCopy` (native.BUFFER_SYMBOLS): bytes of
    every value, NULs included, read in place from an ArrayBuffer the binding made (through
    the kernel, memread.py: a wrong pointer reads as unreadable, not as a fault), a value
    that is not an ArrayBuffer refused with an exception, and an ArrayBuffer made by the
    direct call seen by the binding's JS with the same bytes; the first mismatch, or None."""
    missing = [
        name
        for name, function in zip(
            native.BUFFER_SYMBOLS, (lib.get_array_buffer, lib.new_array_buffer_copy), strict=True
        )
        if function is None
    ]
    if missing:
        return f"the binding's library does not export {', '.join(missing)}"
    tags = native.EXPECTED.tags
    known = bytes(range(256)) + secrets.token_bytes(61)
    listed = ",".join(str(b) for b in known)
    context.eval(
        f"globalThis.__celld_probe_buffer = new Uint8Array([{listed}]).buffer;"
        "globalThis.__celld_probe_hex = (b) => b instanceof ArrayBuffer ? Array.from("
        "new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('') : typeof b;"
    )
    global_object = lib.global_object(js_context)
    held = [global_object]
    try:
        buffer = lib.get_property(js_context, global_object, b"__celld_probe_buffer")
        held.append(buffer)
        if buffer.tag != tags.obj:
            return f"an ArrayBuffer has tag {buffer.tag} where {tags.obj} was expected"
        size = ctypes.c_size_t()
        pointer = lib.get_array_buffer(js_context, ctypes.byref(size), buffer)
        if not pointer or size.value != len(known):
            return f"an ArrayBuffer of {len(known)} bytes reads as {size.value} bytes"
        if memread.read(pointer, size.value) != known:
            return "an ArrayBuffer's bytes, read in place, are not the bytes JS wrote"
        if lib.get_array_buffer(js_context, ctypes.byref(size), global_object):
            return "JS_GetArrayBuffer read an object that is not an ArrayBuffer as one"
        refused = lib.get_exception(js_context)
        lib.free_value(js_context, refused)
        if refused.tag != tags.obj:
            return f"refusing a non-ArrayBuffer threw tag {refused.tag}, not an error object"
        made = lib.new_array_buffer_copy(js_context, known, len(known))
        problem, seen = _call_global(
            lib, js_context, global_object, b"__celld_probe_hex", (made, "obj"), held
        )
        if problem:
            return problem
        if seen != known.hex():
            return f"a new ArrayBuffer is seen in JS as {seen[:40]!r}..., not its bytes"
    finally:
        for value in reversed(held):
            lib.free_value(js_context, value)
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
