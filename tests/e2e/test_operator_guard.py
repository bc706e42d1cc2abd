"""Safety of the operator surface: loopback by default, a token beyond it, the Worker's
own routes never affected; and the operator routes only read and steer instances."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.celld_server import CelldServer, free_port
from tests.e2e.conftest import PROJECTS

OPERATOR = PROJECTS / "operator"
EXPLORER = "/cdn-cgi/local/explorer/api/workflows"
TOKEN = "test-token-0123456789abcdef"


def test_loopback_needs_no_token_but_refuses_other_hosts_and_origins(tmp_path: Path) -> None:
    celld = CelldServer(OPERATOR, tmp_path / "state").start()
    try:
        assert celld.get(EXPLORER).status_code == 200
        assert celld.get("/cdn-cgi/celld/").status_code == 200
        # a page whose DNS name was rebound to 127.0.0.1 sends its own name as Host
        rebound = celld.get(EXPLORER, headers={"host": "attacker.example"})
        assert rebound.status_code == 403 and "loopback" in rebound.json()["errors"][0]["message"]
        assert celld.get("/", headers={"host": "attacker.example"}).status_code == 200  # Worker
        # another site's page may not change anything
        create = f"{EXPLORER}/quick-workflow/instances"
        evil = celld.post(create, json={}, headers={"origin": "http://attacker.example"})
        assert evil.status_code == 403
        same = celld.post(create, json={"id": "same-origin"}, headers={"origin": celld.url})
        assert same.status_code == 200, same.text
        unknown_asset = celld.get("/cdn-cgi/celld/ui/..%2f..%2fservice.py")
        assert unknown_asset.status_code == 404
    finally:
        celld.stop()


def test_a_token_is_required_when_configured(tmp_path: Path) -> None:
    celld = CelldServer(OPERATOR, tmp_path / "state", env={"CELLD_ADMIN_TOKEN": TOKEN}).start()
    try:
        for path in (EXPLORER, "/cdn-cgi/celld/", "/cdn-cgi/celld/metrics"):
            refused = celld.get(path)
            assert refused.status_code == 401, path
            assert "token" in refused.json()["errors"][0]["message"]
        assert celld.get(EXPLORER, headers={"authorization": "Bearer nope"}).status_code == 401
        bearer = celld.get(EXPLORER, headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200
        assert celld.get(EXPLORER, headers={"x-celld-token": TOKEN}).status_code == 200
        assert celld.get("/cdn-cgi/celld/health").status_code == 200
        assert celld.get("/").status_code == 200  # the Worker needs no token
        # test modifiers: the token first, then test mode (this celld is not in it)
        modify = "/cdn-cgi/celld/api/workflows/order-workflow/instances/a/introspection"
        body = {"operations": [{"type": "disableSleeps"}]}
        assert celld.post(modify, json=body).status_code == 401
        not_test = celld.post(modify, json=body, headers={"x-celld-token": TOKEN})
        assert not_test.status_code == 403
        assert "CELLD_TEST_MODE=1" in not_test.json()["errors"][0]["message"]
        # the page: ?token= sets a cookie, which then opens the page and the API
        with httpx.Client(base_url=celld.url) as browser:
            opened = browser.get("/cdn-cgi/celld/", params={"token": TOKEN})
            assert opened.status_code == 303
            assert "HttpOnly" in opened.headers["set-cookie"]
            assert browser.get("/cdn-cgi/celld/").status_code == 200
            assert browser.get(EXPLORER).status_code == 200
        with httpx.Client(base_url=celld.url) as stranger:
            wrong = stranger.get("/cdn-cgi/celld/", params={"token": "wrong-token-0123456789"})
            assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    finally:
        celld.stop()


def test_binding_beyond_loopback_prints_a_token_and_requires_it(tmp_path: Path) -> None:
    celld = CelldServer(OPERATOR, tmp_path / "state", args=("--ip", "0.0.0.0")).start()
    try:
        match = re.search(r"operator token \(.*\): (\S+)", celld.log())
        assert match, celld.log()
        token = match.group(1)
        assert celld.get(EXPLORER).status_code == 401
        assert celld.get("/").status_code == 200
        ok = celld.get(EXPLORER, headers={"authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and ok.json()["result"][0]["name"] == "order-workflow"
    finally:
        celld.stop()


def test_a_weak_configured_token_stops_celld_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "celld", "run", str(OPERATOR), "--port", str(free_port()),
         "--persist-to", str(tmp_path / "state")],
        env={"CELLD_ADMIN_TOKEN": "short", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "CELLD_ADMIN_TOKEN must be at least 16 characters" in done.stderr


@pytest.mark.parametrize("bad", ["", "a b", "x;y"])
def test_the_guard_refuses_malformed_tokens_cleanly(tmp_path: Path, bad: str) -> None:
    from celld.cli.main import operator_token

    with pytest.raises(ValueError):
        operator_token("127.0.0.1", bad or "short")
    assert operator_token("127.0.0.1", None) == (None, False)
    token, printed = operator_token("0.0.0.0", None)
    assert token and printed
