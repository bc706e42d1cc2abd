"""celld.client and the HTTP test helpers, against a real `celld run` with a manual clock.

The client speaks the local explorer API, so these tests also pin that API's answers:
instance details (attempts, deadlines, redaction, events), paging and filters, the
lifecycle, and the 4xx errors for bad input.
"""

from __future__ import annotations

import httpx
import pytest

from celld.client import CelldError, Client, Workflow
from celld.server.values import iso
from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS, celld_client, operator_celld

HOUR = 3_600_000
OPERATOR = PROJECTS / "operator"
EXPLORER = "/cdn-cgi/local/explorer/api"


server = pytest.fixture(scope="module", name="server")(operator_celld)
client = pytest.fixture(name="client")(celld_client)


def orders(client: Client) -> Workflow:
    return client.workflow("order-workflow")


def test_an_order_goes_through_every_kind_of_step(client: Client) -> None:
    instance = orders(client).create(id="full-1", params={"order": 7, "fail": 2})
    assert instance.id == "full-1"
    # the first attempt of "charge card" fails: a retry is pending 5 s later
    instance.wait_for_status("waiting")
    details = instance.describe()
    charge = next(s for s in details["steps"] if s["name"] == "charge card")
    assert charge["state"] == "retrying"
    assert charge["error"] == {"name": "Error", "message": "card declined on attempt 1"}
    assert charge["attempts"][0]["success"] is False
    assert charge["retry_at"] == details["next_wake"]
    assert details["params"] == {"order": 7, "fail": 2}
    assert instance.wait_for_step_result("look up order") == {"order": 7}
    for _ in range(2):  # each move of the clock lets one retry run
        client.advance_clock(5_000)
        instance.wait_until_settled()
    assert instance.wait_for_step_result("charge card") == {"charged": True, "attempt": 3}
    # the sensitive step's output is never shown, though the step ran
    assert instance.wait_for_step_result("issue secret") == "[REDACTED]"
    instance.wait_for_status("waiting")
    details = instance.describe()
    sleep = next(s for s in details["steps"] if s["type"] == "sleep")
    assert sleep["finished"] is False and sleep["until"] == details["next_wake"]
    charge = next(s for s in details["steps"] if s["name"] == "charge card")
    assert [a["success"] for a in charge["attempts"]] == [False, False, True]
    client.advance_clock(HOUR)
    waiting = instance.wait_until_settled()
    approval = next(s for s in waiting["steps"] if s["type"] == "waitForEvent")
    assert approval["state"] == "waiting" and approval["event_type"] == "approve"
    assert approval["timeout_at"] == waiting["next_wake"]
    instance.send_event("approve", {"by": "ada"})
    result = instance.wait_for_status("complete")
    assert result["output"] == {
        "order": {"order": 7},
        "charge": {"charged": True, "attempt": 3},
        "approval": {"by": "ada"},
        "shipped": {"shipped": 7},
    }
    details = instance.describe()
    wait = next(s for s in details["steps"] if s["type"] == "waitForEvent")
    assert wait["output"]["payload"] == {"by": "ada"} and wait["output"]["type"] == "approve"
    assert details["events"][0]["consumed"] is True
    assert instance.status() == {"status": "complete", "output": result["output"]}


def test_wait_helpers_answer_408_and_409(client: Client) -> None:
    instance = orders(client).create(id="waits-1", params={"order": 1})
    instance.wait_for_status("waiting")  # sleeping an hour
    with pytest.raises(CelldError) as timeout:
        instance.wait_for_status("complete", timeout=0.2)
    assert timeout.value.status == 408 and "waiting" in timeout.value.message
    with pytest.raises(CelldError) as missing:
        instance.wait_for_step_result("ship", timeout=0.2)
    assert missing.value.status == 408
    instance.terminate()
    with pytest.raises(CelldError) as ended:
        instance.wait_for_status("running", timeout=5)
    assert ended.value.status == 409 and "terminated" in ended.value.message
    failing = orders(client).create(id="waits-2", params={"fail": 99})
    failing.wait_until_settled()
    for _ in range(5):
        client.advance_clock(5_000)
        failing.wait_until_settled()
    with pytest.raises(CelldError) as failed:
        failing.wait_for_step_result("charge card")
    assert failed.value.status == 409 and "card declined on attempt 6" in failed.value.message
    assert failing.wait_for_status("errored")["error"]["message"] == "card declined on attempt 6"


def test_lifecycle_pause_resume_restart_from_a_step(server: CelldServer, client: Client) -> None:
    instance = orders(client).create(id="life-1", params={"order": 3})
    instance.wait_until_settled()
    assert instance.describe()["actions"] == ["pause", "terminate", "restart", "delete"]
    assert instance.pause() == "paused"
    assert instance.describe()["actions"] == ["resume", "terminate", "restart", "delete"]
    instance.send_event("approve", {"early": True})  # buffered while paused
    assert instance.wait_until_settled()["status"] == "paused"
    assert instance.resume() in ("running", "queued", "waiting")
    instance.wait_until_settled()
    client.advance_clock(HOUR)  # the sleep ends; the buffered event answers the wait
    done = instance.wait_for_status("complete")
    assert done["output"]["approval"] == {"early": True}
    assert instance.describe()["actions"] == ["restart", "delete"]
    # a resume of a complete instance: Cloudflare's answer (a success, the status as it
    # was), and celld's tools (the details header) learn that it changed nothing
    status_path = f"{EXPLORER}/workflows/order-workflow/instances/life-1/status"
    plain = httpx.patch(server.url + status_path, json={"status": "resume"}).json()
    assert plain["success"] is True and plain["result"]["status"] == "complete"
    assert sorted(plain["result"]) == ["status", "timestamp"]
    detailed = client.request("PATCH", status_path, json={"status": "resume"})["result"]
    assert detailed["status"] == "complete" and detailed["applied"] is False
    instance.restart("ship")
    again = instance.wait_for_status("complete")
    assert again["output"]["shipped"] == {"shipped": 3}
    with pytest.raises(CelldError) as final:
        instance.terminate()
    assert final.value.status == 409 and "cannot_terminate" in final.value.message
    with pytest.raises(CelldError) as unknown_step:
        instance.restart("no such step")
    assert unknown_step.value.status == 409


def test_listing_pages_filters_and_latest(server: CelldServer, client: Client) -> None:
    quick = client.workflow("quick-workflow")
    ids = []
    for n in range(7):
        client.advance_clock(1_000)  # distinct creation times: newest first is well defined
        ids.append(quick.create(id=f"q-{n}", params={"n": n}).id)
    for instance_id in ids:
        quick.get(instance_id).wait_for_status("complete")
    first, info = quick.instances_page(per_page=3)
    assert [i["id"] for i in first] == ["q-6", "q-5", "q-4"]
    assert info.pop("now") == iso(client.clock_now())  # the engine's clock, for durations
    assert info == {"page": 1, "per_page": 3, "total_count": 7, "total_pages": 3}
    last, _ = quick.instances_page(per_page=3, page=3)
    assert [i["id"] for i in last] == ["q-0"]
    assert quick.instances(status="complete", per_page=100)[0]["status"] == "complete"
    assert quick.instances(status="paused") == []
    assert quick.get("latest").id == "q-6"
    assert quick.get("q-2").wait_for_step_result("only") == {"n": 2}
    assert quick.details()["instances"]["complete"] == 7
    now = client.clock_now()
    recent = quick.instances(date_start=iso(now - 2_500), per_page=100)
    assert [i["id"] for i in recent] == ["q-6", "q-5", "q-4"]
    assert quick.instances(date_end="2000-01-01") == []
    # search by id: ids containing the text, ignoring case, paged by the server
    found, info = quick.instances_page(search="Q-", per_page=2)
    assert [i["id"] for i in found] == ["q-6", "q-5"] and info["total_count"] == 7
    assert [i["id"] for i in quick.instances(search="-3")] == ["q-3"]
    assert quick.instances(search="%") == [] and quick.instances(search="_") == []
    # each item carries what the lifecycle allows from its status
    assert found[0]["status"] == "complete" and found[0]["actions"] == ["restart", "delete"]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "message"),
    [
        ("GET", "/workflows/nope", {}, 404, "Workflow 'nope' not found."),
        ("GET", "/workflows/order-workflow/instances/missing", {}, 404, "not found"),
        ("GET", "/workflows/order-workflow/instances/bad%20id!", {}, 404, "not found"),
        ("GET", "/workflows/order-workflow/instances", {"params": {"page": 0}}, 400, "page"),
        ("GET", "/workflows/order-workflow/instances", {"params": {"page": "x"}}, 400, "page"),
        ("GET", "/workflows/order-workflow/instances", {"params": {"per_page": 101}}, 400, ""),
        ("GET", "/workflows/order-workflow/instances", {"params": {"status": "zzz"}}, 400, ""),
        ("GET", "/workflows/order-workflow/instances", {"params": {"date_start": "x"}}, 400, ""),
        (
            "GET",
            "/workflows/order-workflow/instances",
            {"params": {"date_start": "2026-02-01", "date_end": "2026-01-01"}},
            400,
            "date_start",
        ),
        ("POST", "/workflows/order-workflow/instances", {"content": b"{oops"}, 400, "JSON"),
        ("POST", "/workflows/order-workflow/instances", {"json": [1]}, 400, "object"),
        ("POST", "/workflows/order-workflow/instances", {"json": {"id": 5}}, 400, "string"),
        ("POST", "/workflows/order-workflow/instances", {"json": {"id": "a b"}}, 400, "id"),
        (
            "PATCH",
            "/workflows/order-workflow/instances/latest/status",
            {"json": {"status": "explode"}},
            400,
            "status must be one of",
        ),
        (
            "PATCH",
            "/workflows/order-workflow/instances/latest/status",
            {"json": {"status": "pause", "rollback": True}},
            400,
            "'rollback' is only valid when terminating.",
        ),
        (
            "PATCH",
            "/workflows/order-workflow/instances/latest/status",
            {"json": {"status": "terminate", "rollback": "yes"}},
            400,
            "rollback must be true or false",
        ),
        (
            "POST",
            "/workflows/order-workflow/instances/latest/events/bad%20type!",
            {},
            400,
            "invalid_event_type",
        ),
        ("DELETE", "/workflows/order-workflow/instances/never-made", {}, 404, "not found"),
        (
            "POST",
            "/workflows/order-workflow/instances/batch/delete",
            {"json": {"instances": "x"}},
            400,
            "array of instance ids",
        ),
        (
            "DELETE",
            "/workflows/no-such-workflow",
            {},
            404,
            "Workflow 'no-such-workflow' not found.",
        ),
        ("GET", "/nothing/here", {}, 404, "no explorer API route"),
    ],
)
def test_bad_requests_get_clear_errors(
    server: CelldServer,
    client: Client,
    method: str,
    path: str,
    kwargs: dict[str, object],
    status: int,
    message: str,
) -> None:
    if not orders(client).instances(per_page=1):
        orders(client).create(id="errors-base")
    response = client.http.request(method, EXPLORER + path, **kwargs)  # type: ignore[arg-type]
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False
    assert message in body["errors"][0]["message"]


def test_deleting_a_workflow_deletes_all_its_instances(client: Client) -> None:
    """`wrangler workflows delete NAME` against a local session: every instance goes, a
    page of deleteBatch at a time; the other workflows keep theirs."""
    quick = client.workflow("quick-workflow")
    for n in range(3):
        quick.create(id=f"gone-{n}", params=n).wait_for_status("complete")
    kept = orders(client).create(id="kept-1")
    answer = client.http.delete(f"{EXPLORER}/workflows/quick-workflow")
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"status": "ok", "success": True}
    assert quick.instances() == []
    assert kept.status()["status"] in ("queued", "running", "waiting")


def test_duplicate_id_is_a_conflict_and_harms_nothing(client: Client) -> None:
    first = orders(client).create(id="dup-1", params={"order": 1})
    with pytest.raises(CelldError) as duplicate:
        orders(client).create(id="dup-1", params={"order": 2})
    assert duplicate.value.status == 409
    first.wait_for_status("waiting")
    assert first.describe()["params"] == {"order": 1}


def test_params_with_dollar_keys_reach_run_unchanged(client: Client) -> None:
    quick = client.workflow("quick-workflow")
    odd = {"$": "Date", "v": 5, "nested": [{"$": 1}], "neg": -0.0}
    instance = quick.create(id="dollar-1", params=odd)
    assert instance.wait_for_status("complete")["output"] == {
        "$": "Date",
        "v": 5,
        "nested": [{"$": 1}],
        "neg": 0,
    }


def test_clock_routes_are_absent_without_a_test_clock(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    celld = CelldServer(OPERATOR, tmp_path_factory.mktemp("noclock") / "state").start()
    try:
        with Client(celld.url) as plain, pytest.raises(CelldError) as missing:
            plain.advance_clock(1)
        assert missing.value.status == 404 and "CELLD_TEST_CLOCK" in missing.value.message
    finally:
        celld.stop()
