"""Carrying AsyncLocalStorage's context across `await`, which QuickJS cannot do by itself.

V8 gives workerd "continuation-preserved embedder data": whatever context was current when
an async function suspended is current again when it resumes. QuickJS has no such slot,
and its promise hook (`JS_SetPromiseHook`) could only be reached through a Python callback
on every promise event (see celld/isolate/DECISIONS.md, "AsyncLocalStorage"). So when a
Worker imports `node:async_hooks`, the bundler rewrites every `await X` in its modules
(its own and its packages') into

    __celld_ar(__celld_ac(), await __celld_as(X))

`__celld_ac()` takes the current context before the function suspends; `__celld_as(X)`
turns X's outcome into a value, so that the resumption always runs `__celld_ar(context,
outcome)`, which makes that context current again in the resuming job itself and then
returns X's value or throws its error (js/node/async_hooks.js). Lines never move; columns
after an `await` shift, and the bundle's column anchors account for them.

Not rewritten: `for await` loops (their implicit awaits), `await` inside a stretch another
splice replaces (an `import(await x)`), `await (f)(x)` (tree-sitter's grammar reads it as a
call of a function named `await`), and code outside the bundle. After such an await the
context is the one the previous job left.
"""

from __future__ import annotations

ASYNC_CONTEXT_MODULE = "node:async_hooks"

_BEFORE = "__celld_ar(__celld_ac(), "
_OPERAND = "__celld_as("


def await_splices(
    awaits: list[tuple[int, int, int]], splices: list[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
    """Insertions (zero-length splices) that rewrite each `await` lying outside every
    replacing splice of the module, innermost and outermost alike."""
    replaced = sorted((start, end) for start, end, _ in splices if end > start)

    def inside_replacement(start: int, end: int) -> bool:
        for r_start, r_end in replaced:
            if r_start >= end:
                break
            if r_start < end and start < r_end and not (r_start >= start and r_end <= end):
                return True  # overlaps without being contained in the await
            if r_start <= start and end <= r_end and (r_start, r_end) != (start, end):
                return True  # the whole await sits in a stretch being replaced
        return False

    out: list[tuple[int, int, str]] = []
    for start, operand, end in awaits:
        if inside_replacement(start, end):
            continue
        out.append((start, start, _BEFORE))
        out.append((operand, operand, _OPERAND))
        out.append((end, end, "))"))
    return out
