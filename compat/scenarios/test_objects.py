"""Durable Objects (compat/projects/objects): ids, RPC, fetch, storage, SQL, alarms, workflows."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from compat.targets import Target

RUN = uuid.uuid4().hex[:8]


def get(target: Target, path: str, **params: str) -> Any:
    response = target.request("GET", path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def rpc(target: Target, name: str, method: str, *args: object) -> Any:
    return get(target, "/rpc", name=f"{name}-{RUN}", call=json.dumps([method, *args]))


def test_rpc_state_is_per_object(objects_target: Target) -> None:
    """Each name is its own object with its own storage; results come back to the caller."""
    assert rpc(objects_target, "a", "increment") == {"value": 1}
    assert rpc(objects_target, "a", "increment", 5) == {"value": 6}
    assert rpc(objects_target, "b", "increment") == {"value": 1}
    assert rpc(objects_target, "a", "get") == {"value": 6}
    assert rpc(objects_target, "a", "echo", {"n": [1, "x", None], "s": "é🙂"}) == {
        "value": {"n": [1, "x", None], "s": "é🙂"}
    }


def test_ids_match_workerd(objects_target: Target) -> None:
    """idFromName() derives the id workerd derives (same name, same 64 hex digits), and
    idFromString() checks length and namespace with workerd's messages."""
    ids = get(objects_target, "/ids")
    assert ids["a"] == "1ed78181f2d6b05550ef14e68d132c30caa96ccccb167aaf0e0d4df8ecdb3ed2"
    assert ids["name"] == "x" and ids["same"] and ids["otherNs"] and ids["parsed"]
    assert ids["parsedName"] is None and ids["uniqueName"] is None
    assert len(ids["unique"]) == 64 and ids["unique"] != ids["a"]
    assert ids["bad"] == "TypeError: Invalid Durable Object ID: must be 64 hex digits"
    assert ids["foreign"] == "TypeError: Durable Object ID is not valid for this namespace."


def test_errors_cross_as_their_type(objects_target: Target) -> None:
    """An error thrown by an RPC method is rethrown in the caller with its type and message
    (not its other own properties); a missing method is a TypeError."""
    error = rpc(objects_target, "e", "fail", "nope")["error"]
    assert error == {"name": "RangeError", "message": "nope", "isRange": True}
    missing = rpc(objects_target, "e", "noSuchMethod")["error"]
    assert missing["name"] == "TypeError"


def test_stub_fetch(objects_target: Target) -> None:
    """stub.fetch() reaches the object's fetch handler with method, path and headers."""
    response = objects_target.request("GET", "/fetch", params={"name": f"f-{RUN}"})
    assert (response.status_code, response.text) == (200, "POST /path 2")
    assert response.headers["x-object"] == f"f-{RUN}"


def test_plain_class_serves_fetch_not_rpc(objects_target: Target) -> None:
    """A class that does not extend DurableObject answers fetch() but not RPC."""
    answer = get(objects_target, "/plain", name=f"p-{RUN}")
    assert answer["text"] == "plain"
    assert "does not support RPC" in answer["rpc"]


def test_key_value_storage(objects_target: Target) -> None:
    """get/put/delete of one or many keys, list with its options, deleteAll."""

    def kv(*call: object) -> Any:
        return rpc(objects_target, "kv", "kv", *call)["value"]

    kv("deleteAll")
    assert kv("put", {"a": 1, "b": [2], "c": "three", "d/1": 4, "d/2": 5}) == "(undefined)"
    assert kv("get", "b") == [2]
    assert kv("get", "missing") == "(undefined)"
    assert kv("get", ["a", "missing", "c"]) == {"map": [["a", 1], ["c", "three"]]}
    assert kv("list", {"prefix": "d/"}) == {"map": [["d/1", 4], ["d/2", 5]]}
    assert kv("list", {"start": "b", "end": "d/2"}) == {
        "map": [["b", [2]], ["c", "three"], ["d/1", 4]]
    }
    assert kv("list", {"startAfter": "b", "limit": 1}) == {"map": [["c", "three"]]}
    assert kv("list", {"reverse": True, "limit": 2}) == {"map": [["d/2", 5], ["d/1", 4]]}
    assert kv("delete", "a") is True
    assert kv("delete", "a") is False
    assert kv("delete", ["b", "c", "nope"]) == 2
    kv("deleteAll")
    assert kv("list") == {"map": []}


def notes(target: Target, method: str, *args: object) -> Any:
    return rpc(target, "n", "notes." + method, *args)


def test_sql_storage(objects_target: Target) -> None:
    """sql.exec() with bindings, cursors (toArray, raw, one, columnNames, rowsWritten), blobs,
    transactionSync, and what user SQL may not do."""
    t = objects_target
    assert notes(t, "add", "first") == {"value": {"written": 1}}
    notes(t, "add", "second")
    assert notes(t, "all")["value"] == {
        "columns": ["id", "body"],
        "rows": [{"id": 1, "body": "first"}, {"id": 2, "body": "second"}],
    }
    assert notes(t, "raw")["value"] == [[1, "first"], [2, "second"]]
    assert notes(t, "one", 2)["value"] == {"body": "second"}
    assert notes(t, "one", 9)["error"]["message"] == (
        "Expected exactly one result from SQL query, but got no results."
    )
    assert notes(t, "blob")["value"] == [True, [1, 2, 3]]
    assert notes(t, "atomic", True)["value"] == "undo"
    assert notes(t, "atomic", False)["value"] == "kept"
    assert notes(t, "count")["value"] == 3
    # _cf_KV only exists once the key-value API wrote to the object (as in workerd)...
    assert notes(t, "sneaky", "SELECT * FROM _cf_KV")["value"] == (
        "no such table: _cf_KV: SQLITE_ERROR"
    )
    rpc(t, "n", "notes.remember", "k", 1)
    # ...and then user SQL may not read it.
    assert notes(t, "sneaky", "SELECT * FROM _cf_KV")["value"] == (
        "access to _cf_KV.key is prohibited: SQLITE_AUTH"
    )
    assert "transactionSync()" in notes(t, "sneaky", "BEGIN TRANSACTION")["value"]


def test_an_alarm_fires(objects_target: Target) -> None:
    """setAlarm() is read back by getAlarm(); alarm() runs once the time comes (getAlarm() reads
    null inside it) and the alarm is cleared after it succeeded."""
    name = f"alarm-{RUN}"
    assert get(objects_target, "/alarm", name=name, **{"in": "1500"}) == {"at": True}
    deadline = time.monotonic() + objects_target.poll_timeout
    while True:
        # Small steps: the object reads its own clock, which celld's test clock follows
        # only as far as it has been moved.
        objects_target.wait(500, settled=False)
        state = get(objects_target, "/rpc", name=name, call=json.dumps(["alarmState"]))["value"]
        if state["runs"] or time.monotonic() > deadline:
            break
    assert state["runs"] == [{"retryCount": 0, "isRetry": False, "during": None}]
    assert state["alarm"] is None


def test_workflow_and_object_call_each_other(objects_target: Target) -> None:
    """An object creates a workflow instance; that instance's step calls the object back."""
    name = f"wf-{RUN}"
    instance = f"tally-{RUN}"
    get(objects_target, "/rpc", name=name, call=json.dumps(["increment", 1]))
    created = get(objects_target, "/rpc", name=name, call=json.dumps(["startTally", instance]))
    assert created == {"value": instance}
    deadline = time.monotonic() + objects_target.poll_timeout
    while True:
        status = get(objects_target, "/wfstatus", id=instance)
        if status["status"] in ("complete", "errored") or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == {"status": "complete", "output": {"first": 11}}
    assert get(objects_target, "/rpc", name=name, call=json.dumps(["get"])) == {"value": 11}
