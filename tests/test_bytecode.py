"""Scripts load from bytecode compiled once per process (celld/isolate/bytecode.py): the
same behaviour, stack traces and errors as parsing them in every context."""

from __future__ import annotations

import uuid

import pytest

from celld.isolate.bytecode import BYTECODE
from celld.isolate.isolate import Isolate, ScriptError
from celld.isolate.runtime import Script
from tests.jsharness import pool


def fresh(source: str) -> Script:
    """A script no earlier test compiled (the cache is per process)."""
    return Script("user.js", f"// {uuid.uuid4()}\n{source}")


async def load(script: Script) -> Isolate:
    isolate = Isolate(pool().pick())
    await isolate.load([script])
    return isolate


async def test_the_second_load_comes_from_bytecode_and_behaves_the_same() -> None:
    script = fresh(
        "globalThis.area = (r) => Math.round(Math.PI * r * r);\n"
        "globalThis.where = () => { try { null.x; } catch (e) { return e.stack; } };\n"
    )
    first = await load(script)
    compiled = len(BYTECODE._compiled)
    second = await load(script)
    try:
        assert len(BYTECODE._compiled) == compiled  # nothing new compiled
        for isolate in (first, second):
            assert await isolate.eval("area(10)") == 314
        # the same file name and lines as a parsed script
        assert await first.eval("where()") == await second.eval("where()")
        assert "<input>:3" in await second.eval("where()")
    finally:
        await first.close()
        await second.close()


@pytest.mark.parametrize("attempt", [1, 2])
async def test_a_syntax_error_is_reported_as_before(attempt: int) -> None:
    script = Script("broken.js", "// broken for bytecode tests\nconst = 1;\n")
    with pytest.raises(ScriptError) as caught:
        await load(script)
    assert caught.value.script == "broken.js"
    assert "SyntaxError" in caught.value.detail


@pytest.mark.parametrize("attempt", [1, 2])
async def test_a_script_that_throws_at_the_top_is_reported_each_time(attempt: int) -> None:
    script = Script("thrower.js", "// throws for bytecode tests\nthrow new TypeError('nope');\n")
    with pytest.raises(ScriptError) as caught:
        await load(script)
    assert "TypeError: nope" in caught.value.detail
