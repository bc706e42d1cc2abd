"""Several Workers in one session (compat/projects/workers), as `wrangler dev -c front -c back`
runs them: service bindings (fetch and RPC, named entrypoints, the Worker itself), another
Worker's Durable Object and Workflow (`script_name`), a Worker that is not running, and the
same two Workers under `--env staging` with `.dev.vars.staging` and `--var`."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from compat.targets import Target, refused_start

RUN = uuid.uuid4().hex[:8]
GONE = 'Worker "gone-worker" not found. Make sure it is running locally.'
WORKFLOWS_API = "/cdn-cgi/local/explorer/api/workflows"


def get(target: Target, path: str, **params: str) -> Any:
    response = target.request("GET", path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def finished_flow(target: Target, instance_id: str) -> dict[str, Any]:
    """Poll the workflow (front's binding to back's workflow) until it is done."""
    deadline = time.monotonic() + target.poll_timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = get(target, "/wf-status", id=instance_id)["ok"]
        if status["status"] in ("complete", "errored", "terminated"):
            return status
        time.sleep(0.05)
    raise AssertionError(f"{instance_id} did not finish: {status}")


def test_service_fetch(workers_target: Target) -> None:
    """fetch() through a service binding reaches the other Worker's default export (method,
    path, query, body; status and headers back) and a named entrypoint's fetch()."""
    assert get(workers_target, "/fetch") == {
        "status": 201,
        "from": "back",
        "text": "back got POST /some/path?q=1 hi",
    }
    assert get(workers_target, "/fetch-admin") == {"ok": "admin of back at /admin"}


def test_service_rpc(workers_target: Target) -> None:
    """RPC to a WorkerEntrypoint: arguments and results are structured-cloned (Date, Map),
    named entrypoints see their own Worker's env, and a Worker may bind itself."""
    assert get(workers_target, "/rpc") == {"ok": 5}
    assert get(workers_target, "/rpc-later") == {
        "ok": {"echoed": {"a": [1, "two"], "n": None}, "date": 0, "list": [1, 2, 3],
               "map": [["k", "v"]]}
    }  # fmt: skip
    assert get(workers_target, "/rpc-named") == {"ok": "back"}
    assert get(workers_target, "/self") == {"ok": "hello you from front"}


def test_service_rpc_errors(workers_target: Target) -> None:
    """An error thrown by the other Worker is rethrown in the caller with its class and
    message; a method it does not have is workerd's TypeError."""
    assert get(workers_target, "/rpc-error") == {
        "error": {"name": "RangeError", "message": "too big"}
    }
    assert get(workers_target, "/rpc-error-class") == {"ok": {"range": True, "error": True}}
    assert get(workers_target, "/rpc-error-async") == {
        "error": {"name": "Error", "message": "failed later"}
    }
    assert get(workers_target, "/rpc-missing-method") == {
        "error": {
            "name": "TypeError",
            "message": 'The RPC receiver does not implement the method "nothing".',
        }
    }


def test_durable_object_of_another_worker(workers_target: Target) -> None:
    """A `script_name` Durable Object binding reaches the other Worker's class: ids as that
    namespace derives them, the object's state, and the other Worker's env."""
    assert get(workers_target, "/do-id", name="shared") == {
        "ok": "c5cfa96008f0278c581e82bb9b11a7f5e62d8ad2392edda466090b16fca055a0"
    }
    name = f"counter-{RUN}"
    assert get(workers_target, "/do", name=name, n="2") == {"ok": {"total": 2, "who": "back"}}
    assert get(workers_target, "/do", name=name, n="3") == {"ok": {"total": 5, "who": "back"}}


def test_workflow_of_another_worker(workers_target: Target) -> None:
    """A `script_name` workflow binding creates instances that the other Worker runs."""
    instance_id = f"flow-{RUN}"
    assert get(workers_target, "/wf-create", id=instance_id, n="21") == {"ok": instance_id}
    status = finished_flow(workers_target, instance_id)
    assert status == {"status": "complete", "output": {"doubled": 42, "who": "back"},
                      "error": None}  # fmt: skip


def test_worker_that_is_not_running(workers_target: Target) -> None:
    """A binding to a Worker that is not running starts; a call through it fails: RPC
    rejects with an Error, fetch() answers 503, both saying the Worker was not found."""
    assert get(workers_target, "/gone-rpc") == {"error": {"name": "Error", "message": GONE}}
    assert get(workers_target, "/gone-fetch") == {"ok": [503, GONE]}


def test_explorer_lists_every_workers_workflows(workers_target: Target) -> None:
    """The local explorer API lists the workflows of every Worker of the session."""
    listed = get(workers_target, WORKFLOWS_API)["result"]
    names = {w["name"]: w.get("script_name") for w in listed}
    assert names.get("compat-back-flow") == "back"
    instance_id = f"listed-{RUN}"
    get(workers_target, "/wf-create", id=instance_id, n="1")
    finished_flow(workers_target, instance_id)
    one = get(workers_target, f"{WORKFLOWS_API}/compat-back-flow/instances/{instance_id}")
    assert one["result"]["status"] == "complete"


def test_environment_vars_and_dev_vars(staging_target: Target) -> None:
    """`--env staging`: the environment's vars (not the top level's), `.dev.vars.staging`
    over `.dev.vars`, and `--var` for the served Worker."""
    front = get(staging_target, "/vars")
    assert {k: front[k] for k in ("WHO", "SECRET", "EXTRA", "ONLY_STAGING")} == {
        "WHO": "front in staging",
        "SECRET": "front .dev.vars.staging",
        "EXTRA": "from-cli",
        "ONLY_STAGING": "yes",
    }
    # bindings are not inherited: GONE is only at the top level
    assert "GONE" not in front["bindings"] and "BACK" in front["bindings"]


def test_environment_of_the_other_worker(staging_target: Target) -> None:
    """The other Worker runs its own [env.staging] as "back-staging": its vars, its
    `.dev.vars` (it has no `.dev.vars.staging`), and `--var` does not reach it."""
    assert get(staging_target, "/back-vars") == {
        "ok": {"WHO": "back in staging", "SECRET": "back .dev.vars", "EXTRA": None}
    }
    assert get(staging_target, "/rpc-named") == {"ok": "back in staging"}
    assert get(staging_target, "/self") == {"ok": "hello you from front in staging"}


def test_environment_bindings_to_the_other_worker(staging_target: Target) -> None:
    """The environment's Durable Object and workflow bindings reach back-staging's."""
    name = f"staging-{RUN}"
    assert get(staging_target, "/do", name=name, n="4") == {
        "ok": {"total": 4, "who": "back in staging"}
    }
    instance_id = f"staging-flow-{RUN}"
    get(staging_target, "/wf-create", id=instance_id, n="5")
    status = finished_flow(staging_target, instance_id)
    assert status["output"] == {"doubled": 10, "who": "back in staging"}


def _worker(folder: Path, config: dict[str, Any], source: str) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "wrangler.json").write_text(
        json.dumps({"main": "src/index.js", "compatibility_date": "2026-11-01", **config})
    )
    (folder / "src" / "index.js").write_text(source)
    return folder


REFUSED = {
    "service entrypoint": (
        {"services": [{"binding": "NOPE", "service": "back", "entrypoint": "Nope"}]},
        'Worker "front"\'s binding "NOPE" refers to service "back" with a named entrypoint '
        '"Nope", but "back" has no such named entrypoint.',
    ),
    "script_name object": (
        {
            "durable_objects": {
                "bindings": [{"name": "GHOST", "class_name": "Ghost", "script_name": "back"}]
            }
        },
        'Worker "front"\'s binding "GHOST" refers to a Durable Object namespace named "Ghost" '
        'in service "back", but no such Durable Object namespace is defined by that service.',
    ),
    "script_name workflow": (
        {
            "workflows": [
                {"name": "far", "binding": "FAR", "class_name": "Far", "script_name": "back"}
            ]
        },
        # wrangler names the Workflow's own internal Worker first; the rest is the same
        'refers to service "back" with a named entrypoint "Far", but "back" has no such '
        "named entrypoint.",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_binding_to_what_the_other_worker_lacks_is_refused(case: str, tmp_path: Path) -> None:
    """A binding to an entrypoint, Durable Object class or workflow class the running
    target Worker does not provide stops the session at start, with workerd's sentence."""
    from compat.conftest import target_kind

    config, sentence = REFUSED[case]
    back = _worker(
        tmp_path / "back",
        {"name": "back"},
        'export default { fetch() { return new Response("back"); } };\n',
    )
    front = _worker(
        tmp_path / "front",
        {"name": "front", **config},
        'export default { fetch() { return new Response("front"); } };\n',
    )
    args = ("-c", str(front / "wrangler.json"), "-c", str(back / "wrangler.json"))
    said = refused_start(target_kind(), tmp_path / "state", front, args)
    # wrangler's internal service names ("core:user:back") are the Workers' own names
    assert sentence in said.replace("core:user:", ""), said


def test_explorer_lists_every_worker_and_its_resources(workers_target: Target) -> None:
    """/local/workers lists each Worker of the session, the served one first, with its
    bindings; another Worker's Durable Object and workflow name the Worker that runs them."""
    listed = get(workers_target, "/cdn-cgi/local/explorer/api/local/workers")["result"]
    # wrangler dev also lists the Workers of other `wrangler dev` sessions on the machine
    # (its dev registry), with isSelf false; celld lists its own session's only
    listed = [worker for worker in listed if worker["isSelf"]]
    scopes = {worker.pop("persistenceScope") for worker in listed}
    assert len(scopes) == 1 and len(scopes.pop()) == 64  # one project folder, hashed
    counter = {"id": "back-Counter", "bindingName": "COUNTER", "className": "Counter",
               "scriptName": "back", "useSqlite": True}  # fmt: skip
    flow = {"id": "compat-back-flow", "bindingName": "FLOW", "className": "BackFlow",
            "scriptName": "back"}  # fmt: skip
    empty: dict[str, list[Any]] = {"kv": [], "d1": [], "r2": [], "sendEmail": [], "flagship": []}
    assert listed == [
        {"isSelf": True, "name": name, "triggers": {"crons": []},
         "bindings": {**empty, "do": [counter], "workflows": [flow]}}
        for name in ("front", "back")
    ]  # fmt: skip
