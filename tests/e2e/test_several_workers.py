"""Several Workers in one `celld run` (compat/projects/workers: "front" served, "back" bound),
as `wrangler dev -c front/wrangler.jsonc -c back/wrangler.jsonc` runs them. Every expected
answer below is what wrangler dev 4.164.0 gave for the same requests to the same projects."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celld_server import CelldServer

PROJECTS = Path(__file__).resolve().parents[2] / "compat" / "projects" / "workers"
FRONT, BACK = PROJECTS / "front", PROJECTS / "back"
GONE = 'Worker "gone-worker" not found. Make sure it is running locally.'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(FRONT, tmp_path_factory.mktemp("workers") / "state", args=(str(BACK),))
    celld.start(timeout=90)
    yield celld
    celld.stop()


def test_first_worker_is_served_and_unconnected_binding_warned(server: CelldServer) -> None:
    assert server.get("/vars").json()["WHO"] == "front"
    warning = next(line for line in server.log().splitlines() if "not connected" in line)
    assert "env.GONE (Service 'gone-worker')" in warning
    assert "back" not in warning  # connected: no warning for back's bindings


def test_service_fetch(server: CelldServer) -> None:
    assert server.get("/fetch").json() == {
        "status": 201,
        "from": "back",
        "text": "back got POST /some/path?q=1 hi",
    }
    assert server.get("/fetch-admin").json() == {"ok": "admin of back at /admin"}


def test_rpc_values_and_promises(server: CelldServer) -> None:
    assert server.get("/rpc").json() == {"ok": 5}
    assert server.get("/rpc-later").json() == {
        "ok": {
            "echoed": {"a": [1, "two"], "n": None},
            "date": 0,
            "list": [1, 2, 3],
            "map": [["k", "v"]],
        }
    }
    assert server.get("/rpc-named").json() == {"ok": "back"}  # back's own vars
    assert server.get("/self").json() == {"ok": "hello you from front"}


def test_rpc_errors_keep_name_and_message(server: CelldServer) -> None:
    assert server.get("/rpc-error").json() == {
        "error": {"name": "RangeError", "message": "too big"}
    }
    assert server.get("/rpc-error-async").json() == {
        "error": {"name": "Error", "message": "failed later"}
    }
    assert server.get("/rpc-missing-method").json() == {
        "error": {
            "name": "TypeError",
            "message": 'The RPC receiver does not implement the method "nothing".',
        }
    }


def test_durable_object_of_the_other_worker(server: CelldServer) -> None:
    # the id wrangler dev gives idFromName("shared") in back's Counter namespace
    expected = "c5cfa96008f0278c581e82bb9b11a7f5e62d8ad2392edda466090b16fca055a0"
    assert server.get("/do-id?name=shared").json() == {"ok": expected}
    first = server.get("/do?name=shared&n=2").json()["ok"]
    second = server.get("/do?name=shared&n=3").json()["ok"]
    assert (second["total"] - first["total"], second["who"]) == (3, "back")
    # back keeps its storage in its own folder inside the state folder
    assert (server.state / "workers" / "back").is_dir()


def test_workflow_of_the_other_worker(server: CelldServer) -> None:
    assert server.get("/wf-create?id=w1&n=21").json() == {"ok": "w1"}
    status = server.wait_for(
        lambda: (s := server.get("/wf-status?id=w1").json()["ok"])["status"] == "complete" and s,
        timeout=60,
    )
    assert status["output"] == {"doubled": 42, "who": "back"}


def test_operator_surface_shows_every_workers_workflows(server: CelldServer) -> None:
    """The explorer API, celld's instance route and `celld workflows` answer for back's
    workflow through front's port (wrangler dev's explorer lists it with script_name
    "back"), and operations reach back's instances."""
    from click.testing import CliRunner

    from celld.cli.main import cli

    listed = server.get("/cdn-cgi/local/explorer/api/workflows").json()["result"]
    assert listed == [{"name": "compat-back-flow", "class_name": "BackFlow", "script_name": "back"}]
    assert server.get("/wf-create?id=op1&n=21").json() == {"ok": "op1"}
    server.wait_for(lambda: server.get("/wf-status?id=op1").json()["ok"]["status"] == "complete")
    api = "/cdn-cgi/local/explorer/api/workflows/compat-back-flow"
    assert server.get(api).json()["result"]["instances"]["complete"] >= 1
    assert server.get(f"{api}/instances/op1").json()["result"]["status"] == "complete"
    assert server.describe("compat-back-flow", "op1")["steps"][0]["name"] == "double"
    created = server.post(f"{api}/instances", json={"id": "op2", "params": {"n": 4}}).json()
    assert created["result"] == {"id": "op2"}
    server.wait_for(lambda: server.get("/wf-status?id=op2").json()["ok"]["status"] == "complete")
    assert server.get("/wf-status?id=op2").json()["ok"]["output"] == {"doubled": 8, "who": "back"}
    result = CliRunner().invoke(
        cli, ["workflows", "instances", "list", "compat-back-flow", "--port", str(server.port)]
    )
    assert result.exit_code == 0, result.output
    assert "op1" in result.output and "op2" in result.output


def test_not_running_worker_fails_at_call(server: CelldServer) -> None:
    assert server.get("/gone-rpc").json() == {"error": {"name": "Error", "message": GONE}}
    assert server.get("/gone-fetch").json() == {"ok": [503, GONE]}


def test_config_files_form_and_duplicate_names(tmp_path: Path) -> None:
    celld = CelldServer(
        PROJECTS,
        tmp_path / "state",
        args=("-c", str(FRONT / "wrangler.jsonc"), "-c", str(BACK / "wrangler.jsonc")),
    )
    celld.start(timeout=90)
    try:
        assert celld.get("/rpc").json() == {"ok": 5}
    finally:
        celld.stop()
    twice = subprocess.run(
        [sys.executable, "-m", "celld", "run", str(BACK), str(BACK), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert twice.returncode != 0
    assert "two Workers are named 'back'" in twice.stderr


def _project(folder: Path, config: str, source: str) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "wrangler.jsonc").write_text(config)
    (folder / "src" / "index.js").write_text(source)
    return folder


def _refused(*args: str) -> str:
    """Run `celld run ARGS` that must refuse to start; its output."""
    done = subprocess.run(
        [sys.executable, "-m", "celld", "run", *args, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode != 0, done.stderr
    assert "serving" not in done.stderr
    return done.stderr


FRONT_SOURCE = 'export default { fetch() { return new Response("front"); } };\n'


def _front(folder: Path, bindings: str) -> Path:
    """A Worker "front" with the given bindings (JSON object members)."""
    config = (
        '{"name": "front", "main": "src/index.js", "compatibility_date": "2026-11-01", '
        + bindings
        + "}"
    )
    return _project(folder, config, FRONT_SOURCE)


def test_bindings_to_what_the_target_lacks_are_refused_at_start(tmp_path: Path) -> None:
    """wrangler dev (workerd) refuses these at start, with these sentences."""
    back = _project(
        tmp_path / "back",
        '{"name": "back", "main": "src/index.js", "compatibility_date": "2026-11-01"}',
        'import { WorkerEntrypoint } from "cloudflare:workers";\n'
        "export class Admin extends WorkerEntrypoint { hi() { return 1; } }\n"
        'export default { fetch() { return new Response("back"); } };\n',
    )
    cases = {
        "service": (
            '"services": [{"binding": "OK", "service": "back", "entrypoint": "Admin"},'
            ' {"binding": "NOPE", "service": "back", "entrypoint": "Nope"}]',
            [
                'Worker "front"\'s binding "NOPE" refers to service "back" with a named '
                'entrypoint "Nope", but "back" has no such named entrypoint.'
            ],
        ),
        "objects": (
            '"durable_objects": {"bindings": [{"name": "GHOST", "class_name": "Ghost",'
            ' "script_name": "back"}]}',
            [
                'Worker "front"\'s binding "GHOST" refers to a Durable Object namespace named '
                '"Ghost" in service "back", but no such Durable Object namespace is defined '
                "by that service."
            ],
        ),
        "flows": (
            '"workflows": [{"name": "far", "binding": "FAR", "class_name": "Far",'
            ' "script_name": "back"}, {"name": "near", "binding": "NEAR", "class_name": "Near"}]',
            [
                'Workflow "far" (binding "FAR" of Worker "front") refers to service "back" '
                'with a named entrypoint "Far", but "back" has no such named entrypoint.',
                # the Worker's own workflow class, as wrangler checks it after bundling
                "Your Worker depends on the following Workflows, which are not exported in "
                "your entrypoint file: Near.",
            ],
        ),
    }
    for key, (bindings, sentences) in cases.items():
        front = _front(tmp_path / key, bindings)
        out = _refused(str(front), str(back), "--persist-to", str(tmp_path / f"{key}-state"))
        assert [s for s in sentences if s not in out] == [], out
        assert '"OK"' not in out and "Traceback" not in out
    # the same service binding to a Worker that is not running starts ("not connected")
    alone = CelldServer(tmp_path / "service", tmp_path / "alone").start(timeout=90)
    try:
        assert alone.get("/").text == "front"
    finally:
        alone.stop()
