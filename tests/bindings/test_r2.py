"""R2 binding: objects as files plus metadata rows."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from typing import Any

import asyncpg
import pytest

from celld.bindings.r2 import R2Bucket
from tests.bindings.harness import Harness
from tests.jsharness import JsError


def _pg(js: Harness, sql: str) -> list[tuple[Any, ...]]:
    async def fetch() -> list[tuple[Any, ...]]:
        connection = await asyncpg.connect(js.shared)
        try:
            return [tuple(r) for r in await connection.fetch(sql)]
        finally:
            await connection.close()

    return asyncio.run(fetch())


def _rows(js: Harness) -> list[tuple[str, Any, int]]:
    """(key, body, size) of every object: body is its file's name, or its body's id."""
    if js.shared:
        rows = _pg(js, "SELECT key, body, size FROM r2_objects ORDER BY key")
        return [(bytes(k).decode(), b, n) for k, b, n in rows]
    conn = sqlite3.connect(js.state / "r2" / "bucket" / "objects.sqlite3")
    return conn.execute("SELECT key, blob, size FROM objects ORDER BY key").fetchall()


def _bodies(js: Harness) -> list[Any]:
    """The bodies kept: files in blobs/, or bodies not yet dropped."""
    if js.shared:
        return [r[0] for r in _pg(js, "SELECT id FROM r2_bodies WHERE state = 'live'")]
    return [p.name for p in (js.state / "r2" / "bucket" / "blobs").glob("*")]


def test_objects_are_files_plus_rows(js_files: Harness) -> None:
    js = js_files
    js('await env.BUCKET.put("a", "first"); await env.BUCKET.put("a", "second!");')
    [(key, blob, size)] = _rows(js)
    assert (key, size) == ("a", 7)
    blobs = js.state / "r2" / "bucket" / "blobs"
    assert (blobs / blob).read_bytes() == b"second!"
    assert [p.name for p in blobs.iterdir()] == [blob]  # the replaced body is gone
    js('await env.BUCKET.delete("a")')
    assert _rows(js) == [] and list(blobs.iterdir()) == []


def test_orphan_bodies_are_swept_when_the_bucket_opens(js_files: Harness) -> None:
    js = js_files
    js('await env.BUCKET.put("keep", "k")')
    blobs = js.state / "r2" / "bucket" / "blobs"
    (blobs / "deadbeef").write_bytes(b"left by a crash")

    async def reopen() -> None:
        bucket = await R2Bucket(js.state / "r2" / "bucket", js.clock.now).open()
        await bucket.close()

    asyncio.run(reopen())
    assert sorted(p.name for p in blobs.iterdir()) == [_rows(js)[0][1]]


def test_get_head_range_conditions(js: Harness) -> None:
    result = js("""
        const put = await env.BUCKET.put("k", "hello world", {
          httpMetadata: new Headers({"content-type": "text/plain"}),
          customMetadata: {a: "1"},
          sha256: await crypto.subtle.digest("SHA-256", new TextEncoder().encode("hello world")),
        });
        const ranged = await env.BUCKET.get("k", {range: {offset: 6, length: 3}});
        const cond = await env.BUCKET.get("k", {onlyIf: {etagDoesNotMatch: put.etag}});
        const headers = new Headers();
        put.writeHttpMetadata(headers);
        return {
          etag: put.etag, http: put.httpMetadata.contentType, custom: put.customMetadata,
          sha: put.checksums.toJSON().sha256, text: await ranged.text(), range: ranged.range,
          condHasBody: "body" in cond, headers: [...headers],
          head: (await env.BUCKET.head("k")).size, refused: await env.BUCKET.put("k", "x", {
            onlyIf: {etagMatches: "other"}}),
        };
    """)
    assert result == {
        "etag": hashlib.md5(b"hello world").hexdigest(),
        "http": "text/plain",
        "custom": {"a": "1"},
        "sha": hashlib.sha256(b"hello world").hexdigest(),
        "text": "wor",
        "range": {"offset": 6, "length": 3},
        "condHasBody": False,
        "headers": [["content-type", "text/plain"]],
        "head": 11,
        "refused": None,
    }


def test_list_with_delimiter_and_cursor(js: Harness) -> None:
    result = js("""
        for (const k of ["a/1", "a/2", "a/b/3", "c"]) await env.BUCKET.put(k, k);
        const top = await env.BUCKET.list({delimiter: "/"});
        const page = await env.BUCKET.list({prefix: "a/", limit: 1});
        const next = await env.BUCKET.list({prefix: "a/", cursor: page.cursor});
        return [top.objects.map((o) => o.key), top.delimitedPrefixes,
                page.truncated, next.objects.map((o) => o.key)];
    """)
    assert result == [["c"], ["a/"], True, ["a/2", "a/b/3"]]


def test_multipart_upload(js: Harness) -> None:
    result = js("""
        const up = await env.BUCKET.createMultipartUpload("big", {customMetadata: {m: "1"}});
        const p1 = await up.uploadPart(1, new Uint8Array(5 * 1024 * 1024).fill(97));
        const p2 = await env.BUCKET.resumeMultipartUpload("big", up.uploadId).uploadPart(2, "end");
        const done = await up.complete([p1, p2]);
        const got = await env.BUCKET.get("big", {range: {suffix: 3}});
        return [done.size, done.etag.endsWith("-2"), done.customMetadata, await got.text()];
    """, timeout=60)  # fmt: skip
    assert result == [5 * 1024 * 1024 + 3, True, {"m": "1"}, "end"]
    assert _bodies(js) == [_rows(js)[0][1]]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ('env.BUCKET.put("k", "v", {md5: "0".repeat(32)})',
         "put: The MD5 checksum you specified did not match what we received.\n"
         "You provided a MD5 checksum with value: 00000000000000000000000000000000\n"
         "Actual MD5 was: 9e3669d19b675bd57058fd4664205d2a (10037)"),
        ('env.BUCKET.put("x".repeat(1025), "v")',
         "put: The specified object name is not valid. (10020)"),
        ('env.BUCKET.list({limit: 0})',
         "list: MaxKeys params must be positive integer <= 1000. (10022)"),
        ('env.BUCKET.resumeMultipartUpload("k", "nope").uploadPart(1, "x")',
         "uploadPart: The specified multipart upload does not exist. (10024)"),
    ],
)  # fmt: skip
def test_errors_store_nothing(js: Harness, call: str, message: str) -> None:
    with pytest.raises(JsError) as caught:
        js(f"await {call};")
    assert caught.value.message == message
    assert _rows(js) == []


def test_sweep_waits_for_a_writer_in_another_process(js_files: Harness) -> None:
    """A body written by another connection inside its write transaction survives a bucket
    opening meanwhile: the sweep takes the same lock and sees the committed row."""
    js = js_files
    import threading

    js('await env.BUCKET.put("seed", "s")')
    folder = js.state / "r2" / "bucket"
    other = sqlite3.connect(folder / "objects.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    (folder / "blobs" / "pending").write_bytes(b"new")
    asking = threading.Event()  # the sweep has begun its transaction

    def trace(statement: str) -> None:
        if statement.startswith("BEGIN"):
            asking.set()

    def reopen() -> None:
        async def go() -> None:
            bucket = R2Bucket(folder, js.clock.now)
            await bucket.file.open()
            await bucket.file.run(lambda conn: conn.set_trace_callback(trace))
            await bucket.open()  # sweeps under the write lock
            await bucket.close()

        asyncio.run(go())

    opener = threading.Thread(target=reopen)
    opener.start()
    assert asking.wait(30), "the bucket never began its sweep"
    assert (folder / "blobs" / "pending").exists()  # the sweep is waiting for the lock
    other.execute("INSERT INTO objects VALUES ('k', 'pending', 3, 'e', 'v', 0, '{}', '{}', '{}')")
    other.execute("COMMIT")
    opener.join(10)
    assert not opener.is_alive()
    assert (folder / "blobs" / "pending").read_bytes() == b"new"


def test_custom_metadata_limit(js: Harness) -> None:
    """Keys and values of customMetadata may total 8,192 bytes (as under wrangler dev)."""
    assert (
        js('return (await env.BUCKET.put("a", "v", {customMetadata: {k: "x".repeat(8191)}})).size')
        == 1
    )
    with pytest.raises(JsError) as caught:
        js('await env.BUCKET.put("b", "v", {customMetadata: {k: "x".repeat(8192)}})')
    assert caught.value.message == (
        "put: Your metadata headers exceed the maximum allowed metadata size. (10012)"
    )


def test_blob_bodies(js: Harness) -> None:
    """put() takes a Blob; an object body reads back as a Blob with its content type."""
    result = js("""
        await env.BUCKET.put("b", new Blob(["hel", "lo"]), {httpMetadata: {contentType: "text/x"}});
        const blob = await (await env.BUCKET.get("b")).blob();
        return [blob.type, blob.size, await blob.text()];
    """)
    assert result == ["text/x", 5, "hello"]


# -- streamed bodies -----------------------------------------------------------------------------


def _left_over(js: Harness) -> tuple[list[Any], list[Any]]:
    """The bodies still arriving and the bodies kept."""
    if js.shared:
        writing = [r[0] for r in _pg(js, "SELECT id FROM r2_bodies WHERE state = 'writing'")]
        return writing, sorted(_bodies(js))
    bucket = js.state / "r2" / "bucket"
    incoming = sorted(p.name for p in (bucket / "incoming").glob("*"))
    return incoming, sorted(_bodies(js))


def test_large_bodies_and_streams_are_put_and_got_in_pieces(js: Harness) -> None:
    result = js("""
        const big = new Uint8Array(1_000_000);
        for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 255;
        let n = 0;
        const stream = new ReadableStream({
          pull(controller) {
            if (n === 10) controller.close();
            else controller.enqueue(big.subarray(n++ * 100_000, n * 100_000));
          },
        });
        const fromBytes = await env.BUCKET.put("bytes", big);
        const fromStream = await env.BUCKET.put("stream", stream);
        const text = await env.BUCKET.put("text", "é".repeat(200_000));
        const got = await env.BUCKET.get("stream");
        let total = 0, chunks = 0, same = true;
        for await (const chunk of got.body) {
          for (let i = 0; i < chunk.length; i++) same = same && chunk[i] === big[total + i];
          total += chunk.length;
          chunks += 1;
        }
        const ranged = await env.BUCKET.get("bytes", { range: { offset: 999_000 } });
        const tail = new Uint8Array(await ranged.arrayBuffer());
        const readText = await (await env.BUCKET.get("text")).text();
        return { etags: [fromBytes.etag, fromStream.etag], size: fromStream.size, total, chunks,
                 same, tail: [tail.length, tail[0]], text: readText.length, textSize: text.size };
    """)
    md5 = hashlib.md5(bytes((i * 31) & 255 for i in range(1_000_000))).hexdigest()
    assert result["etags"] == [md5, md5]
    assert (result["size"], result["total"], result["same"]) == (1_000_000, 1_000_000, True)
    assert result["chunks"] > 1  # read from the file piece by piece
    assert result["tail"] == [1000, (999_000 * 31) & 255]
    assert (result["text"], result["textSize"]) == (200_000, 400_000)
    incoming, blobs = _left_over(js)
    assert incoming == [] and len(blobs) == 3


def test_a_streamed_put_that_fails_leaves_nothing(
    js: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("celld.bindings.r2.MAX_UPLOAD_BYTES", 300_000)
    result = js("""
        const stream = () => {
          let n = 0;
          return new ReadableStream({
            pull(controller) {
              if (n++ === 4) controller.close();
              else controller.enqueue(new Uint8Array(100_000).fill(n));
            },
          });
        };
        const errors = [];
        for (const options of [{}, { sha1: "0".repeat(40) }]) {
          try {
            await env.BUCKET.put("k", options.sha1 ? new Uint8Array(200_000) : stream(), options);
          } catch (error) {
            errors.push(error.message.split("\\n")[0]);
          }
        }
        const broken = new ReadableStream({
          pull(controller) {
            controller.enqueue(new Uint8Array(70_000));
            throw new RangeError("the source broke");
          },
        });
        try {
          await env.BUCKET.put("k", broken);
        } catch (error) {
          errors.push(`${error.name}: ${error.message}`);
        }
        const refused = await env.BUCKET.put("k", new Uint8Array(100_000), {
          onlyIf: { etagMatches: "nope" } });
        return { errors, refused, stored: await env.BUCKET.head("k") };
    """)
    assert result["errors"] == [
        "put: Your proposed upload exceeds the maximum allowed object size. (100100)",
        "put: The SHA-1 checksum you specified did not match what we received.",
        "RangeError: the source broke",
    ]
    assert result["refused"] is None and result["stored"] is None
    assert _left_over(js) == ([], [])


def test_incoming_bodies_of_dead_writers_are_swept_and_live_ones_kept(js_files: Harness) -> None:
    js = js_files
    import fcntl

    js('await env.BUCKET.put("keep", "k")')
    incoming = js.state / "r2" / "bucket" / "incoming"
    incoming.mkdir(exist_ok=True)
    (incoming / "dead").write_bytes(b"its writer died")
    live = incoming / "live"
    with open(live, "wb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # a writer in another process, say

        async def reopen() -> None:
            bucket = await R2Bucket(js.state / "r2" / "bucket", js.clock.now).open()
            await bucket.close()

        asyncio.run(reopen())
        assert sorted(p.name for p in incoming.iterdir()) == ["live"]
