"""`[dev]`, `--local-protocol https`, `--test-scheduled`, `[build] command` and the
warnings for keys celld does not act on, against real `celld run` processes."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import httpx
import pytest

from celld.server.local_cert import local_certificate
from tests.celld_run import CelldRun
from tests.celld_server import free_port

WORKER = """
export default {
  async fetch(request) {
    return Response.json({ url: request.url, host: request.headers.get("host") });
  },
  async scheduled(controller, env, ctx) {
    console.log(`scheduled() cron=${controller.cron} time=${controller.scheduledTime}`);
    if (controller.cron === "fail") {
      controller.noRetry();
      throw new Error("scheduled failed on purpose");
    }
  },
};
"""

NO_SCHEDULED = 'export default { fetch() { return new Response("only fetch"); } };\n'


def make_project(root: Path, toml: str = "", source: str = WORKER) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "index.js").write_text(source)
    (root / "wrangler.toml").write_text(
        'name = "dev"\nmain = "src/index.js"\ncompatibility_date = "2026-11-01"\n' + toml
    )
    return root


def test_dev_port_ip_host_and_upstream_protocol_come_from_the_config(tmp_path: Path) -> None:
    port = free_port()
    project = make_project(
        tmp_path / "p",
        f'[dev]\nport = {port}\nip = "127.0.0.1"\nhost = "example.com:8443"\n'
        'upstream_protocol = "https"\n',
    )
    run = CelldRun(project, tmp_path / "state")
    try:
        assert run.ready() == f"http://127.0.0.1:{port}"
        seen = httpx.get(f"http://127.0.0.1:{port}/a/b?x=1", timeout=30).json()
        # as under wrangler dev: the Worker sees the configured host and protocol
        assert seen == {"url": "https://example.com:8443/a/b?x=1", "host": "example.com:8443"}
    finally:
        run.stop()


def test_flags_win_over_dev_and_upstream_protocol_alone_keeps_the_host(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", f'[dev]\nport = {free_port()}\nhost = "config.test"\n')
    run = CelldRun(project, tmp_path / "state", "--port", "0", "--host", "flag.test")
    try:
        url = run.ready()
        assert httpx.get(f"{url}/x", timeout=30).json() == {
            "url": "http://flag.test/x",
            "host": "flag.test",
        }
    finally:
        run.stop()
    run = CelldRun(make_project(tmp_path / "q"), tmp_path / "state2", "--port", "0",
                   "--upstream-protocol", "https")  # fmt: skip
    try:
        url = run.ready()
        port = url.rsplit(":", 1)[1]
        assert httpx.get(f"{url}/y", timeout=30).json() == {
            "url": f"https://127.0.0.1:{port}/y",
            "host": f"127.0.0.1:{port}",
        }
    finally:
        run.stop()


def test_local_https_with_a_certificate_celld_makes(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", '[dev]\nlocal_protocol = "https"\n')
    state = tmp_path / "state"
    run = CelldRun(project, state, "--port", "0")
    try:
        url = run.ready()
        assert url.startswith("https://127.0.0.1:")
        cert = state / "local-cert" / "cert.pem"
        assert f"trust {cert}" in run.log()
        assert (state / "local-cert" / "key.pem").stat().st_mode & 0o077 == 0
        trusting = ssl.create_default_context(cafile=str(cert))
        seen = httpx.get(f"{url}/s", verify=trusting, timeout=30).json()
        assert seen["url"] == f"{url}/s"  # the Worker sees https too
        localhost = url.replace("127.0.0.1", "localhost")
        assert httpx.get(f"{localhost}/s", verify=trusting, timeout=30).status_code == 200
        with pytest.raises(httpx.ConnectError):  # not trusted by default
            httpx.get(f"{url}/s", timeout=30)
        first = cert.read_bytes()
    finally:
        run.stop()
    again = CelldRun(project, state, "--port", "0")
    try:
        again.ready()
        assert cert.read_bytes() == first  # kept while it is valid
    finally:
        again.stop()


def test_local_https_with_a_certificate_of_ones_own(tmp_path: Path) -> None:
    cert, key = local_certificate(tmp_path / "mine", "127.0.0.1")
    project = make_project(tmp_path / "p")
    state = tmp_path / "state"
    run = CelldRun(project, state, "--port", "0", "--local-protocol", "https",
                   "--https-key-path", str(key), "--https-cert-path", str(cert))  # fmt: skip
    try:
        url = run.ready()
        trusting = ssl.create_default_context(cafile=str(cert))
        assert httpx.get(f"{url}/", verify=trusting, timeout=30).status_code == 200
        assert not (state / "local-cert").exists()
    finally:
        run.stop()


def test_scheduled_handler_routes(tmp_path: Path) -> None:
    run = CelldRun(make_project(tmp_path / "p"), tmp_path / "state", "--port", "0",
                   "--test-scheduled")  # fmt: skip
    try:
        url = run.ready()
        with httpx.Client(base_url=url, timeout=30) as http:
            ran = http.get("/__scheduled", params={"cron": "*/5 * * * *"})
            assert (ran.status_code, ran.text) == (200, "Ran scheduled event")
            failed = http.get("/__scheduled", params={"cron": "fail"})
            assert failed.status_code == 500
            assert failed.text.startswith("Error: scheduled failed on purpose")
            assert "src/index.js:" in failed.text
            ok = http.get("/cdn-cgi/handler/scheduled", params={"cron": "a", "time": "1000"})
            assert (ok.status_code, ok.text) == (200, "ok")
            bad = http.post("/cdn-cgi/handler/scheduled?cron=fail&format=json")
            assert bad.status_code == 500
            assert bad.json() == {"outcome": "exception", "noRetry": True}
            other = http.get("/cdn-cgi/local/scheduled?format=json")
            assert other.json() == {"outcome": "ok", "noRetry": False}
            # beyond loopback the route is an operator route
            far = http.get("/cdn-cgi/handler/scheduled", headers={"host": "example.com"})
            assert far.status_code == 403
        run.wait_for(r"scheduled\(\) cron= time=")
    finally:
        run.stop()
    log = run.log()
    assert "scheduled() cron=*/5 * * * * time=" in log
    assert "scheduled() cron=a time=1000" in log
    assert re.search(r"^\[celld:info\] GET /__scheduled 200 OK \(\d+ms\)$", log, re.M)
    assert re.search(r"^\[celld:info\] GET /__scheduled 500 Internal Server Error", log, re.M)
    assert "Uncaught Error: scheduled failed on purpose" in log


def test_without_test_scheduled_the_path_is_the_workers(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", source=NO_SCHEDULED)
    run = CelldRun(project, tmp_path / "state", "--port", "0")
    try:
        url = run.ready()
        assert httpx.get(f"{url}/__scheduled", timeout=30).text == "only fetch"
        missing = httpx.get(f"{url}/cdn-cgi/handler/scheduled?format=json", timeout=30)
        assert missing.status_code == 500
        assert missing.json() == {"outcome": "exception", "noRetry": True}
        run.wait_for("Handler does not export a scheduled\\(\\) function")
    finally:
        run.stop()


def test_build_command_runs_once_before_serving_in_its_cwd(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "web" / "src").mkdir(parents=True)
    (project / "web" / "src" / "entry.js").write_text(
        'export default { fetch() { return new Response("built"); } };\n'
    )
    (project / "wrangler.toml").write_text(
        'name = "built"\nmain = "dist/index.js"\n'
        '[build]\ncommand = "echo building in $(basename $PWD) && mkdir -p ../dist && '
        'cp src/entry.js ../dist/index.js && echo done >&2"\ncwd = "web"\n'
    )
    run = CelldRun(project, tmp_path / "state", "--port", "0")
    try:
        url = run.ready()
        assert httpx.get(url, timeout=30).text == "built"
    finally:
        run.stop()
    lines = run.log().splitlines()
    assert lines[0].startswith("[celld:info] [custom build] Running: echo building in")
    assert "[celld:info] [custom build] building in web" in lines
    assert "[celld:info] [custom build] done" in lines


def test_a_failing_build_stops_celld_run(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", '[build]\ncommand = "echo nope; exit 3"\n')
    run = CelldRun(project, tmp_path / "state", "--port", "0")
    try:
        assert run.exit_code() == 1
    finally:
        run.kill()
    log = run.log()
    assert "[custom build] nope" in log
    assert "Running custom build `echo nope; exit 3` failed: it exited with code 3" in log
    assert "serving" not in log


def test_keys_celld_does_not_act_on_are_warned_about_once_each(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "p",
        'account_id = "abc"\nroutes = ["example.com/*"]\nworkers_dev = true\n'
        '"$schema" = "node_modules/wrangler/config-schema.json"\n'
        '[triggers]\ncrons = ["*/5 * * * *"]\n'
        "[dev]\ninspector_port = 9230\n"
        '[build]\nwatch_dir = "src"\n'
        '[[kv_namespaces]]\nbinding = "KV"\nid = "kv1"\npreview_id = "kv1p"\n'
        '[env.staging]\nname = "dev-staging"\n',
    )
    run = CelldRun(project, tmp_path / "state", "--port", "0")
    try:
        run.ready()
    finally:
        run.stop()
    warnings = [line for line in run.log().splitlines() if line.startswith("[celld:warn]")]
    keys = [re.match(r"\[celld:warn\] wrangler\.toml: (\S+):", w).group(1) for w in warnings]  # type: ignore[union-attr]
    assert sorted(keys) == sorted([
        "account_id", "routes", "workers_dev", "triggers", "dev.inspector_port",
        "build.watch_dir", "kv_namespaces[0].preview_id",
    ]), warnings  # fmt: skip
    text = "\n".join(warnings)
    assert "there is no build.command to run again when files change" in text
    assert "/cdn-cgi/handler/scheduled" in text
    # `env` is no setting to warn about: without --env the top level runs, and wrangler dev
    # says nothing either
    assert "env" not in keys


def test_a_bad_dev_setting_is_refused_by_key(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", '[dev]\nlocal_protocol = "ftp"\nprot = 1\n')
    run = CelldRun(project, tmp_path / "state", "--port", "0")
    try:
        assert run.exit_code() == 1
    finally:
        run.kill()
    log = run.log()
    assert "dev.local_protocol" in log and "dev.prot" in log and 'did you mean "port"' in log
