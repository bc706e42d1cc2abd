# ruff: noqa: E501 - the JS snippets read better unwrapped
"""console output: util.inspect-style formatting sent to the host's log."""

from __future__ import annotations

import logging

import pytest

from tests.jsharness import run_js_async


async def _logs(snippet: str, caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    caplog.set_level(logging.DEBUG, logger="celld.console")
    await run_js_async(snippet)
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "celld.console"]


async def test_levels_and_plain_values(caplog: pytest.LogCaptureFixture) -> None:
    logs = await _logs(
        """
        console.log("a", 1, -0, 5n, true, null, undefined, Symbol("s"));
        console.info("info"); console.warn("warn"); console.error("error"); console.debug("debug");
        """,
        caplog,
    )
    assert logs == [
        ("INFO", "a 1 -0 5n true null undefined Symbol(s)"),
        ("INFO", "info"),
        ("WARNING", "warn"),
        ("ERROR", "error"),
        ("DEBUG", "debug"),
    ]


async def test_objects_like_node(caplog: pytest.LogCaptureFixture) -> None:
    logs = await _logs(
        """
        console.log({a: 1, "b-c": "s", d: [1, 2, {e: {f: {g: 1}}}]});
        console.log([]); console.log({}); console.log([1, , 3]);
        console.log(new Map([["k", 1]]), new Set([1]), new Uint8Array([1, 2]));
        const o = {name: "x"}; o.self = o; console.log(o);
        class Thing { constructor() { this.v = 1; } } console.log(new Thing());
        console.log(function named() {}, class K {}, () => 1);
        console.log(new Date(0), /re/g, Object.create(null));
        console.log({long: "x".repeat(40), other: "y".repeat(40)});
        """,
        caplog,
    )
    texts = [t for _, t in logs]
    assert texts[0] == "{ a: 1, 'b-c': 's', d: [ 1, 2, { e: [Object] } ] }"
    assert texts[1:4] == ["[]", "{}", "[ 1, <1 empty item>, 3 ]"]
    assert texts[4] == "Map(1) { 'k' => 1 } Set(1) { 1 } Uint8Array(2) [ 1, 2 ]"
    assert texts[5] == "{ name: 'x', self: [Circular *1] }"
    assert texts[6] == "Thing { v: 1 }"
    assert texts[7] == "[Function: named] [class K] [Function: (anonymous)]"
    assert texts[8] == "1970-01-01T00:00:00.000Z /re/g [Object: null prototype] {}"
    assert texts[9] == "{\n  long: '" + "x" * 40 + "',\n  other: '" + "y" * 40 + "'\n}"


async def test_errors_include_name_message_and_stack(caplog: pytest.LogCaptureFixture) -> None:
    logs = await _logs(
        """
        function thrower() { throw new TypeError("bad input"); }
        try { thrower(); } catch (e) { console.error(e); console.log({err: e}); }
        """,
        caplog,
    )
    assert logs[0][0] == "ERROR"
    assert logs[0][1].startswith("TypeError: bad input\n")
    assert "thrower" in logs[0][1]
    assert logs[1][1].startswith("{\n  err: TypeError: bad input")


async def test_format_substitutions(caplog: pytest.LogCaptureFixture) -> None:
    logs = await _logs(
        """
        console.log("%s is %d years and %i, %f, %o %j %%, %c.", "Bob", 42.5, 7.9, "1.5", [1], {a: 1}, "color: red", "extra");
        console.log("%s", {a: 1});
        console.log("no subs", "%s");
        """,
        caplog,
    )
    assert [t for _, t in logs] == [
        'Bob is 42.5 years and 7, 1.5, [ 1 ] {"a":1} %, . extra',
        "{ a: 1 }",
        "no subs %s",
    ]


async def test_group_count_assert(caplog: pytest.LogCaptureFixture) -> None:
    logs = await _logs(
        """
        console.group("G"); console.log("inside"); console.groupEnd(); console.log("outside");
        console.count(); console.count(); console.count("x");
        console.assert(1 === 1, "fine"); console.assert(false, "broken %s", "here");
        """,
        caplog,
    )
    assert [t for _, t in logs] == [
        "G",
        "  inside",
        "outside",
        "default: 1",
        "default: 2",
        "x: 1",
        "Assertion failed: broken here",
    ]
