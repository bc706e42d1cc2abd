"""KV namespaces (env.KV): reads, writes, metadata, listing, expiry, limits and their errors."""

from __future__ import annotations

from compat.differences import JS_ENGINE_MESSAGES, difference
from compat.scenario import Scenario


def kv(method: str, *args: object, **extra: object) -> dict[str, object]:
    return {"b": "KV", "m": method, "args": list(args), **extra}


def test_kv_get_types(sc: Scenario) -> None:
    """get() returns text by default, and json, arrayBuffer or a stream when asked; cacheTtl
    is accepted from 30 s."""
    k = sc.new_id()
    put, text, js, buf, stream, missing = sc.storage(
        kv("put", k, '{"a":[1,2]}'),
        kv("get", k),
        kv("get", k, "json"),
        kv("get", k, {"type": "arrayBuffer", "cacheTtl": 60}),
        kv("get", k, {"type": "stream"}),
        kv("get", k + "-missing"),
    )
    short_ttl = sc.one(kv("get", k, {"cacheTtl": 10}))
    assert short_ttl["error"] == {
        "name": "Error",
        "message": "KV GET failed: 400 Invalid cache_ttl of 10. Cache TTL must be at least 30.",
    }
    assert put == {"undefined": True}
    assert text == '{"a":[1,2]}'
    assert js == {"a": [1, 2]}
    assert buf == {"arrayBuffer": list(b'{"a":[1,2]}')}
    assert stream == {"stream": '{"a":[1,2]}'}
    assert missing is None


def test_kv_put_value_kinds(sc: Scenario) -> None:
    """put() takes strings, ArrayBuffers, views and streams; other primitives become strings."""
    k = sc.new_id()
    results = sc.storage(
        kv("put", k + "b", {"$bytes": [0, 1, 255]}),
        kv("get", k + "b", "arrayBuffer"),
        kv("put", k + "v", {"$view": [7, 8]}),
        kv("get", k + "v", "arrayBuffer"),
        kv("put", k + "s", {"$stream": "streamed"}),
        kv("get", k + "s"),
        kv("put", k + "n", 123),
        kv("get", k + "n"),
        kv("put", k + "o", {"a": 1}),
    )
    assert results[1] == {"arrayBuffer": [0, 1, 255]}
    assert results[3] == {"arrayBuffer": [7, 8]}
    assert results[5] == "streamed"
    assert results[7] == "123"
    assert results[8]["error"]["name"] == "TypeError"


def test_kv_metadata_and_expiration(sc: Scenario) -> None:
    """getWithMetadata() returns the metadata stored with put(); list() shows expirations."""
    k = sc.new_id()
    now = sc.clock_s()
    _, with_meta, plain, missing, listed = sc.storage(
        kv("put", k + "/a", "1", {"metadata": {"tag": "x", "n": 2}, "expirationTtl": 3600}),
        kv("getWithMetadata", k + "/a", "json"),
        kv("getWithMetadata", k + "/a"),
        kv("getWithMetadata", k + "/missing"),
        kv("list", {"prefix": k + "/"}),
    )
    assert with_meta == {"value": 1, "metadata": {"tag": "x", "n": 2}, "cacheStatus": None}
    assert plain["value"] == "1"
    assert missing == {"value": None, "metadata": None, "cacheStatus": None}
    [entry] = listed["keys"]
    assert entry["name"] == k + "/a" and entry["metadata"] == {"tag": "x", "n": 2}
    # The clocks of two servers differ by the time between requests; compare the TTL.
    assert abs(entry["expiration"] - (now + 3600)) < 30
    assert listed["list_complete"] is True and listed["cacheStatus"] is None


def test_kv_bulk_get(sc: Scenario) -> None:
    """get() of an array answers a Map; only text and json types; non-JSON values fail json."""
    k = sc.new_id()
    _, _, texts, jsons, meta, bad_type, empty, not_json = sc.storage(
        kv("put", k + "a", '"A"', {"metadata": {"m": 1}}),
        kv("put", k + "b", "plain"),
        kv("get", [k + "a", k + "b", k + "c"]),
        kv("get", [k + "a"], "json"),
        kv("getWithMetadata", [k + "a", k + "c"]),
        kv("get", [k + "a"], "arrayBuffer"),
        kv("get", []),
        kv("get", [k + "a", k + "b"], "json"),
    )
    assert texts == {"map": [[k + "a", '"A"'], [k + "b", "plain"], [k + "c", None]]}
    assert jsons == {"map": [[k + "a", "A"]]}
    assert meta == {"map": [[k + "a", {"value": '"A"', "metadata": {"m": 1}}], [k + "c", None]]}
    assert bad_type["error"] == {
        "name": "Error",
        "message": 'KV GET_BULK failed: 400 "arrayBuffer" is not a valid type. '
        'Use "json" or "text"',
    }
    assert (
        empty["error"]["message"] == "KV GET_BULK failed: 400 You must request a minimum of 1 key"
    )
    assert not_json["error"]["message"] == (
        "KV GET_BULK failed: 400 At least one of the requested keys corresponds to a non-json value"
    )


def test_kv_list_pages(sc: Scenario) -> None:
    """list() pages with limit and cursor, in key order, and filters by prefix."""
    k = sc.new_id()
    names = [f"{k}/{c}" for c in "dbeac"]
    sc.storage(*(kv("put", n, n) for n in names), kv("put", k + "-other", "x"))
    first, second = sc.storage(
        kv("list", {"prefix": k + "/", "limit": 3}),
        kv("list", {"prefix": k + "/", "limit": "3"}),
    )
    assert [e["name"] for e in first["keys"]] == [f"{k}/{c}" for c in "abc"]
    assert first["list_complete"] is False and isinstance(first["cursor"], str)
    assert second == first
    rest = sc.one(kv("list", {"prefix": k + "/", "cursor": first["cursor"]}))
    assert [e["name"] for e in rest["keys"]] == [f"{k}/d", f"{k}/e"]
    assert rest["list_complete"] is True and "cursor" not in rest


def test_kv_delete(sc: Scenario) -> None:
    """delete() removes a key; deleting a missing key is not an error."""
    k = sc.new_id()
    _, deleted, after, again = sc.storage(
        kv("put", k, "v"), kv("delete", k), kv("get", k), kv("delete", k)
    )
    assert deleted == {"undefined": True} and after is None and again == {"undefined": True}


def test_kv_key_errors(sc: Scenario) -> None:
    """Empty, dot and over-long keys fail with workerd's errors."""
    long_key = "x" * 513
    empty, dot, dots, long_get, long_put, ok_512 = sc.storage(
        kv("get", ""),
        kv("put", ".", "v"),
        kv("delete", ".."),
        kv("get", long_key),
        kv("put", long_key, "v"),
        kv("get", "y" * 512),
    )
    assert empty["error"] == {"name": "TypeError", "message": "Key name cannot be empty."}
    assert dot["error"] == {"name": "TypeError", "message": '"." is not allowed as a key name.'}
    assert dots["error"] == {"name": "TypeError", "message": '".." is not allowed as a key name.'}
    assert long_get["error"] == {
        "name": "Error",
        "message": "KV GET failed: 414 UTF-8 encoded length of 513 exceeds key length limit "
        "of 512.",
    }
    assert long_put["error"]["message"] == (
        "KV PUT failed: 414 UTF-8 encoded length of 513 exceeds key length limit of 512."
    )
    assert ok_512 is None


def test_kv_put_option_errors(sc: Scenario) -> None:
    """Expirations under 60 s and metadata over 1024 bytes are refused."""
    k = sc.new_id()
    short, negative, past, junk, meta, listed = sc.storage(
        kv("put", k, "v", {"expirationTtl": 10}),
        kv("put", k, "v", {"expirationTtl": -1}),
        kv("put", k, "v", {"expiration": 10}),
        kv("put", k, "v", {"expirationTtl": "abc"}),
        kv("put", k, "v", {"metadata": {"x": "y" * 2000}}),
        kv("list", {"prefix": k}),
    )
    assert short["error"]["message"] == (
        "KV PUT failed: 400 Invalid expiration_ttl of 10. Expiration TTL must be at least 60."
    )
    assert negative["error"]["message"] == (
        "KV PUT failed: 400 Invalid expiration_ttl of -1. Please specify integer greater than 0."
    )
    assert past["error"]["message"] == (
        "KV PUT failed: 400 Invalid expiration of 10. Please specify integer greater than the "
        "current number of seconds since the UNIX epoch."
    )
    assert junk["error"]["message"] == (
        "KV PUT failed: 400 Invalid expiration_ttl of 0. Please specify integer greater than 0."
    )
    assert meta["error"]["message"] == (
        "KV PUT failed: 413 Metadata length of 2008 exceeds limit of 1024."
    )
    assert listed["keys"] == []  # nothing was written by the failed puts


def test_kv_list_limits(sc: Scenario) -> None:
    """list() refuses a limit over 1000; a cursor that does not decode lists nothing."""
    too_many, garbage = sc.storage(
        kv("list", {"limit": 1001}), kv("list", {"prefix": sc.new_id(), "cursor": "%%%"})
    )
    assert too_many["error"]["message"] == (
        "KV GET failed: 400 Invalid key_count_limit of 1001. Please specify an integer less than "
        "1000."
    )
    assert garbage == {"keys": [], "list_complete": True, "cacheStatus": None}


@difference(wrangler=JS_ENGINE_MESSAGES)
def test_kv_get_json_of_text(sc: Scenario) -> None:
    """get(key, "json") of a non-JSON value throws JSON.parse's SyntaxError."""
    k = sc.new_id()
    _, bad = sc.storage(kv("put", k, "streamed"), kv("get", k, "json"))
    assert bad["error"]["name"] == "SyntaxError"
    assert bad["error"]["message"] == sc.pick(
        celld="unexpected token: 'streamed'",
        wrangler="Unexpected token 's', \"streamed\" is not valid JSON",
    )


def test_kv_expiry(sc: Scenario) -> None:
    """A key put with expirationTtl 60 reads as missing once 60 s have passed."""
    k = sc.new_id()
    sc.storage(kv("put", k, "v", {"expirationTtl": 60}))
    assert sc.one(kv("get", k)) == "v"
    sc.wait(61_000, settle=False)
    gone, listed = sc.storage(kv("get", k), kv("list", {"prefix": k}))
    assert gone is None
    assert listed["keys"] == []
