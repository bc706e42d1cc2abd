"""A whole turn in one hold of the GIL: the binding's own C functions, called through ctypes.

Every method of the quickjs binding releases the GIL while JS runs and takes it back after.
A turn is a delivery, a handful of pending jobs and a take, so it gives up and re-takes the
GIL about ten times; whenever another thread holds it, each re-take waits for that thread to
block or be forced off (the switch interval, 5 ms). Measured here: 18 us for such a turn on a
thread that holds the GIL alone, 4.3 ms on a JS thread while the event loop runs Python.

This module calls the same QuickJS functions straight from the binding's shared library
through `ctypes.PyDLL`, which keeps the GIL for the length of each call: a turn costs one
hold of the GIL instead of ten hand-offs, and it can run on the event-loop thread itself.
The price is that JS no longer runs beside Python on another core; QuickJS's interrupt
handler, a Python function here, is where a long job gives the GIL back (the interpreter
switches threads at its checks, as in any Python code) and where turns are stopped.

Safety (the rule): no pointer read from the binding is used, and no JSValue is read, before
it is verified, and a failed check costs speed, never a crash. The layout this module
assumes is written down once (`EXPECTED`: where the runtime and context pointers sit in
the binding's Python object, the 16-byte `JSValue` of 64-bit builds, QuickJS's tags);
celld/isolate/layout.py checks it at start, reading candidate pointers through the kernel
(celld/isolate/memread.py) before any call dereferences them, and proves the `JSValue`
layout and tags by known answers against the binding's own API. On any mismatch celld
says so once and every isolate uses the binding's methods. The checks run once per
process, plus a few reads per new context; turns pay nothing for them.

The few values held across turns (the two bridge functions) are freed before the context
is (`close`), since a runtime freed with live values aborts the process.

QuickJS checks the C stack against a limit computed from where the stack top was when it
was last set; a context used from several threads resets it on every entry (`enter`),
with a limit that fits the stack of the thread it is on.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("celld.isolate")

_P = ctypes.c_void_p


@dataclass(frozen=True)
class Tags:
    """QuickJS's JSValue tags this module and its checks rely on (quickjs-ng's numbering)."""

    integer: int = 0
    boolean: int = 1
    null: int = 2
    undefined: int = 3
    exception: int = 6
    float64: int = 8
    string: int = -7
    obj: int = -1


@dataclass(frozen=True)
class Layout:
    """What the direct calls assume about the binding's build (checked by layout.py)."""

    #: Offset in the binding's context object of its JSRuntime*, followed by its JSContext*
    #: (the first two fields after the object header: reference count and type).
    pointers_at: int = 2 * ctypes.sizeof(ctypes.c_void_p)
    tags: Tags = Tags()


EXPECTED = Layout()
#: QuickJS's tag for "an exception is pending" (JS_TAG_EXCEPTION).
_TAG_EXCEPTION = EXPECTED.tags.exception
#: Left free below QuickJS's stack limit on a thread: Python frames under the turn and C
#: frames QuickJS uses past its check.
_STACK_MARGIN_BYTES = 1536 * 1024


class JSValue(ctypes.Structure):
    """QuickJS's JSValue on 64-bit builds: a union of 8 bytes and a 64-bit tag."""

    _fields_ = [("u", ctypes.c_uint64), ("tag", ctypes.c_int64)]


_INTERRUPT_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, _P, _P)


class NativeJsError(Exception):
    """JS threw where nothing in JS could catch it (an interrupt, memory, a broken runtime)."""


#: QuickJS's calls that read and make ArrayBuffers (byte areas of binary values).
BUFFER_SYMBOLS = ("JS_GetArrayBuffer", "JS_NewArrayBufferCopy")


class _Library:
    """The QuickJS functions of the binding's shared library, typed for ctypes."""

    def __init__(self) -> None:
        import _quickjs

        lib = ctypes.PyDLL(_quickjs.__file__)
        #: The same functions through a handle that lets the GIL go for the call: for
        #: work on a JS thread that is long and needs no Python (reading bytecode).
        unlocked = ctypes.CDLL(_quickjs.__file__)
        self.get_runtime = self._fn(lib.JS_GetRuntime, _P, [_P])
        self.get_runtime_opaque = self._fn(lib.JS_GetRuntimeOpaque, _P, [_P])
        self.update_stack_top = self._fn(lib.JS_UpdateStackTop, None, [_P])
        self.set_max_stack_size = self._fn(lib.JS_SetMaxStackSize, None, [_P, ctypes.c_size_t])
        self.global_object = self._fn(lib.JS_GetGlobalObject, JSValue, [_P])
        self.get_property = self._fn(lib.JS_GetPropertyStr, JSValue, [_P, JSValue, ctypes.c_char_p])
        self.new_string = self._fn(
            lib.JS_NewStringLen, JSValue, [_P, ctypes.c_char_p, ctypes.c_size_t]
        )
        self.call = self._fn(
            lib.JS_Call, JSValue, [_P, JSValue, JSValue, ctypes.c_int, ctypes.POINTER(JSValue)]
        )
        self.free_value = self._fn(lib.JS_FreeValue, None, [_P, JSValue])
        self.to_c_string = self._fn(
            lib.JS_ToCStringLen2, _P, [_P, ctypes.POINTER(ctypes.c_size_t), JSValue, ctypes.c_bool]
        )
        self.free_c_string = self._fn(lib.JS_FreeCString, None, [_P, _P])
        #: Without argument types: the job pump calls it with ctypes objects only (a
        #: c_void_p runtime, a byref), so ctypes skips converting each argument, which was
        #: half the cost of a call here (0.27 against 0.52 us), once per replayed step.
        self.execute_pending_job = lib.JS_ExecutePendingJob
        self.execute_pending_job.restype = ctypes.c_int
        self.get_exception = self._fn(lib.JS_GetException, JSValue, [_P])
        self.set_interrupt_handler = self._fn(
            lib.JS_SetInterruptHandler, None, [_P, _INTERRUPT_HANDLER, _P]
        )
        self.eval = self._fn(
            lib.JS_Eval,
            JSValue,
            [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int],
        )
        self.write_object = self._fn(
            lib.JS_WriteObject, _P, [_P, ctypes.POINTER(ctypes.c_size_t), JSValue, ctypes.c_int]
        )
        self.read_object = self._fn(
            unlocked.JS_ReadObject, JSValue, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        )
        self.eval_function = self._fn(unlocked.JS_EvalFunction, JSValue, [_P, JSValue])
        self.free = self._fn(lib.js_free, None, [_P, _P])
        #: Byte areas of serialized values (js/host.js, attachments): read in place and
        #: copied once into Python bytes, or copied once into a new ArrayBuffer. Used only
        #: once known_answers.check_buffers passed (layout.py); None where not exported.
        get_buffer, new_buffer = (getattr(lib, name, None) for name in BUFFER_SYMBOLS)
        self.get_array_buffer = get_buffer and self._fn(
            get_buffer, _P, [_P, ctypes.POINTER(ctypes.c_size_t), JSValue]
        )
        self.new_array_buffer_copy = new_buffer and self._fn(
            new_buffer, JSValue, [_P, ctypes.c_char_p, ctypes.c_size_t]
        )

    @staticmethod
    def _fn(function: Any, restype: Any, argtypes: list[Any]) -> Any:
        function.restype = restype
        function.argtypes = argtypes
        return function


_library: _Library | None = None
_library_failed = False


def _load_library() -> _Library | None:
    global _library, _library_failed
    if _library is None and not _library_failed:
        try:
            _library = _Library()
        except (ImportError, OSError, AttributeError) as error:
            _library_failed = True
            log.warning("turns go through the quickjs binding (no direct calls: %s)", error)
    return _library


# -- stopping turns ------------------------------------------------------------------------


class _Deadlines:
    """What each armed runtime may use before QuickJS's interrupt stops it."""

    __slots__ = ("long", "cpu", "fired")

    def __init__(self) -> None:
        #: time.thread_time() points: past `long` the turn is too long for where it runs,
        #: past `cpu` the work is over its CPU budget.
        self.long: float | None = None
        self.cpu: float | None = None
        self.fired: str | None = None  # "long" or "cpu" once the interrupt stopped JS


_armed: dict[int, _Deadlines] = {}


@_INTERRUPT_HANDLER
def _on_interrupt_check(runtime: int | None, _opaque: int | None) -> int:
    """Called by QuickJS every few thousand operations. Being Python, it is also where a
    long job gives the GIL to a thread that asked for it."""
    deadlines = _armed.get(runtime or 0)
    if deadlines is None or deadlines.cpu is None:
        return 0
    now = time.thread_time()
    if now >= deadlines.cpu:
        deadlines.fired = "cpu"
        return 1
    if deadlines.long is not None and now >= deadlines.long:
        deadlines.fired = "long"
        return 1
    return 0


# -- the stack -----------------------------------------------------------------------------

_stack_budget = threading.local()


def _thread_stack_bytes() -> int | None:
    """The size of the calling thread's stack, from pthread (the main thread's is its
    rlimit), or None where that cannot be read."""
    try:
        libc = ctypes.CDLL(None)
        libc.pthread_self.restype = ctypes.c_ulong
        libc.pthread_self.argtypes = []
        libc.pthread_getattr_np.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        libc.pthread_attr_getstack.argtypes = [
            _P,
            ctypes.POINTER(_P),
            ctypes.POINTER(ctypes.c_size_t),
        ]
        libc.pthread_attr_destroy.argtypes = [_P]
        attr = ctypes.create_string_buffer(128)  # larger than pthread_attr_t anywhere
        if libc.pthread_getattr_np(libc.pthread_self(), attr) != 0:
            return None
        address, size = _P(), ctypes.c_size_t()
        try:
            if libc.pthread_attr_getstack(attr, ctypes.byref(address), ctypes.byref(size)) != 0:
                return None
        finally:
            libc.pthread_attr_destroy(attr)
        return int(size.value)
    except (OSError, AttributeError):
        return None


def stack_limit_for_this_thread(wanted: int) -> int:
    """QuickJS's stack limit for turns on the calling thread: `wanted`, or less when the
    thread's own stack could not hold it."""
    budget = getattr(_stack_budget, "bytes", None)
    if budget is None:
        size = _thread_stack_bytes()
        budget = (
            wanted if size is None else max(256 * 1024, min(wanted, size - _STACK_MARGIN_BYTES))
        )
        _stack_budget.bytes = budget
    return int(budget)


# -- one context ---------------------------------------------------------------------------


def library() -> _Library | None:
    """The binding's library, typed (None where it cannot be loaded)."""
    return _load_library()


def exception_text(lib: _Library, context: int) -> str:
    """Take the pending exception of `context` as text (message, then its stack)."""
    error = lib.get_exception(context)
    try:
        text = _value_text(lib, context, error).decode("utf-8", "replace")
        stack = lib.get_property(context, error, b"stack")
        try:
            if stack.tag != _TAG_EXCEPTION:
                trace = _value_text(lib, context, stack).decode("utf-8", "replace")
                if trace and trace != "undefined":
                    text = f"{text}\n{trace}"
        finally:
            lib.free_value(context, stack)
    finally:
        lib.free_value(context, error)
    return text


def _value_text(lib: _Library, context: int, value: JSValue) -> bytes:
    length = ctypes.c_size_t()
    pointer = lib.to_c_string(context, ctypes.byref(length), value, False)
    if not pointer:
        lib.free_value(context, lib.get_exception(context))
        raise NativeJsError("a value could not be turned into text (out of memory?)")
    try:
        return ctypes.string_at(pointer, length.value)
    finally:
        lib.free_c_string(context, pointer)


class NativeBridge:
    """Direct calls into one context: deliver, run jobs, take."""

    def __init__(
        self,
        lib: _Library,
        runtime: int,
        context: int,
        deliver: str,
        take: str,
        take_attachment: str | None = None,
    ) -> None:
        self._lib = lib
        self.runtime = runtime
        self._context = context
        self._job_context = _P()
        self._runtime_pointer = _P(runtime)  # (a ctypes object, for the untyped job call)
        global_object = lib.global_object(context)
        try:
            self._deliver = lib.get_property(context, global_object, deliver.encode())
            self._take = lib.get_property(context, global_object, take.encode())
            self._undefined = lib.get_property(context, global_object, b"undefined")
            self._take_attachment = (
                lib.get_property(context, global_object, take_attachment.encode())
                if take_attachment
                else None
            )
        finally:
            lib.free_value(context, global_object)
        self.deadlines = _Deadlines()
        self._entered_from: int | None = None  # the thread that last set the stack limit
        _armed[runtime] = self.deadlines
        lib.set_interrupt_handler(runtime, _on_interrupt_check, None)
        self._closed = False

    @classmethod
    def attach(
        cls,
        pointers: tuple[int, int] | None,
        deliver: str,
        take: str,
        take_attachment: str | None = None,
    ) -> NativeBridge | None:
        """A bridge to the context whose (JSRuntime*, JSContext*) are `pointers`, verified
        by layout.direct_pointers (None: the layout did not pass, so no bridge). Its runtime
        has `deliver` and `take` functions, and `take_attachment` when byte areas cross
        as ArrayBuffers (js/host.js)."""
        lib = _load_library()
        if lib is None or pointers is None:
            return None
        return cls(lib, *pointers, deliver, take, take_attachment)

    def enter(self, stack_bytes: int) -> None:
        """Before any use from the calling thread: QuickJS's stack limit, measured here
        (again only when the thread changed: a few kB of Python frames more or less
        between entries stay well inside the margin)."""
        thread = threading.get_ident()
        if thread != self._entered_from:
            self._entered_from = thread
            self._lib.update_stack_top(self.runtime)
            self._lib.set_max_stack_size(self.runtime, stack_limit_for_this_thread(stack_bytes))

    def arm(self, cpu: float, long: float | None = None) -> None:
        """Stop JS once the thread's CPU clock passes `cpu` or `long`."""
        self.deadlines.cpu = cpu
        self.deadlines.long = long
        self.deadlines.fired = None

    def disarm(self) -> str | None:
        """Drop the deadlines; returns which one stopped JS, if one did."""
        fired = self.deadlines.fired
        self.deadlines.long = self.deadlines.cpu = None
        self.deadlines.fired = None
        return fired

    def deliver(self, payload: bytes, attachments: list[bytes] | None = None) -> None:
        """Call `deliver(text, ...areas)`: each attachment becomes a new ArrayBuffer (one
        copy, made by QuickJS from the bytes object's own buffer)."""
        lib, context = self._lib, self._context
        if not attachments:
            text = lib.new_string(context, payload, len(payload))
            result = lib.call(context, self._deliver, self._undefined, 1, ctypes.byref(text))
            lib.free_value(context, text)
        else:
            args = (JSValue * (1 + len(attachments)))()
            args[0] = lib.new_string(context, payload, len(payload))
            for index, data in enumerate(attachments, 1):
                args[index] = lib.new_array_buffer_copy(context, data, len(data))
            result = lib.call(context, self._deliver, self._undefined, len(args), args)
            for value in args:
                lib.free_value(context, value)
        self._check(result)
        if result.tag < 0:  # (only values with a negative tag are counted: deliver's is undefined)
            lib.free_value(context, result)

    def run_jobs(self, limit: int) -> bool:
        """Run up to `limit` pending jobs; True once the queue is empty."""
        execute, runtime, out = (
            self._lib.execute_pending_job,
            self._runtime_pointer,
            ctypes.byref(self._job_context),
        )
        for _ in range(limit):
            ran = execute(runtime, out)
            if ran == 0:
                return True
            if ran < 0:
                self._raise_pending()
        return False

    def take(self) -> bytes:
        lib, context = self._lib, self._context
        result = lib.call(context, self._take, self._undefined, 0, None)
        self._check(result)
        try:
            return self._text(result)
        finally:
            lib.free_value(context, result)

    def take_attachments(self, count: int) -> list[bytes]:
        """The byte areas of the last take, in order (`count` of them), each copied once
        out of its ArrayBuffer."""
        lib, context = self._lib, self._context
        if self._take_attachment is None:
            raise NativeJsError("this bridge takes no attachments")
        out: list[bytes] = []
        size = ctypes.c_size_t()
        for _ in range(count):
            value = lib.call(context, self._take_attachment, self._undefined, 0, None)
            self._check(value)
            try:
                pointer = lib.get_array_buffer(context, ctypes.byref(size), value)
                if not pointer:  # (JS never sends an empty area: js/web/serialize.js)
                    lib.free_value(context, lib.get_exception(context))
                    raise NativeJsError("an attachment is not an ArrayBuffer")
                out.append(ctypes.string_at(pointer, size.value))
            finally:
                lib.free_value(context, value)
        return out

    def close(self) -> None:
        """Free what the bridge holds; the context may be freed after this, not before."""
        if self._closed:
            return
        self._closed = True
        lib, context = self._lib, self._context
        if _armed.get(self.runtime) is self.deadlines:
            del _armed[self.runtime]
        for value in (self._deliver, self._take, self._undefined, self._take_attachment):
            if value is not None:
                lib.free_value(context, value)

    def __del__(self) -> None:
        # An isolate dropped without close() still frees these before its context goes.
        self.close()

    # -- errors --------------------------------------------------------------------------

    def _check(self, result: JSValue) -> None:
        if result.tag == _TAG_EXCEPTION:
            self._raise_pending()

    def _raise_pending(self) -> None:
        raise NativeJsError(exception_text(self._lib, self._context))

    def _text(self, value: JSValue) -> bytes:
        return _value_text(self._lib, self._context, value)


def available() -> bool:
    """Is the direct path available with this installation of the binding (its layout
    verified, see layout.py)?"""
    from celld.isolate.layout import verdict

    return _load_library() is not None and verdict().direct_calls
