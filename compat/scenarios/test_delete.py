"""instance.delete() and binding.deleteBatch(ids): the instance's state goes, a run
stops (also its own, from inside), and the id is free for a new create."""

from __future__ import annotations

import json
import time
from typing import Any

from compat.differences import WAITING, difference
from compat.scenario import Scenario

NOT_FOUND = {"code": 10400, "message": "workflows.api.error.instance.not_found"}


def gone(sc: Scenario, instance_id: str) -> bool:
    """True once get() of the id throws not_found."""
    code, body = sc.call("/get", id=instance_id)
    if code == 200:
        return False
    assert "instance.not_found" in body["error"]["message"], body
    return True


def until_gone(sc: Scenario, instance_id: str) -> None:
    deadline = time.monotonic() + sc.target.poll_timeout
    while not gone(sc, instance_id):
        assert time.monotonic() < deadline, f"{instance_id} was never deleted"
        time.sleep(0.05)


def delete_log(sc: Scenario, instance_id: str) -> list[Any]:
    text = sc.one({"b": "KV", "m": "get", "args": [f"del:{instance_id}"]})
    return [] if text is None else list(json.loads(text))


def test_delete_finished_instance_frees_its_id(sc: Scenario) -> None:
    """delete() of a complete instance removes it: get() throws not_found, and a new create
    with the same id runs the new params."""
    i = sc.create([{"do": "a", "value": "old"}])
    assert sc.results(i) == ["old"]
    assert sc.ok("/delete", id=i) == {"ok": True}
    until_gone(sc, i)
    sc.create([{"do": "a", "value": "new"}], id=i)
    assert sc.results(i) == ["new"]


@difference(wrangler=WAITING)
def test_delete_waiting_instance_stops_it(sc: Scenario) -> None:
    """delete() of an instance waiting for an event stops it; its id then starts afresh."""
    i = sc.create([{"do": "a", "value": 1}, {"wait": "w", "type": "go", "timeout": "1 hour"}])
    sc.until(i, sc.running_status())
    sc.settle()
    sc.ok("/delete", id=i)
    until_gone(sc, i)
    sc.create([{"do": "a", "value": 2}], id=i)
    assert sc.results(i) == [2]


def test_delete_errored_instance(sc: Scenario) -> None:
    """An errored instance can be deleted too."""
    i = sc.create([{"throw": "boom"}])
    assert sc.failure(i)["message"] == "boom"
    sc.ok("/delete", id=i)
    until_gone(sc, i)


def test_instance_deletes_itself_and_stops(sc: Scenario) -> None:
    """An instance that deletes itself from run() stops inside that call: nothing after it
    runs, and the instance is gone."""
    i = sc.create([{"do": "a"}, {"selfDelete": "SCRIPT"}, {"do": "b"}])
    until_gone(sc, i)
    time.sleep(0.5)  # real time for anything after the call to show up, had it run on
    sc.settle()
    assert delete_log(sc, i) == ["before"]
    assert gone(sc, i)


def test_delete_batch_reports_every_position(sc: Scenario) -> None:
    """deleteBatch(ids) returns {deleted: [{id}], errors: [{id, code, message}]}: a deleted
    entry per id it found (a repeated id too), a not_found error per unknown id."""
    a = sc.create([{"do": "a"}])
    b = sc.create([{"wait": "w", "type": "go", "timeout": "1 hour"}])
    sc.output(a)
    sc.settle()
    unknown = sc.new_id("-unknown")
    result = sc.ok("/delete-batch", body=[a, unknown, b, a])
    assert result == {
        "deleted": [{"id": a}, {"id": b}, {"id": a}],
        "errors": [{"id": unknown, **NOT_FOUND}],
    }
    until_gone(sc, a)
    until_gone(sc, b)


def test_delete_batch_frees_ids(sc: Scenario) -> None:
    """Ids deleted by deleteBatch are free for a new create."""
    ids = [sc.create([{"do": "a", "value": n}]) for n in range(3)]
    for x in ids:
        sc.output(x)
    assert sc.ok("/delete-batch", body=ids) == {"deleted": [{"id": x} for x in ids], "errors": []}
    for x in ids:
        until_gone(sc, x)
    sc.create([{"do": "a", "value": "again"}], id=ids[1])
    assert sc.results(ids[1]) == ["again"]


def test_delete_batch_empty_throws(sc: Scenario) -> None:
    """deleteBatch([]) throws."""
    err = sc.error("/delete-batch", body=[])
    assert "at least 1 instance" in err["message"]


def test_delete_batch_over_100_throws(sc: Scenario) -> None:
    """deleteBatch of 101 ids throws and deletes nothing."""
    keep = sc.create([{"do": "a"}])
    sc.output(keep)
    err = sc.error("/delete-batch", body=[keep] + [sc.new_id() for _ in range(100)])
    assert "only supports 100" in err["message"]
    assert not gone(sc, keep)
