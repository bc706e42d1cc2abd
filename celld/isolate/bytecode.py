"""Scripts compiled once per process, loaded into each new context as bytecode.

Most of what a new isolate costs is QuickJS parsing the runtime and the Worker bundle
(about 260 kB for a small project: ~10 ms here) into every context. The binding has no
bytecode API, but its library exports QuickJS's own: the first load of a script compiles
it (`JS_Eval` with COMPILE_ONLY) and serializes the function (`JS_WriteObject`); every
load after that reads the bytes back (`JS_ReadObject`) and runs them (`JS_EvalFunction`),
which is what `eval` does after parsing. Compiled with the file name the binding's own
`eval` uses, so stack traces and line mapping are unchanged. Reading and running let the
GIL go, as the binding's `eval` does: loads run on a JS thread beside the event loop.

A script that does not compile is left to the binding's `eval`, which reports the syntax
error as before. Where the direct path is unavailable (its layout did not pass the checks
of layout.py), every load parses.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from collections import OrderedDict
from typing import Any

from celld.isolate.native import EXPECTED, NativeJsError, exception_text, library

#: JS_EVAL_TYPE_GLOBAL | JS_EVAL_FLAG_COMPILE_ONLY
_COMPILE_ONLY = 1 << 5
#: JS_WRITE_OBJ_BYTECODE / JS_READ_OBJ_BYTECODE
_BYTECODE = 1 << 0
_TAG_EXCEPTION = EXPECTED.tags.exception
#: The file name the binding's `Context.eval` gives QuickJS.
_FILE_NAME = b"<input>"
#: Distinct scripts kept: the runtime's files (34), the `node:` modules' (up to about 20),
#: each project's bundle, and the snippets tests load. Below what one isolate loads, every
#: load compiles again (an LRU cycled through in order keeps nothing).
_CAPACITY = 128


class BytecodeCache:
    """Compiled scripts by the hash of their source."""

    def __init__(self, capacity: int = _CAPACITY) -> None:
        self.capacity = capacity
        self._compiled: OrderedDict[bytes, bytes] = OrderedDict()
        self._refused: set[bytes] = set()  # sources that did not compile: parse them
        self._lock = threading.Lock()  # loads run on several JS threads

    def evaluate(self, js_context: int, source: str) -> bool:
        """Evaluate `source` in the context `js_context` (a JSContext* verified by
        layout.direct_pointers) from bytecode; False when the caller must `eval` it itself
        (the source does not compile). Raises NativeJsError when the script throws while it
        runs."""
        lib = library()
        if lib is None:
            return False
        text = source.encode("utf-8", "surrogatepass")
        key = hashlib.blake2b(text, digest_size=16).digest()
        with self._lock:
            if key in self._refused:
                return False
            compiled = self._compiled.get(key)
            if compiled is not None:
                self._compiled.move_to_end(key)
        if compiled is None:
            compiled = _compile(lib, js_context, text)
            with self._lock:
                if compiled is None:
                    self._refused.add(key)
                    return False
                self._compiled[key] = compiled
                while len(self._compiled) > self.capacity:
                    self._compiled.popitem(last=False)
        function = lib.read_object(js_context, compiled, len(compiled), _BYTECODE)
        if function.tag == _TAG_EXCEPTION:
            raise NativeJsError(exception_text(lib, js_context))
        result = lib.eval_function(js_context, function)  # takes `function`
        if result.tag == _TAG_EXCEPTION:
            raise NativeJsError(exception_text(lib, js_context))
        lib.free_value(js_context, result)
        return True


def _compile(lib: Any, js_context: int, text: bytes) -> bytes | None:
    function = lib.eval(js_context, text, len(text), _FILE_NAME, _COMPILE_ONLY)
    if function.tag == _TAG_EXCEPTION:
        lib.free_value(js_context, lib.get_exception(js_context))
        return None
    try:
        size = ctypes.c_size_t()
        data = lib.write_object(js_context, ctypes.byref(size), function, _BYTECODE)
        if not data:
            lib.free_value(js_context, lib.get_exception(js_context))
            return None
        try:
            return ctypes.string_at(data, size.value)
        finally:
            lib.free(js_context, data)
    finally:
        lib.free_value(js_context, function)


BYTECODE = BytecodeCache()
