"""The example projects in examples/, each served by a real `celld run` and driven over HTTP.

The engine clock is manual: sleeps, event timeouts and retry delays end only when a test moves
it, so every wait below is exact. Step rows from celld's operator view (`server.step`) tell
when an instance has reached a step, without racing it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import REPO

EXAMPLES = REPO / "examples"
SECOND = 1_000
MINUTE = 60 * SECOND
DAY = 24 * 60 * MINUTE


def serve(
    factory: pytest.TempPathFactory, name: str, args: tuple[str, ...] = ()
) -> Iterator[CelldServer]:
    server = CelldServer(
        EXAMPLES / name, factory.mktemp(name) / "state", manual_clock=True, args=args
    )
    server.start()
    yield server
    server.stop()


def status(server: CelldServer, path: str) -> dict[str, Any]:
    response = server.get(path)
    assert response.status_code == 200, response.text
    return dict(response.json())


def wait_status(server: CelldServer, path: str, wanted: str) -> dict[str, Any]:
    return server.wait_for(lambda: (s := status(server, path))["status"] == wanted and s)


def wait_step(server: CelldServer, workflow: str, instance: str, name: str, state: str) -> None:
    server.wait_for(lambda: server.step(workflow, instance, name).get("state") == state)


# -- signup ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def signup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    yield from serve(tmp_path_factory, "signup")


def start_signup(server: CelldServer, email: str) -> str:
    response = server.post("/signup", json={"email": email})
    assert response.status_code == 200, response.text
    instance = str(response.json()["id"])
    # account and welcome mail are done once the default 10 s sleep has begun; the status
    # reads `waiting` once the run has settled (a commit after the sleep's own row)
    wait_step(server, "signup", instance, "give the mail time to arrive", "sleeping")
    wait_status(server, f"/signup/{instance}", "waiting")
    return instance


def confirm(server: CelldServer, instance: str) -> None:
    response = server.post(f"/signup/{instance}/confirm")
    assert response.json() == {"id": instance, "sent": "email-confirmed"}


def test_signup_confirmed_while_waiting_for_the_event(signup: CelldServer) -> None:
    instance = start_signup(signup, "ada@example.com")
    assert status(signup, f"/signup/{instance}") == {
        "id": instance,
        "status": "waiting",
        "output": None,
    }
    signup.advance(10 * SECOND)
    wait_step(signup, "signup", instance, "confirm email", "waiting")
    confirm(signup, instance)

    output = wait_status(signup, f"/signup/{instance}", "complete")["output"]
    assert output["confirmed"] is True
    assert output["account"]["email"] == "ada@example.com"
    assert output["account"]["id"].startswith("acct_")
    assert output["welcomeMail"].startswith("msg_")
    assert "reminded" not in output


def test_signup_confirmation_sent_during_the_sleep_is_kept(signup: CelldServer) -> None:
    instance = start_signup(signup, "bob@example.com")
    confirm(signup, instance)
    # the event waits for the workflow: the sleep still runs its full length first
    signup.advance(9 * SECOND)
    assert status(signup, f"/signup/{instance}")["status"] == "waiting"
    signup.advance(1 * SECOND)
    assert wait_status(signup, f"/signup/{instance}", "complete")["output"]["confirmed"] is True


def test_signup_not_confirmed_sends_a_reminder(signup: CelldServer) -> None:
    instance = start_signup(signup, "eve@example.com")
    signup.advance(10 * SECOND)
    wait_step(signup, "signup", instance, "confirm email", "waiting")
    wait_status(signup, f"/signup/{instance}", "waiting")
    signup.advance(MINUTE - 1)  # default confirmTimeout: 1 minute
    assert status(signup, f"/signup/{instance}")["status"] == "waiting"
    signup.advance(1)

    result = wait_status(signup, f"/signup/{instance}", "complete")
    output = result["output"]
    assert output["confirmed"] is False and output["reminded"] is True
    assert output["reminderMail"].startswith("msg_")
    assert output["reminderMail"] != output["welcomeMail"]
    assert "error" not in result  # the timeout was caught inside run()
    assert signup.step("signup", instance, "send reminder")["state"] == "done"


def test_signup_durations_come_from_params(signup: CelldServer) -> None:
    body = {"email": "kim@example.com", "sleep": "1 second", "confirmTimeout": "5 seconds"}
    instance = signup.post("/signup", json=body).json()["id"]
    wait_step(signup, "signup", instance, "give the mail time to arrive", "sleeping")
    signup.advance(1 * SECOND)
    wait_step(signup, "signup", instance, "confirm email", "waiting")
    signup.advance(5 * SECOND)
    assert wait_status(signup, f"/signup/{instance}", "complete")["output"]["reminded"] is True


def test_signup_rejects_bad_requests(signup: CelldServer) -> None:
    response = signup.post("/signup", json={"name": "no email"})
    assert response.status_code == 400
    response = signup.get("/signup/no-such-instance")
    assert response.status_code == 404
    assert "instance.not_found" in response.json()["error"]


# -- retry-fetch -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def retry_fetch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    # The flaky endpoint counts requests in a module-level Map, which is per isolate; with one
    # JS thread celld serves HTTP from one isolate (as wrangler dev does), so counts are exact.
    yield from serve(tmp_path_factory, "retry-fetch", args=("--threads", "1"))


def failed_attempts(server: CelldServer, instance: str) -> int:
    return int(server.step("retry-fetch", instance, "fetch url").get("failed_attempts", 0))


def test_flaky_endpoint_fails_n_times_per_key(retry_fetch: CelldServer) -> None:
    codes = [retry_fetch.get("/flaky", params={"key": "k", "fail": 2}).status_code for _ in "abc"]
    assert codes == [503, 503, 200]
    other = retry_fetch.get("/flaky", params={"key": "other", "fail": 1})
    assert other.status_code == 503 and other.json()["call"] == 1


def test_fetch_is_retried_with_exponential_backoff(retry_fetch: CelldServer) -> None:
    created = retry_fetch.post("/fetch", json={"fail": 2}).json()
    instance, url = created["id"], created["url"]
    assert url == f"{retry_fetch.url}/flaky?key={instance}&fail=2"

    retry_fetch.wait_for(lambda: failed_attempts(retry_fetch, instance) == 1)
    wait_status(retry_fetch, f"/fetch/{instance}", "waiting")  # settles after the row
    retry_fetch.advance(SECOND - 1)  # first retry after delay: 1 s
    assert failed_attempts(retry_fetch, instance) == 1
    retry_fetch.advance(1)
    retry_fetch.wait_for(lambda: failed_attempts(retry_fetch, instance) == 2)
    retry_fetch.advance(2 * SECOND - 1)  # exponential: then 2 s
    assert failed_attempts(retry_fetch, instance) == 2
    retry_fetch.advance(1)

    output = wait_status(retry_fetch, f"/fetch/{instance}", "complete")["output"]
    assert output == {
        "url": url,
        "attempts": 3,
        "status": 200,
        "body": {"key": instance, "call": 3, "ok": True},
    }


def test_fetch_errors_once_retries_are_used_up(retry_fetch: CelldServer) -> None:
    body = {"fail": 10, "retries": 2, "delay": "5 seconds"}
    instance = retry_fetch.post("/fetch", json=body).json()["id"]
    for attempt, delay in ((1, 5 * SECOND), (2, 10 * SECOND)):
        retry_fetch.wait_for(lambda a=attempt: failed_attempts(retry_fetch, instance) == a)
        retry_fetch.advance(delay)

    result = wait_status(retry_fetch, f"/fetch/{instance}", "errored")
    assert result["output"] is None
    assert result["error"]["name"] == "Error"
    assert result["error"]["message"].startswith(
        f"attempt 3: {retry_fetch.url}/flaky?key={instance}&fail=10 answered 503 "
    )
    assert '"error":"failing 3 of 10"' in result["error"]["message"]


# -- approval ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def approval(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    yield from serve(tmp_path_factory, "approval")


def file_request(server: CelldServer, **params: Any) -> str:
    body = {"item": "laptop", "amount": 1800, "requestedBy": "ada", **params}
    response = server.post("/requests", json=body)
    assert response.status_code == 200, response.text
    instance = str(response.json()["id"])
    wait_step(server, "approval", instance, "manager approval", "waiting")
    wait_status(server, f"/requests/{instance}", "waiting")
    return instance


def decide(server: CelldServer, instance: str, **decision: Any) -> None:
    response = server.post(f"/requests/{instance}/approval", json=decision)
    assert response.json() == {"id": instance, "sent": "approval"}


def test_approved_request_is_fulfilled(approval: CelldServer) -> None:
    instance = file_request(approval)
    assert status(approval, f"/requests/{instance}")["status"] == "waiting"
    decide(approval, instance, approved=True, by="grace")

    output = wait_status(approval, f"/requests/{instance}", "complete")["output"]
    assert output["ticket"].startswith("REQ-") and output["order"].startswith("PO-")
    assert output | {"ticket": "", "order": ""} == {
        "ticket": "",
        "order": "",
        "approvedBy": "grace",
        "item": "laptop",
        "amount": 1800,
    }


def test_rejected_request_errors_without_retries(approval: CelldServer) -> None:
    instance = file_request(approval)
    decide(approval, instance, approved=False, by="grace", reason="over budget")

    result = wait_status(approval, f"/requests/{instance}", "errored")
    ticket = result["error"]["message"].split(" ")[0]
    assert ticket.startswith("REQ-")
    assert result["error"] == {
        "name": "NonRetryableError",
        "message": f"{ticket} rejected by grace: over budget",
    }
    assert approval.step("approval", instance, "check decision")["failed_attempts"] == 1
    assert approval.step("approval", instance, "fulfil") == {}


def test_approval_sent_while_paused_is_kept_until_resume(approval: CelldServer) -> None:
    instance = file_request(approval)
    paused = approval.post(f"/requests/{instance}/pause").json()
    assert paused["pause"] is True
    wait_status(approval, f"/requests/{instance}", "paused")

    decide(approval, instance, approved=True, by="grace")
    approval.wait_for(lambda: approval.describe("approval", instance)["events"])
    assert status(approval, f"/requests/{instance}")["status"] == "paused"
    assert approval.step("approval", instance, "manager approval")["state"] == "waiting"

    assert approval.post(f"/requests/{instance}/resume").json()["resume"] is True
    output = wait_status(approval, f"/requests/{instance}", "complete")["output"]
    assert output["approvedBy"] == "grace"


def test_terminated_request_stays_terminated(approval: CelldServer) -> None:
    instance = file_request(approval)
    response = approval.post(f"/requests/{instance}/terminate")
    assert response.json() == {"id": instance, "terminate": True, "status": "terminated"}
    late = approval.post(f"/requests/{instance}/approval", json={"approved": True})
    assert late.status_code == 500  # sendEvent to a finished instance throws
    assert "instance.cannot_send_event" in late.json()["error"]
    assert status(approval, f"/requests/{instance}") == {
        "id": instance,
        "status": "terminated",
        "output": None,
    }
    again = approval.post(f"/requests/{instance}/terminate")
    assert again.status_code == 500
    assert "instance.cannot_terminate" in again.json()["error"]


def test_unanswered_request_times_out(approval: CelldServer) -> None:
    instance = file_request(approval)  # default approvalTimeout: 7 days
    approval.advance(7 * DAY)
    result = wait_status(approval, f"/requests/{instance}", "errored")
    assert result["error"] == {
        "name": "Error",
        "message": f"WorkflowTimeoutError: Execution timed out after {7 * DAY}ms",
    }


# -- tokens: a TypeScript Worker with npm packages ---------------------------------------------


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    from tests.e2e.test_npm_project import ensure_node_modules

    ensure_node_modules(EXAMPLES / "tokens")
    yield from serve(tmp_path_factory, "tokens")


def test_tokens_example(tokens: CelldServer) -> None:
    created = tokens.post("/tokens", json={"user": "ada", "scope": "write", "ttl": "2h"})
    assert created.status_code == 201, created.text
    body = created.json()
    claims = body["claims"]
    assert (claims["user"], claims["scope"], claims["ttl"], len(claims["id"])) == (
        "ada",
        "write",
        "2h",
        21,
    )
    assert abs(claims["expires"] - time.time() * 1000 - 2 * 60 * MINUTE) < 60 * SECOND
    assert tokens.get(f"/tokens/{body['token']}").json() == {"valid": True, "claims": claims}
    forged = tokens.get(f"/tokens/{body['token'][:-2]}xx")
    assert (forged.status_code, forged.json()) == (401, {"valid": False, "reason": "bad signature"})
    # Date.now() in a Worker is wall time (the manual clock moves workflow time only)
    short = tokens.post("/tokens", json={"user": "ada", "ttl": "1"}).json()["token"]
    time.sleep(0.05)
    expired = tokens.get(f"/tokens/{short}")
    assert expired.status_code == 401
    assert expired.json()["reason"].startswith("expired ")
    invalid = tokens.post("/tokens", json={"user": "", "scope": "admin"})
    assert invalid.status_code == 400
    assert invalid.json()["error"][0] == "user: String must contain at least 1 character(s)"


# -- guestbook (D1 migrations) ---------------------------------------------------------------


def test_guestbook_walkthrough(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The README's walkthrough: migrations applied by `celld d1 migrations apply` while the
    server runs, then entries moderated by the workflow through D1 and KV."""
    import subprocess
    import sys

    project = EXAMPLES / "guestbook"
    state = tmp_path_factory.mktemp("guestbook") / "state"
    server = CelldServer(project, state, manual_clock=True).start()
    try:
        before = server.get("/entries").json()
        assert before == {"error": "Error: D1_ERROR: no such table: entries: SQLITE_ERROR"}
        applied = subprocess.run(
            [sys.executable, "-m", "celld", "d1", "migrations", "apply", "DB",
             "--project", str(project), "--persist-to", str(state)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert applied.stdout == "applied 0001_create_entries.sql\napplied 0002_add_reason.sql\n"
        ada = server.post("/entries", json={"name": "ada", "message": "Lovely place"})
        bob = server.post("/entries", json={"name": "bob", "message": "Visit my CASINO"})
        assert (ada.status_code, ada.json()) == (201, {"id": 1, "moderation": "entry-1"})
        assert bob.json() == {"id": 2, "moderation": "entry-2"}
        held = server.wait_for(
            lambda: (
                (e := server.get("/entries/2").json())["moderation"]["status"] == "complete" and e
            )
        )
        server.wait_for(
            lambda: server.get("/entries/1").json()["moderation"]["status"] == "complete"
        )
        published = server.get("/entries").json()
        stats = server.get("/stats").json()
    finally:
        server.stop()
    assert held["entry"]["status"] == "held" and held["entry"]["reason"] == 'contains "casino"'
    assert held["moderation"]["output"] == {
        "entryId": 2, "status": "held", "reason": 'contains "casino"', "changes": 1,
        "published": 1,
    }  # fmt: skip
    assert [(e["id"], e["name"]) for e in published] == [(1, "ada")]
    assert stats["published"] == 1 and stats["lastEntry"] in (1, 2)


# -- saga ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saga(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    yield from serve(tmp_path_factory, "saga")


def new_trip(server: CelldServer, **params: Any) -> str:
    response = server.post("/trips", json={"traveller": "ada", **params})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def test_saga_books_everything_when_all_is_available(saga: CelldServer) -> None:
    trip = new_trip(saga)
    done = wait_status(saga, f"/trips/{trip}", "complete")
    assert done["bookings"] == {"flight": "booked", "hotel": "booked", "car": "booked"}
    assert "rollback" not in done


def test_saga_undoes_flight_and_hotel_when_the_car_fails(saga: CelldServer) -> None:
    trip = new_trip(saga, carAvailable=False)
    done = wait_status(saga, f"/trips/{trip}", "errored")
    assert done["error"] == {
        "name": "NonRetryableError",
        "message": "no car available at the destination",
    }
    assert done["rollback"] == {"outcome": "complete", "error": None}
    why = "NonRetryableError: no car available at the destination"
    assert done["bookings"] == {
        "flight": f"cancelled (book flight: {why})",
        "hotel": f"cancelled (book hotel: {why})",
    }
    progress = saga.describe("trip", trip)["rollback"]
    assert [(s["name"], s["state"]) for s in progress["steps"]] == [
        ("book hotel", "done"),
        ("book flight", "done"),
    ]


def test_saga_cancel_terminates_with_rollback(saga: CelldServer) -> None:
    trip = new_trip(saga, holdHotel=True)
    wait_step(saga, "trip", trip, "traveller confirms", "waiting")
    response = saga.post(f"/trips/{trip}/cancel")
    assert response.status_code == 200, response.text
    done = wait_status(saga, f"/trips/{trip}", "terminated")
    assert done["rollback"] == {"outcome": "complete", "error": None}
    assert done["bookings"] == {
        "flight": "cancelled (book flight: Instance terminated during rollback)",
        "hotel": "cancelled (book hotel: Instance terminated during rollback)",
    }


# -- orders: a Workflow and a Durable Object calling each other ----------------------------


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    yield from serve(tmp_path_factory, "orders")


def test_orders_board_alarm_and_workflow(orders: CelldServer) -> None:
    created = orders.post("/orders", json={"item": "teapot"})
    assert created.status_code == 200, created.text
    order = created.json()["id"]

    def row() -> dict[str, Any]:
        return dict(status(orders, f"/orders/{order}")["board"] or {})

    orders.wait_for(lambda: row().get("state") == "awaiting payment")
    assert row()["reminders"] == 0
    # The Board's alarm comes half an hour after the order began waiting for payment.
    orders.advance(31 * MINUTE)
    orders.wait_for(lambda: row()["reminders"] == 1)
    paid = orders.post(f"/orders/{order}/pay", json={"by": "ada"})
    assert paid.status_code == 200, paid.text
    done = wait_status(orders, f"/orders/{order}", "complete")
    assert done["output"] == {"item": "teapot", "paidBy": "ada"}
    assert done["board"]["state"] == "shipped"
    board = orders.get("/board").json()
    assert [(o["id"], o["state"], o["reminders"]) for o in board] == [(order, "shipped", 1)]
