"""R2 buckets (env.BUCKET): put, get (ranges, conditions), head, delete, list, multipart."""

from __future__ import annotations

from typing import Any

from compat.differences import R2_STORAGE_CLASS, R2_STREAM_LENGTH, difference
from compat.scenario import Scenario

HELLO_MD5 = "5eb63bbbe01eeed093cb22bb8f5acdc3"  # md5("hello world")
NO_HTTP = {
    "contentType": {"undefined": True},
    "contentLanguage": {"undefined": True},
    "contentDisposition": {"undefined": True},
    "contentEncoding": {"undefined": True},
    "cacheControl": {"undefined": True},
    "cacheExpiry": {"undefined": True},
}


def r2(method: str, *args: Any, **extra: Any) -> dict[str, Any]:
    return {"b": "BUCKET", "m": method, "args": list(args), **extra}


def plain(obj: dict[str, Any], sc: Scenario) -> dict[str, Any]:
    """An object description with storageClass checked and dropped."""
    out = dict(obj)
    assert out.pop("storageClass") == sc.pick(celld="Standard", wrangler="")
    return out


@difference(wrangler=R2_STORAGE_CLASS)
def test_r2_put_get_head(sc: Scenario) -> None:
    """put() answers an R2Object; get() an R2ObjectBody with the body; head() no body."""
    k = sc.new_id()
    put, got, head, missing_get, missing_head = sc.storage(
        r2("put", k, "hello world", {
            "httpMetadata": {"contentType": "text/plain", "cacheControl": "max-age=60"},
            "customMetadata": {"k": "v"},
        }),
        r2("get", k, read="text"),
        r2("head", k),
        r2("get", k + "-missing"),
        r2("head", k + "-missing"),
    )  # fmt: skip
    http = {**NO_HTTP, "contentType": "text/plain", "cacheControl": "max-age=60"}
    written = [["cache-control", "max-age=60"], ["content-type", "text/plain"]]
    common = {
        "key": k, "size": 11, "etag": HELLO_MD5, "httpEtag": f'"{HELLO_MD5}"',
        "version": "string", "uploaded": "Date", "httpMetadata": http,
        "customMetadata": {"k": "v"}, "checksums": {"md5": HELLO_MD5}, "written": written,
    }  # fmt: skip
    assert plain(put, sc) == {"class": "R2Object", **common}  # no range on a put's answer
    assert plain(got, sc) == {
        "class": "R2ObjectBody", "range": {"offset": 0, "length": 11}, "bodyUsed": False,
        "body": "hello world", **common,
    }  # fmt: skip
    assert plain(head, sc) == {"class": "R2Object", "range": {"offset": 0, "length": 11}, **common}
    assert missing_get is None and missing_head is None


def test_r2_body_readers(sc: Scenario) -> None:
    """An R2ObjectBody reads as json, arrayBuffer or a body stream."""
    k = sc.new_id()
    _, as_json, as_buffer, as_stream = sc.storage(
        r2("put", k, '{"x": [1]}'),
        r2("get", k, read="json"),
        r2("get", k, read="arrayBuffer"),
        r2("get", k, read="stream"),
    )
    assert as_json["body"] == {"x": [1]}
    assert as_buffer["body"] == list(b'{"x": [1]}')
    assert as_stream["body"] == '{"x": [1]}'


def test_r2_ranges(sc: Scenario) -> None:
    """get() with offset/length, suffix and Range-header ranges; a range past the end throws."""
    k = sc.new_id()
    _, tail, head, suffix, header, beyond = sc.storage(
        r2("put", k, "hello world"),
        r2("get", k, {"range": {"offset": 6}}, read="text"),
        r2("get", k, {"range": {"offset": 0, "length": 5}}, read="text"),
        r2("get", k, {"range": {"suffix": 5}}, read="text"),
        r2("get", k, {"range": {"$headers": [["range", "bytes=0-4"]]}}, read="text"),
        r2("get", k, {"range": {"offset": 100}}, read="text"),
    )
    assert (tail["body"], tail["range"]) == ("world", {"offset": 6, "length": 5})
    assert (head["body"], head["range"]) == ("hello", {"offset": 0, "length": 5})
    assert (suffix["body"], suffix["range"]) == ("world", {"offset": 6, "length": 5})
    assert (header["body"], header["range"]) == ("hello", {"offset": 0, "length": 5})
    assert beyond["error"]["name"] == "Error" and beyond["error"]["message"].startswith("get: ")


def test_r2_conditional_get_and_put(sc: Scenario) -> None:
    """A failed onlyIf makes get() answer an R2Object without a body and put() answer null."""
    k = sc.new_id()
    _, miss, no_match, header_ok, put_refused, still = sc.storage(
        r2("put", k, "hello world"),
        r2("get", k, {"onlyIf": {"etagMatches": "nope"}}, read="text"),
        r2("get", k, {"onlyIf": {"etagDoesNotMatch": HELLO_MD5}}, read="text"),
        r2("get", k, {"onlyIf": {"$headers": [["if-match", f'"{HELLO_MD5}"']]}}, read="text"),
        r2("put", k, "new", {"onlyIf": {"etagMatches": "nope"}}),
        r2("get", k, read="text"),
    )
    assert miss["class"] == "R2Object" and "body" not in miss
    assert no_match["class"] == "R2Object"
    assert header_ok["class"] == "R2ObjectBody" and header_ok["body"] == "hello world"
    assert put_refused is None
    assert still["body"] == "hello world"


def test_r2_checksums(sc: Scenario) -> None:
    """md5/sha* given to put() are checked: wrong length is a TypeError, a mismatch an Error."""
    k = sc.new_id()
    short, short_sha, wrong, right, sha = sc.storage(
        r2("put", k, '{"x":1}', {"md5": "0000"}),
        r2("put", k, '{"x":1}', {"sha256": "0000"}),
        r2("put", k, '{"x":1}', {"md5": HELLO_MD5}),
        r2("put", k, "hello world", {"md5": HELLO_MD5}),
        r2("put", k, "hello world", {"sha1": "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed"}),
    )
    assert short["error"] == {"name": "TypeError", "message": "MD5 is 32 hex characters, not 4"}
    assert short_sha["error"] == {
        "name": "TypeError",
        "message": "SHA-256 is 64 hex characters, not 4",
    }
    assert wrong["error"] == {
        "name": "Error",
        "message": "put: The MD5 checksum you specified did not match what we received.\n"
        f"You provided a MD5 checksum with value: {HELLO_MD5}\n"
        "Actual MD5 was: ac3ef48caa08fa3ed5e025da69edc645 (10037)",
    }
    assert right["checksums"] == {"md5": HELLO_MD5}
    assert sha["checksums"] == {
        "md5": HELLO_MD5,
        "sha1": "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed",
    }


def test_r2_value_kinds(sc: Scenario) -> None:
    """put() takes buffers and null; numbers and plain objects are TypeErrors."""
    k = sc.new_id()
    buf, empty, number, obj = sc.storage(
        r2("put", k + "b", {"$bytes": [1, 2]}),
        r2("put", k + "e", None),
        r2("put", k + "n", 5),
        r2("put", k + "o", {"a": 1}),
    )
    assert (buf["size"], buf["etag"]) == (2, "0cb988d042a7f28dd5fe2b55b3f5ac7a")
    assert (empty["size"], empty["etag"]) == (0, "d41d8cd98f00b204e9800998ecf8427e")
    message = (
        "Failed to execute 'put' on 'R2Bucket': parameter 2 is not of type "
        "'JsReadableStream or ArrayBuffer or ArrayBufferView or string or Blob'."
    )
    assert number["error"] == {"name": "TypeError", "message": message}
    assert obj["error"] == {"name": "TypeError", "message": message}


@difference(wrangler=R2_STREAM_LENGTH)
def test_r2_put_stream(sc: Scenario) -> None:
    """put() of a ReadableStream of unknown length."""
    result = sc.one(r2("put", sc.new_id(), {"$stream": "two"}))
    if sc.on == "celld":
        assert result["size"] == 3
    else:
        assert result["error"]["name"] == "TypeError"
        assert "known length" in result["error"]["message"]


def test_r2_list(sc: Scenario) -> None:
    """list() in key order, with prefix, delimiter, limit/cursor and include."""
    p = sc.new_id() + "/"
    sc.storage(
        r2("put", p + "a.txt", "A", {"customMetadata": {"k": "v"},
                                     "httpMetadata": {"contentType": "text/plain"}}),
        r2("put", p + "dir/one", "1"),
        r2("put", p + "dir/two", "2"),
        r2("put", p + "dir/sub/three", "3"),
    )  # fmt: skip
    everything, grouped, page, included = sc.storage(
        r2("list", {"prefix": p}),
        r2("list", {"prefix": p + "dir/", "delimiter": "/"}),
        r2("list", {"prefix": p, "limit": 2}),
        r2("list", {"prefix": p + "a", "include": ["httpMetadata", "customMetadata"]}),
    )
    keys = [p + "a.txt", p + "dir/one", p + "dir/sub/three", p + "dir/two"]
    assert [o["key"] for o in everything["objects"]] == keys
    assert everything["truncated"] is False and everything["cursor"] == {"undefined": True}
    first = everything["objects"][0]
    assert first["httpMetadata"] == NO_HTTP and first["customMetadata"] == {}
    assert "range" not in first
    assert [o["key"] for o in grouped["objects"]] == [p + "dir/one", p + "dir/two"]
    assert grouped["delimitedPrefixes"] == [p + "dir/sub/"]
    assert page["truncated"] is True and [o["key"] for o in page["objects"]] == keys[:2]
    rest = sc.one(r2("list", {"prefix": p, "cursor": page["cursor"]}))
    assert [o["key"] for o in rest["objects"]] == keys[2:]
    [a] = included["objects"]
    assert a["customMetadata"] == {"k": "v"}
    assert a["httpMetadata"]["contentType"] == "text/plain"


def test_r2_delete(sc: Scenario) -> None:
    """delete() of one key or many; deleting a missing key is not an error."""
    p = sc.new_id() + "/"
    sc.storage(*(r2("put", p + n, n) for n in ("a", "b", "c")))
    one, many, missing, listed = sc.storage(
        r2("delete", p + "a"),
        r2("delete", [p + "b", p + "c"]),
        r2("delete", p + "never"),
        r2("list", {"prefix": p}),
    )
    assert one == many == missing == {"undefined": True}
    assert listed["objects"] == []


def test_r2_key_coercion_and_limits(sc: Scenario) -> None:
    """Keys are converted with String(); keys over 1024 bytes are refused."""
    number, too_long = sc.storage(r2("head", 1234567), r2("put", "x" * 1025, "v"))
    assert number is None
    assert too_long["error"]["name"] == "Error"
    assert too_long["error"]["message"].startswith("put: ")


@difference(wrangler=R2_STORAGE_CLASS)
def test_r2_multipart(sc: Scenario) -> None:
    """A multipart upload, resumed by id, completes into one object with a `-N` etag."""
    k = sc.new_id()
    done, head, aborted, after_abort = sc.storage(
        {"b": "BUCKET", "m": "multipart", "key": k, "parts": ["a" * (5 * 1024 * 1024), "tail"],
         "options": {"customMetadata": {"m": "p"}}},
        r2("head", k),
        {"b": "BUCKET", "m": "multipart", "key": k + "-x", "parts": ["x"], "abort": True},
        r2("head", k + "-x"),
    )  # fmt: skip
    assert plain(done, sc) | {"written": []} == {
        "class": "R2Object", "key": k, "size": 5 * 1024 * 1024 + 4,
        "etag": "30dcfd3901d1c613b7fb532281748544-2",
        "httpEtag": '"30dcfd3901d1c613b7fb532281748544-2"', "version": "string",
        "uploaded": "Date", "httpMetadata": NO_HTTP, "customMetadata": {"m": "p"},
        "checksums": {}, "written": [],
    }  # fmt: skip
    assert head["size"] == 5 * 1024 * 1024 + 4 and head["customMetadata"] == {"m": "p"}
    assert aborted == {"undefined": True} and after_abort is None


def test_r2_custom_metadata_limit(sc: Scenario) -> None:
    """customMetadata keys and values may total 8,192 bytes; more is refused."""
    k = sc.new_id()
    ok, too_big, head = sc.storage(
        r2("put", k, "v", {"customMetadata": {"k": {"$repeat": ["x", 8191]}}}),
        r2("put", k + "b", "v", {"customMetadata": {"k": {"$repeat": ["x", 8192]}}}),
        r2("head", k + "b"),
    )
    assert ok["size"] == 1 and len(ok["customMetadata"]["k"]) == 8191
    assert too_big["error"] == {
        "name": "Error",
        "message": "put: Your metadata headers exceed the maximum allowed metadata size. (10012)",
    }
    assert head is None
