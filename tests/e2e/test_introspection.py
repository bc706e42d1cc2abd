"""Cloudflare's introspection operations against a real `celld run` in test mode.

The order workflow (tests/projects/operator) looks an order up, charges a card (retried
every 5 s), keeps a secret, sleeps an hour, waits a day for `approve`, then ships. The
manual clock never moves unless a test moves it, so an instance that completes here did
so because its sleeps, retries and waits were modified, and what a mock returned is the
step's recorded output (a restart from a later step replays it).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from celld.client import CelldError, Client, Modifier, Workflow
from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS, celld_client, operator_celld

OPERATOR = PROJECTS / "operator"
API = "/cdn-cgi/celld/api/workflows/order-workflow"
DAY_MS = 86_400_000


server = pytest.fixture(scope="module", name="server")(operator_celld)
client = pytest.fixture(name="client")(celld_client)


def orders(client: Client) -> Workflow:
    return client.workflow("order-workflow")


def step(details: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in details["steps"] if s["name"] == name)


def test_mocked_result_event_and_no_sleeps_complete_without_the_clock(client: Client) -> None:
    now = client.clock_now()
    with client.introspect_workflow_instance("order-workflow", "intro-1") as order:
        # set before the instance exists, as with introspectWorkflowInstance
        order.modify(
            lambda m: (
                m.disable_sleeps()
                .mock_step_result("charge card", {"charged": "mocked"})
                .mock_event("approve", {"by": "mock"})
            )
        )
        instance = orders(client).create(id="intro-1", params={"order": 4, "fail": 99})
        assert order.wait_for_step_result("charge card") == {"charged": "mocked"}
        order.wait_for_status("complete")
        output = order.get_output()
        assert output["charge"] == {"charged": "mocked"}  # the callback (which fails) never ran
        assert output["approval"] == {"by": "mock"}
        assert client.clock_now() == now  # nothing moved the clock
        details = instance.describe()
        charge = step(details, "charge card")
        assert charge["state"] == "done" and [a["success"] for a in charge["attempts"]] == [True]
        assert step(details, "cool down")["finished"] is True
        assert details["events"][0]["type"] == "approve"
        assert [m["type"] for m in order.modifiers()] == [
            "disableSleeps",
            "mockStepResult",
            "mockEvent",
        ]
        # the mocked result is the step's recorded output: a restart from a later step
        # replays it from the journal
        instance.restart("ship")
        assert instance.wait_for_status("complete")["output"]["charge"] == {"charged": "mocked"}
    # disposed: the instance is gone, and its id free for the next test
    with pytest.raises(CelldError) as gone:
        instance.describe()
    assert gone.value.status == 404


def test_errors_and_timeouts_take_attempts_in_order_then_the_result(client: Client) -> None:
    order = client.introspect_workflow_instance("order-workflow", "intro-2")

    def modify(m: Modifier) -> None:
        m.disable_sleeps()
        m.mock_step_error({"name": "charge card", "index": 1}, RangeError("no funds"), 2)
        m.force_step_timeout("charge card", 1)
        m.mock_step_result("charge card", "paid on attempt 4")
        m.mock_event({"type": "approve", "payload": 1})

    order.modify(modify)
    instance = orders(client).create(id="intro-2", params={"order": 2})
    seen = []
    for _ in range(3):  # each failed attempt waits its 5 s retry delay
        charge = step(instance.wait_until_settled(), "charge card")
        assert charge["state"] == "retrying"
        seen.append(charge["error"])
        client.advance_clock(5_000)
    assert seen == [
        {"name": "RangeError", "message": "no funds"},
        {"name": "RangeError", "message": "no funds"},
        # a forced timeout says what the step's own timeout (10 minutes) would say
        {"name": "WorkflowTimeoutError", "message": "Execution timed out after 600000ms"},
    ]
    order.wait_for_status("complete")
    charge = step(instance.describe(), "charge card")
    assert [a["success"] for a in charge["attempts"]] == [False, False, False, True]
    assert order.get_output()["charge"] == "paid on attempt 4"
    order.dispose()


class RangeError(Exception):
    """Named like the JavaScript error it stands for."""


def test_an_error_on_every_attempt_fails_the_step_as_retries_allow(client: Client) -> None:
    with client.introspect_workflow_instance("order-workflow", "intro-3") as order:
        order.modify(
            lambda m: m.disable_retry_delays().mock_step_error("look up order", "lookup down")
        )
        instance = orders(client).create(id="intro-3")
        order.wait_for_status("errored")
        assert order.get_error() == {"name": "Error", "message": "lookup down"}
        lookup = step(instance.describe(), "look up order")
        assert len(lookup["attempts"]) == 6  # 5 retries by default, none of them waited


def test_a_forced_event_timeout_errors_as_a_real_timeout_does(client: Client) -> None:
    with client.introspect_workflow_instance("order-workflow", "intro-4") as forced:
        forced.modify(lambda m: m.disable_sleeps().force_event_timeout("approval"))
        orders(client).create(id="intro-4")
        forced.wait_for_status("errored")
        forced_error = forced.get_error()
    real = orders(client).create(id="intro-5")
    real.wait_for_status("waiting")
    client.advance_clock(3_600_000)  # the hour's sleep
    real.wait_until_settled()
    client.advance_clock(DAY_MS)  # the day's wait
    assert real.wait_for_status("errored")["error"] == forced_error
    assert forced_error == {  # run() did not catch it: folded, as any error there
        "name": "Error",
        "message": "WorkflowTimeoutError: Execution timed out after 86400000ms",
    }


def test_a_session_modifies_every_instance_created_while_it_lasts(client: Client) -> None:
    quick = orders(client)
    with client.introspect_workflow("order-workflow") as session:
        session.modify_all(lambda m: m.disable_sleeps().mock_event("approve", "ok"))
        with pytest.raises(CelldError) as second:
            client.introspect_workflow("order-workflow")
        assert second.value.status == 409 and "already has an active" in second.value.message
        made = [quick.create(params={"order": n}) for n in (1, 2)]
        for instance in made:
            assert instance.wait_for_status("complete")["output"]["approval"] == "ok"
        assert sorted(i.id for i in session.get()) == sorted(i.id for i in made)
    for instance in made:  # disposed with the session
        with pytest.raises(CelldError):
            instance.describe()
    after = quick.create(id="intro-after")
    assert after.wait_until_settled()["status"] == "waiting"  # its sleep is real again
    assert step(after.describe(), "cool down")["finished"] is False
    after.terminate()


def test_modifiers_reach_a_live_run_at_its_next_step_call(client: Client) -> None:
    instance = orders(client).create(id="intro-live", params={"order": 9, "fail": 99})
    instance.wait_until_settled()  # attempt 1 failed; the retry waits 5 s, resident
    live = client.introspect_workflow_instance("order-workflow", "intro-live")
    live.modify(
        lambda m: (
            m.mock_step_result("charge card", "late mock")
            .disable_sleeps()
            .mock_event("approve", {"late": True})  # sent at once (the instance exists)
            # "ship" has the config "look up order" had: left alone, the isolate would start
            # it on its own, before asking celld
            .mock_step_result("ship", "not shipped")
        )
    )
    assert instance.describe()["events"][0]["type"] == "approve"
    client.advance_clock(5_000)  # attempt 2 is due: it is mocked
    assert live.wait_for_step_result("charge card") == "late mock"
    output = instance.wait_for_status("complete")["output"]
    assert output["approval"] == {"late": True} and output["shipped"] == "not shipped"
    charge = step(instance.describe(), "charge card")
    assert [a["success"] for a in charge["attempts"]] == [False, True]
    live.dispose()


def over_http(server: CelldServer, method: str, path: str, **kwargs: Any) -> httpx.Response:
    assert server.client is not None
    return server.client.request(method, API + path, **kwargs)


def test_the_http_routes_for_any_test_runner(server: CelldServer) -> None:
    operations = [
        {"type": "disableSleeps"},
        {"type": "mockStepResult", "step": {"name": "look up order"}, "stepResult": [1, 2]},
        {"type": "mockEvent", "event": {"type": "approve", "payload": None}},
    ]
    added = over_http(
        server, "POST", "/instances/intro-http/introspection", json={"operations": operations}
    )
    assert added.status_code == 200, added.text
    assert len(added.json()["result"]["operations"]) == 3
    created = server.post(
        "/cdn-cgi/local/explorer/api/workflows/order-workflow/instances", json={"id": "intro-http"}
    )
    assert created.status_code == 200
    done = over_http(
        server, "GET", "/instances/intro-http/wait-for-status", params={"status": "complete"}
    )
    assert done.json()["result"]["output"]["order"] == [1, 2]
    gone = over_http(server, "DELETE", "/instances/intro-http/introspection")
    assert gone.json()["result"] == {"id": "intro-http", "deleted": True}
    session = over_http(
        server, "POST", "/introspection", json={"operations": [{"type": "disableSleeps"}]}
    )
    assert session.status_code == 200 and session.json()["result"]["instances"] == []
    ended = over_http(server, "DELETE", "/introspection")
    assert ended.json()["result"] == {"workflow": "order-workflow", "disposed": []}
    assert over_http(server, "DELETE", "/introspection").status_code == 200  # twice is fine
    assert over_http(server, "GET", "/introspection").status_code == 404


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/instances/x/introspection", {"operations": "no"}, 400, "array"),
        ("/instances/x/introspection", {"operations": [{"type": "explode"}]}, 400, "one of"),
        ("/instances/x/introspection", [1], 400, "object"),
        (
            "/instances/x/introspection",
            {"operations": [{"type": "mockStepResult", "step": {"name": "a"}}]},
            400,
            "stepResult",
        ),
        (
            "/instances/x/introspection",
            {"operations": [{"type": "mockStepError", "step": {"name": ""}, "error": "e"}]},
            400,
            "step name",
        ),
        (
            "/instances/x/introspection",
            {"operations": [{"type": "forceStepTimeout", "step": {"name": "a", "index": 0}}]},
            400,
            "index",
        ),
        (
            "/instances/x/introspection",
            {"operations": [{"type": "forceStepTimeout", "step": "a", "times": -1}]},
            400,
            "times",
        ),
        (
            "/instances/x/introspection",
            {"operations": [{"type": "mockEvent", "event": {"type": "bad type!"}}]},
            400,
            "invalid_event_type",
        ),
        (
            "/instances/x/introspection",
            {
                "operations": [
                    {"type": "mockStepResult", "step": "a", "stepResult": 1},
                    {"type": "mockStepResult", "step": "a", "stepResult": 2},
                ]
            },
            409,
            "already has a mocked result",
        ),
        (
            "/instances/x/introspection",
            {
                "operations": [
                    {"type": "mockStepResult", "step": "a", "stepResult": 1},
                    {"type": "mockStepError", "step": "a", "error": "late"},
                ]
            },
            409,
            "before it",
        ),
        ("/instances/bad%20id!/introspection", {"operations": []}, 400, "id"),
        ("/introspection/modify", {"operations": []}, 404, "no introspection session"),
    ],
)
def test_bad_operations_are_refused_and_change_nothing(
    server: CelldServer, path: str, body: Any, status: int, message: str
) -> None:
    response = over_http(server, "POST", path, json=body)
    assert response.status_code == status, response.text
    assert message in response.json()["errors"][0]["message"]
    if path.startswith("/instances/x/"):
        kept = over_http(server, "GET", "/instances/x/introspection")
        assert kept.json()["result"]["operations"] == []


def test_an_unknown_workflow_is_404(server: CelldServer) -> None:
    assert server.post("/cdn-cgi/celld/api/workflows/nope/introspection").status_code == 404


def test_celld_test_mode_alone_allows_modifiers(tmp_path_factory: pytest.TempPathFactory) -> None:
    state = tmp_path_factory.mktemp("testmode") / "state"
    celld = CelldServer(OPERATOR, state, env={"CELLD_TEST_MODE": "1"}).start()
    try:
        with Client(celld.url) as plain:
            quick = plain.introspect_workflow_instance("quick-workflow", "q")
            quick.modify(lambda m: m.mock_step_result("only", "mocked"))
            plain.workflow("quick-workflow").create(id="q", params="real")
            quick.wait_for_status("complete")
            assert quick.get_output() == "mocked"
            with pytest.raises(CelldError) as no_clock:
                plain.advance_clock(1)  # test mode does not bring a manual clock
            assert no_clock.value.status == 404
    finally:
        celld.stop()
