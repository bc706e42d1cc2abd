"""A TypeScript Worker with npm dependencies (compat/projects/npm-app), served by a real
`celld run` after `npm ci`: hono, zod, nanoid, itty-router and the CommonJS packages
cookie and ms, with value imports of type names, enums and parameter properties."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.targets import ensure_node_modules as install
from tests.celld_server import CelldServer

PROJECT = Path(__file__).resolve().parents[2] / "compat" / "projects" / "npm-app"


def ensure_node_modules(project: Path) -> None:
    """`npm ci` the project unless installed (.ci/run does it; this keeps a bare `pytest`
    working wherever npm exists)."""
    if shutil.which("npm") is None and not (project / "node_modules").is_dir():
        pytest.skip("npm is not installed; `npm ci` in compat/projects/npm-app to run these")
    install(project)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    ensure_node_modules(PROJECT)
    celld = CelldServer(PROJECT, tmp_path_factory.mktemp("npm") / "state")
    celld.start(timeout=60)
    yield celld
    celld.stop()


def test_hono_routes_and_vars(server: CelldServer) -> None:
    assert server.get("/hello").json() == {"hello": "npm", "greeting": "hello from vars"}
    missing = server.get("/nope")
    assert missing.status_code == 404
    assert missing.json() == {"error": "not found", "path": "/nope"}


def test_zod_validation(server: CelldServer) -> None:
    bad = server.post("/users", json={"name": "x", "age": -1, "email": "nope"})
    assert bad.status_code == 400
    assert bad.json() == {
        "errors": [["name", "too_small"], ["age", "too_small"], ["email", "invalid_string"]]
    }
    good = server.post("/users", json={"name": "Ada", "age": 36})
    assert good.status_code == 201
    assert good.json() == {"created": {"name": "Ada", "age": 36}}


def test_nanoid_and_itty_router(server: CelldServer) -> None:
    assert server.get("/ids").json() == {"length": 21, "urlSafe": True, "custom": "xxxxxx"}
    assert server.get("/itty/items/42").json() == {"id": "42", "via": "itty-router"}


def test_commonjs_packages(server: CelldServer) -> None:
    response = server.get("/cookies", headers={"cookie": "a=1; b=two%20words"})
    assert response.json() == {"jar": {"a": "1", "b": "two words"}}
    assert response.headers["set-cookie"] == "seen=yes; Max-Age=60; HttpOnly"
    assert server.get("/ms/2h").json() == {"ms": 7_200_000, "text": "2m"}


def test_typescript_runtime_constructs(server: CelldServer) -> None:
    assert server.get("/ts").json() == {
        "roles": [0, 5, 6, "owner", "Admin"],
        "flags": [1, 2, 3],
        "rect": ["Rect:12.00", 3, "3x4", ["height", "label", "scale", "width"]],
        "units": [40, "nested"],
        "defaults": {"retries": 3, "name": "app"},
    }


def test_workflow_with_type_name_imports(server: CelldServer) -> None:
    created = server.post("/greet/ada")
    assert created.status_code == 200, created.text
    instance = created.json()["id"]
    status = server.wait_for(
        lambda: (s := server.get(f"/greet/{instance}").json())["status"] == "complete" and s
    )
    assert status["output"] == "hello from vars, ADA"


def test_node_modules_under_nodejs_compat(server: CelldServer) -> None:
    assert server.get("/node").json() == {
        "buffer": ["aMOpbGxv", "hi\n"],
        "digest": "03c621260697b826d67f5bf13ab991e403d3e6da8b86f6c2c3a55231babe91ce",
        "mac": "EEFSxb/coHvGM+69RhmfAlXJ9J0=",
        "same": True,
        "events": ["go"],
        "promisified": 42,
        "inspect": "{ a: [ 1, { b: 2 } ] }",
        "path": ["/a/c.txt", ".gz"],
        "env": "hello from vars",
        "streamed": ["X", "Y"],
    }


def test_forms_hmac_and_redirects(server: CelldServer) -> None:
    form = server.post(
        "/form",
        data={"name": "Ada", "tag": ["a", "b"]},
        files={"upload": ("d.csv", b"x,y\n1,2", "text/csv")},
    )
    assert form.json() == {
        "name": "Ada",
        "tags": ["a", "b"],
        "file": ["d.csv", "text/csv", "x,y\n1,2"],
    }
    plain = server.post("/form", data={"name": "Bob", "tag": ["z"]})
    assert plain.json() == {"name": "Bob", "tags": ["z"], "file": None}
    signed = server.get("/signed/hi").json()
    assert signed == {
        "signature": "fd07bee97d548f8ff7fe11fefff15f08614fb2f164ea7a78fc580fc5f280f478",
        "verified": True,
    }
    moved = server.get("/moved", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (
        307,
        "https://example.com/hello?from=moved",
    )


def test_logged_errors_name_package_files(server: CelldServer) -> None:
    response = server.get("/strict")
    assert (response.status_code, response.text) == (500, "Internal Server Error")
    # hono logs the ZodError it caught with console.error; its stack names zod's own files
    log = server.wait_for(lambda: "ZodError" in server.log() and server.log())
    assert "node_modules/zod/v3/types.js:" in log
    assert "src/index.ts:" in log


def test_error_inside_a_package_names_its_file(server: CelldServer) -> None:
    response = server.get("/boom")
    assert response.status_code == 500
    log = server.wait_for(lambda: "node_modules/ms/index.js:" in server.log() and server.log())
    assert "val is not a non-empty string or a valid number" in log
