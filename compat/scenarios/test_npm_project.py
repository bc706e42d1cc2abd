"""A TypeScript Worker written the way people write one, with npm packages: the same answers
from celld and wrangler dev (compat/projects/npm-app, installed with `npm ci`)."""

from __future__ import annotations

import time

from compat.targets import Target


def get(target: Target, path: str, **kwargs):
    return target.request("GET", path, **kwargs)


def test_hono_route_and_vars(npm_target: Target) -> None:
    """hono serves a route that reads a var from env."""
    response = get(npm_target, "/hello")
    assert response.status_code == 200
    assert response.json() == {"hello": "npm", "greeting": "hello from vars"}


def test_hono_not_found(npm_target: Target) -> None:
    """hono's notFound handler answers unknown paths."""
    response = get(npm_target, "/nope")
    assert (response.status_code, response.json()) == (404, {"error": "not found", "path": "/nope"})


def test_zod_rejects_and_accepts(npm_target: Target) -> None:
    """zod validation errors and parsed data come back the same."""
    bad = npm_target.request("POST", "/users", json={"name": "x", "age": -1, "email": "nope"})
    assert bad.status_code == 400
    assert bad.json() == {
        "errors": [["name", "too_small"], ["age", "too_small"], ["email", "invalid_string"]]
    }
    good = npm_target.request("POST", "/users", json={"name": "Ada", "age": 36})
    assert (good.status_code, good.json()) == (201, {"created": {"name": "Ada", "age": 36}})


def test_nanoid_and_itty_router(npm_target: Target) -> None:
    """nanoid (browser build, chosen by export conditions) and itty-router work."""
    assert get(npm_target, "/ids").json() == {"length": 21, "urlSafe": True, "custom": "xxxxxx"}
    assert get(npm_target, "/itty/items/42").json() == {"id": "42", "via": "itty-router"}


def test_commonjs_packages(npm_target: Target) -> None:
    """cookie and ms (CommonJS only) load through import and `import x = require()`."""
    response = get(npm_target, "/cookies", headers={"cookie": "a=1; b=two%20words"})
    assert response.json() == {"jar": {"a": "1", "b": "two words"}}
    assert response.headers["set-cookie"] == "seen=yes; Max-Age=60; HttpOnly"
    assert get(npm_target, "/ms/2h").json() == {"ms": 7_200_000, "text": "2m"}


def test_typescript_runtime_constructs(npm_target: Target) -> None:
    """enum, const enum, parameter properties, namespaces, abstract/override, satisfies."""
    assert get(npm_target, "/ts").json() == {
        "roles": [0, 5, 6, "owner", "Admin"],
        "flags": [1, 2, 3],
        "rect": ["Rect:12.00", 3, "3x4", ["height", "label", "scale", "width"]],
        "units": [40, "nested"],
        "defaults": {"retries": 3, "name": "app"},
    }


def test_node_modules(npm_target: Target) -> None:
    """node:buffer, crypto, events, util and path under nodejs_compat, and process.env."""
    assert get(npm_target, "/node").json() == {
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


def test_form_data_and_files(npm_target: Target) -> None:
    """Request.formData() with fields and a file upload, and with fields only."""
    form = npm_target.request(
        "POST",
        "/form",
        data={"name": "Ada", "tag": ["a", "b"]},
        files={"upload": ("d.csv", b"x,y\n1,2", "text/csv")},
    )
    assert form.json() == {
        "name": "Ada",
        "tags": ["a", "b"],
        "file": ["d.csv", "text/csv", "x,y\n1,2"],
    }
    plain = npm_target.request("POST", "/form", data={"name": "Bob", "tag": ["z"]})
    assert plain.json() == {"name": "Bob", "tags": ["z"], "file": None}


def test_hmac_and_redirect(npm_target: Target) -> None:
    """crypto.subtle HMAC sign/verify, and Response.redirect with a URL object."""
    assert get(npm_target, "/signed/hi").json() == {
        "signature": "fd07bee97d548f8ff7fe11fefff15f08614fb2f164ea7a78fc580fc5f280f478",
        "verified": True,
    }
    moved = get(npm_target, "/moved", follow_redirects=False)
    assert moved.status_code == 307
    assert moved.headers["location"] == "https://example.com/hello?from=moved"


def test_error_caught_by_hono(npm_target: Target) -> None:
    """A ZodError thrown in a handler becomes hono's plain 500."""
    response = get(npm_target, "/strict")
    assert (response.status_code, response.text) == (500, "Internal Server Error")


def test_uncaught_error_in_a_package(npm_target: Target) -> None:
    """An error thrown inside a CommonJS package and not caught is a 500."""
    assert get(npm_target, "/boom").status_code == 500


def test_workflow_starter_with_type_name_imports(npm_target: Target) -> None:
    """A workflow class written like Cloudflare's starter (value imports of type names)."""
    created = npm_target.request("POST", "/greet/ada")
    assert created.status_code == 200, created.text
    instance = created.json()["id"]
    deadline = time.monotonic() + npm_target.poll_timeout
    status: dict = {}
    while time.monotonic() < deadline:
        status = get(npm_target, f"/greet/{instance}").json()
        if status.get("status") == "complete":
            break
        time.sleep(0.1)
    assert status.get("status") == "complete", status
    assert status.get("output") == "hello from vars, ADA"
