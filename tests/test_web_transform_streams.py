# ruff: noqa: E501 - the JS snippets read better unwrapped
"""WritableStream, TransformStream, the queuing strategies and pipeTo/pipeThrough
(js/web/transform.js) over celld's own ReadableStream."""

from __future__ import annotations

from tests.jsharness import run_js_async


async def test_a_transform_stream_subclass_parses_as_eventsource_parser_does() -> None:
    """The shape libraries use at load time: `class X extends TransformStream` with start,
    transform and flush; the readable side is a ReadableStream a Response can carry."""
    result = await run_js_async(
        """
        class Lines extends TransformStream {
          constructor() {
            let rest = "";
            super({
              start(controller) { controller.enqueue("start"); },
              transform(chunk, controller) {
                const parts = (rest + chunk).split("\\n");
                rest = parts.pop();
                for (const line of parts) controller.enqueue(line);
              },
              flush(controller) { if (rest) controller.enqueue(rest); },
            });
          }
        }
        const lines = new Lines();
        const source = new ReadableStream({
          start(c) { for (const piece of ["a\\nb", "c\\n", "d"]) c.enqueue(piece); c.close(); },
        });
        const out = [];
        for await (const line of source.pipeThrough(lines)) out.push(line);
        const upper = new TransformStream({ transform(chunk, c) { c.enqueue(new TextEncoder().encode(chunk.toUpperCase())); } });
        const writer = upper.writable.getWriter();
        writer.write("hello ");
        writer.write("world");
        writer.close();
        const text = await new Response(upper.readable).text();
        return { out, text, isReadable: lines.readable instanceof ReadableStream, tag: String(lines.writable) };
        """
    )
    assert result == {
        "out": ["start", "a", "bc", "d"],
        "text": "HELLO WORLD",
        "isReadable": True,
        "tag": "[object WritableStream]",
    }


async def test_writable_stream_writes_in_order_and_reports_errors() -> None:
    result = await run_js_async(
        """
        const seen = [];
        const ws = new WritableStream({
          async write(chunk) { await new Promise((r) => setTimeout(r, chunk === 1 ? 5 : 0)); seen.push(chunk); },
          close() { seen.push("closed"); },
        }, new CountQueuingStrategy({ highWaterMark: 4 }));
        const writer = ws.getWriter();
        const out = { locked: ws.locked, desired: writer.desiredSize };
        await Promise.all([writer.write(1), writer.write(2), writer.write(3)]);
        await writer.close();
        out.seen = seen;
        out.closed = (await writer.closed) === undefined;
        out.afterClose = await writer.write(4).catch((e) => `${e.name}: ${e.message}`);
        try { ws.getWriter(); } catch (e) { out.lockedError = e.message; }
        const failing = new WritableStream({ write() { throw new RangeError("disk full"); } });
        const w2 = failing.getWriter();
        out.failed = await w2.write("x").catch((e) => `${e.name}: ${e.message}`);
        out.failedClosed = await w2.closed.catch((e) => e.message);
        out.next = await w2.write("y").catch((e) => e.message);
        out.bytes = new ByteLengthQueuingStrategy({ highWaterMark: 8 }).size(new Uint8Array(3));
        return out;
        """
    )
    assert result == {
        "locked": True,
        "desired": 4,
        "seen": [1, 2, 3, "closed"],
        "closed": True,
        "afterClose": "TypeError: Can't write to a closed WritableStream.",
        "lockedError": "WritableStream is locked",
        "failed": "RangeError: disk full",
        "failedClosed": "disk full",
        "next": "disk full",
        "bytes": 3,
    }


async def test_pipe_to_aborts_the_destination_when_the_source_errors() -> None:
    result = await run_js_async(
        """
        const events = [];
        const source = new ReadableStream({ start(c) { c.enqueue("a"); c.error(new Error("source broke")); } });
        const sink = new WritableStream({ write(chunk) { events.push(chunk); }, abort(reason) { events.push(`abort: ${reason.message}`); } });
        const piped = await source.pipeTo(sink).then(() => "resolved", (e) => e.message);
        const t = new TransformStream();
        t.writable.getWriter().abort(new Error("stop"));
        const read = await t.readable.getReader().read().catch((e) => e.message);
        return { piped, events, read };
        """
    )
    assert result == {"piped": "source broke", "events": ["abort: source broke"], "read": "stop"}
