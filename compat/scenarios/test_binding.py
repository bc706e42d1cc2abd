"""The Workflow binding: create, createBatch, get, ids and limits."""

from __future__ import annotations

import json

from compat.differences import (
    ERROR_STRINGS,
    OUTPUT_NULL,
    PAYLOAD_LIMIT,
    difference,
)
from compat.scenario import Scenario

INVALID_ID = "WorkflowError: (instance.invalid_id) Instance has invalid id"
WR_INVALID_ID = "WorkflowError: Workflow instance has invalid id"


def test_create_returns_id(sc: Scenario) -> None:
    """create({id}) returns an instance with that id; get(id) finds it."""
    i = sc.create([{"do": "a"}])
    assert sc.ok("/get", id=i) == {"id": i}
    sc.output(i)


def test_create_without_id_generates_one(sc: Scenario) -> None:
    """create() without an id gets a fresh, valid id."""
    body = sc.ok("/create-raw", body={"params": {"ops": [{"do": "a"}]}})
    other = sc.ok("/create-raw", body={"params": {"ops": [{"do": "a"}]}})
    assert body["id"] != other["id"]
    assert 0 < len(body["id"]) <= 100
    assert sc.output(body["id"]) == {"results": [{"step": "a", "attempt": 1}]}


def test_create_without_params(sc: Scenario) -> None:
    """create() with no params gives run() an empty payload."""
    code, body = sc.call("/create-raw", body={"id": sc.new_id()})
    assert code == 200
    assert sc.output(body["id"]) == {"results": []}


@difference(wrangler=ERROR_STRINGS)
def test_create_duplicate_id_throws(sc: Scenario) -> None:
    """create() with an id already in use throws already_exists."""
    i = sc.create([{"do": "a"}])
    sc.output(i)
    err = sc.error("/create", id=i, body={"ops": []})
    assert err == {
        "name": "Error",
        "message": sc.pick(
            celld="WorkflowError: (instance.already_exists) Instance already exists",
            wrangler=f'WorkflowError: (instance.already_exists) Workflow instance with id "{i}" '
            "already exists",
        ),
    }


@difference(wrangler=ERROR_STRINGS)
def test_create_duplicate_of_running_instance(sc: Scenario) -> None:
    """A duplicate of an instance still running also throws, and the original runs on."""
    i = sc.create([{"wait": "w", "type": "go"}])
    err = sc.error("/create", id=i, body={"ops": [{"do": "other"}]})
    assert "(instance.already_exists)" in err["message"]
    sc.settle()
    sc.event(i, "go", 1)
    assert sc.results(i)[0]["payload"] == 1


@difference(wrangler=ERROR_STRINGS)
def test_invalid_id_characters(sc: Scenario) -> None:
    """Ids outside ^[a-zA-Z0-9_][a-zA-Z0-9-_]*$ are refused."""
    for bad in ["bad id!", "-leading-dash", "dot.ted", "colon:id"]:
        err = sc.error("/create", id=bad, body={"ops": []})
        assert err == {
            "name": "Error",
            "message": sc.pick(celld=INVALID_ID, wrangler=WR_INVALID_ID),
        }


@difference(wrangler=ERROR_STRINGS)
def test_empty_id_refused(sc: Scenario) -> None:
    """An empty id is refused."""
    err = sc.error("/create-raw", body={"id": "", "params": {}})
    assert err == {"name": "Error", "message": sc.pick(celld=INVALID_ID, wrangler=WR_INVALID_ID)}


def test_id_of_100_chars_accepted(sc: Scenario) -> None:
    """A 100-character id is accepted."""
    i = sc.create([{"do": "a"}], id=("id100" + sc.new_id()).ljust(100, "x")[:100])
    assert len(i) == 100
    sc.output(i)


@difference(wrangler=ERROR_STRINGS)
def test_id_of_101_chars_refused(sc: Scenario) -> None:
    """A 101-character id is refused."""
    bad = ("id101" + sc.new_id()).ljust(101, "x")[:101]
    err = sc.error("/create", id=bad, body={"ops": []})
    assert err["message"] == sc.pick(celld=INVALID_ID, wrangler=WR_INVALID_ID)


def test_id_with_underscore_start(sc: Scenario) -> None:
    """Ids may start with an underscore and contain dashes."""
    i = sc.create([{"do": "a"}], id="_" + sc.new_id())
    sc.output(i)


@difference(wrangler=ERROR_STRINGS)
def test_get_unknown_id_throws(sc: Scenario) -> None:
    """get() of an id never created throws not_found."""
    err = sc.error("/get", id=sc.new_id())
    assert err == {
        "name": "Error",
        "message": sc.pick(
            celld="WorkflowError: (instance.not_found) Instance not found",
            wrangler="instance.not_found",
        ),
    }


@difference(wrangler=ERROR_STRINGS)
def test_status_unknown_id_throws(sc: Scenario) -> None:
    """status() through get() of an unknown id throws not_found."""
    err = sc.error("/status", id=sc.new_id())
    assert "instance.not_found" in err["message"]
    assert err["message"] == sc.pick(
        celld="WorkflowError: (instance.not_found) Instance not found",
        wrangler="instance.not_found",
    )


def test_create_batch_array(sc: Scenario) -> None:
    """createBatch([...]) creates every instance and returns them in order."""
    ids = [sc.new_id() for _ in range(3)]
    body = sc.ok(
        "/create-batch",
        body=[{"id": x, "params": {"ops": [{"do": "b", "value": n}]}} for n, x in enumerate(ids)],
    )
    assert body == {"ids": ids}
    assert [sc.results(x) for x in ids] == [[0], [1], [2]]


def test_create_batch_skips_existing_ids(sc: Scenario) -> None:
    """createBatch([...]) skips an id already in use and a repeated id."""
    old = sc.create([{"do": "a"}])
    new = sc.new_id()
    body = sc.ok("/create-batch", body=[{"id": old}, {"id": new}, {"id": new}])
    assert body == {"ids": [new]}
    assert sc.results(old) == [{"step": "a", "attempt": 1}]


def test_create_batch_object_form_reports_errors(sc: Scenario) -> None:
    """createBatch({instances}) reports existing and repeated ids as errors."""
    old = sc.create([{"do": "a"}])
    new = sc.new_id()
    body = sc.ok("/create-batch", body={"instances": [{"id": old}, {"id": new}, {"id": new}]})
    assert body == {
        "created": [new],
        "errors": [
            {"index": 0, "id": old, "code": 10405,
             "message": "workflows.api.error.instance.already_exists"},
            {"index": 2, "id": new, "code": 10415,
             "message": "workflows.api.error.instance.duplicate_in_batch"},
        ],
    }  # fmt: skip


def test_create_batch_empty_throws(sc: Scenario) -> None:
    """createBatch([]) throws."""
    err = sc.error("/create-batch", body=[])
    assert err == {
        "name": "Error",
        "message": "WorkflowError: batchCreate should have at least 1 instance",
    }


def test_create_batch_over_100_throws(sc: Scenario) -> None:
    """createBatch of 101 instances throws; nothing is created."""
    ids = [sc.new_id() for _ in range(101)]
    err = sc.error("/create-batch", body=[{"id": x} for x in ids])
    assert err == {
        "name": "Error",
        "message": "WorkflowError: batchCreate only supports 100 instances at a time",
    }
    code, _ = sc.call("/get", id=ids[0])
    assert code == 500


def test_create_batch_of_100(sc: Scenario) -> None:
    """createBatch of exactly 100 instances is accepted."""
    ids = [sc.new_id() for _ in range(100)]
    body = sc.ok("/create-batch", body=[{"id": x, "params": {"ops": []}} for x in ids])
    assert body == {"ids": ids}
    statuses = sc.ok("/statuses", body=ids[:5])
    assert set(statuses) == set(ids[:5])


@difference(wrangler=ERROR_STRINGS)
def test_create_batch_invalid_id_throws(sc: Scenario) -> None:
    """createBatch with an invalid id throws invalid_id."""
    err = sc.error("/create-batch", body=[{"id": "bad id!"}])
    assert err["message"] == sc.pick(celld=INVALID_ID, wrangler=WR_INVALID_ID)


def test_create_batch_without_ids(sc: Scenario) -> None:
    """createBatch entries without ids get distinct generated ids."""
    body = sc.ok("/create-batch", body=[{"params": {"ops": []}}, {"params": {"ops": []}}])
    assert len(set(body["ids"])) == 2


@difference(wrangler=PAYLOAD_LIMIT)
def test_params_over_1_mib_refused(sc: Scenario) -> None:
    """create() with params over 1 MiB throws (production's payload limit)."""
    big = {"ops": [], "blob": "x" * (1024 * 1024 + 10)}
    code, body = sc.call("/create", id=sc.new_id(), body=big)
    assert code == sc.pick(celld=500, wrangler=200)


def test_params_under_1_mib_accepted(sc: Scenario) -> None:
    """Params of about 900 KiB are accepted and reach run()."""
    blob = "y" * (900 * 1024)
    i = sc.create([{"do": "len", "echo": True}], data=len(blob), blob=blob)
    assert sc.results(i) == [len(blob)]


@difference(wrangler=PAYLOAD_LIMIT)
def test_event_payload_over_1_mib_refused(sc: Scenario) -> None:
    """sendEvent with a payload over 1 MiB throws."""
    i = sc.create([{"wait": "w", "type": "big", "timeout": "1 minute"}])
    code, _ = sc.call(
        "/event", id=i, type="big", body=json.dumps("z" * (1024 * 1024 + 10)).encode()
    )
    assert code == sc.pick(celld=500, wrangler=200)


@difference(wrangler=OUTPUT_NULL)
def test_status_shape_before_completion(sc: Scenario) -> None:
    """Before completion status() has no output and no error."""
    i = sc.create([{"wait": "w", "type": "go"}])
    sc.settle()
    s = sc.status(i)
    assert set(s) == sc.pick(celld={"status"}, wrangler={"status", "output"})
    if "output" in s:
        assert s["output"] is None
    sc.event(i, "go")
    sc.output(i)


def test_status_shape_when_errored(sc: Scenario) -> None:
    """An errored instance's status() has error {name, message}."""
    i = sc.create([{"throw": "boom"}])
    s = sc.finished(i)
    assert s["status"] == "errored"
    assert s["error"] == {"name": "Error", "message": "boom"}
    assert s.get("output") is None


def test_statuses_over_time(sc: Scenario) -> None:
    """A full life: running/waiting, paused, running again, complete."""
    i = sc.create([{"do": "a"}, {"wait": "w", "type": "go"}, {"do": "b"}])
    sc.settle()
    seen = [sc.status(i)["status"]]
    sc.pause(i)
    seen.append(sc.until(i, "paused")["status"])
    sc.resume(i)
    sc.settle()
    seen.append(sc.status(i)["status"])
    sc.event(i, "go")
    seen.append(sc.finished(i)["status"])
    assert seen[1:] == ["paused", seen[0], "complete"]
    assert seen[0] in ("running", "waiting")


def test_create_batch_count_form(sc: Scenario) -> None:
    """createBatch({count, params}) creates `count` instances with ids of their own, each
    given the same params, and answers {created, errors}."""
    body = sc.ok("/create-batch", body={"count": 3, "params": {"ops": [{"do": "c", "value": 7}]}})
    assert body["errors"] == []
    created = body["created"]
    assert len(created) == len(set(created)) == 3
    for x in created:
        sc.created.append(("SCRIPT", x))
        assert sc.results(x) == [7]


def test_create_batch_count_without_params(sc: Scenario) -> None:
    """createBatch({count}) without params gives each run an empty payload."""
    body = sc.ok("/create-batch", body={"count": 2})
    assert len(body["created"]) == 2 and body["errors"] == []
    for x in body["created"]:
        assert sc.results(x) == []


def test_create_batch_count_of_100(sc: Scenario) -> None:
    """createBatch({count: 100}) is accepted."""
    body = sc.ok("/create-batch", body={"count": 100, "params": {"ops": []}})
    assert len(set(body["created"])) == 100 and body["errors"] == []


def test_create_batch_bad_count_throws(sc: Scenario) -> None:
    """A count that is not a whole number >= 1 throws."""
    for count in (0, -1, 1.5, "2"):
        err = sc.error("/create-batch", body={"count": count, "params": {}})
        assert err == {
            "name": "Error",
            "message": "WorkflowError: (body) count must be a positive integer",
        }


@difference(wrangler=ERROR_STRINGS)
def test_create_batch_count_over_100_throws(sc: Scenario) -> None:
    """createBatch({count: 101}) throws."""
    err = sc.error("/create-batch", body={"count": 101, "params": {}})
    assert err == {
        "name": "Error",
        "message": sc.pick(
            celld="WorkflowError: batchCreate only supports 100 instances at a time",
            wrangler="WorkflowError: (body) batchCreate only supports 100 instances at a time",
        ),
    }


def test_create_batch_object_form_creates_in_order(sc: Scenario) -> None:
    """createBatch({instances}) without errors creates them all, in order, with their params."""
    ids = [sc.new_id() for _ in range(3)]
    instances = [{"id": x, "params": {"ops": [{"do": "b", "value": n}]}} for n, x in enumerate(ids)]
    assert sc.ok("/create-batch", body={"instances": instances}) == {"created": ids, "errors": []}
    assert [sc.results(x) for x in ids] == [[0], [1], [2]]


@difference(wrangler=ERROR_STRINGS)
def test_create_batch_object_form_empty_throws(sc: Scenario) -> None:
    """createBatch({instances: []}) throws."""
    err = sc.error("/create-batch", body={"instances": []})
    assert err == {
        "name": "Error",
        "message": sc.pick(
            celld="WorkflowError: batchCreate should have at least 1 instance",
            wrangler="WorkflowError: (body) Batch size exceeds maximum allowed",
        ),
    }
