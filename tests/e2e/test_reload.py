"""Reload on change, against real `celld run` processes serving a temporary copy of a
project: edits to the Worker, its vars and its config take effect without a restart,
requests in flight finish on the old Worker, a load error keeps the old one serving,
workflow instances and Durable Object storage carry across, `[build] command` runs again,
and `--no-watch` leaves everything as it started."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.celld_run import CelldRun
from tests.e2e.counter import QuietHandler

WORKER = """
import { DurableObject, WorkflowEntrypoint } from "cloudflare:workers";
import { VERSION } from "./version.js";

export class Counter extends DurableObject {
  async inc() {
    const n = ((await this.ctx.storage.get("n")) ?? 0) + 1;
    await this.ctx.storage.put("n", n);
    return { n, version: VERSION };
  }
}

export class Flow extends WorkflowEntrypoint {
  async run(event, step) {
    const a = await step.do("a", async () => "a");
    const go = await step.waitForEvent("go", { type: "go" });
%s
    return [a, go.payload, ...more];
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/slow") {
      // holds until the test's server answers: the request is in flight meanwhile
      const held = await fetch(url.searchParams.get("hold"));
      const counted = await env.COUNTER.getByName("slow").inc();
      return new Response(`${VERSION} ${await held.text()} ${counted.version}`);
    }
    if (url.pathname === "/do") {
      return Response.json(await env.COUNTER.getByName("one").inc());
    }
    const id = url.searchParams.get("id");
    if (url.pathname === "/create") {
      await env.FLOW.create({ id });
      return Response.json({ id });
    }
    if (url.pathname === "/event") {
      await (await env.FLOW.get(id)).sendEvent({ type: "go", payload: "went" });
      return Response.json({ id });
    }
    if (url.pathname === "/status") {
      return Response.json(await (await env.FLOW.get(id)).status());
    }
    return new Response(`${VERSION} ${env.GREETING ?? "-"}`);
  }
};
"""

CONFIG = {
    "name": "reload",
    "main": "src/index.js",
    "compatibility_date": "2026-11-01",
    "workflows": [{"name": "flow", "binding": "FLOW", "class_name": "Flow"}],
    "durable_objects": {"bindings": [{"name": "COUNTER", "class_name": "Counter"}]},
    "migrations": [{"tag": "v1", "new_sqlite_classes": ["Counter"]}],
}


def make_project(root: Path, steps_after: str = "    const more = [];") -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "index.js").write_text(WORKER % steps_after)
    set_version(root, "v1")
    (root / "wrangler.json").write_text(json.dumps(CONFIG))
    return root


def set_version(root: Path, version: str) -> None:
    (root / "src" / "version.js").write_text(f"export const VERSION = {json.dumps(version)};\n")


def until(read: Callable[[], Any], timeout: float = 60) -> Any:
    """`read()`'s first truthy answer; fails after `timeout` seconds with the last one."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = read()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"not seen in {timeout}s; last: {last!r}")


def text(url: str, path: str = "/") -> str:
    return httpx.get(url + path, timeout=30).text


@contextmanager
def celld(project: Path, state: Path, *args: str) -> Iterator[CelldRun]:
    run = CelldRun(project, state, "--port", "0", *args)
    try:
        run.ready()
        yield run
    finally:
        run.stop()


class Hold:
    """An outside server whose answers wait until `release()`; `arrived` is set once a
    request reached it."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.released = threading.Event()
        hold = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                hold.arrived.set()
                hold.released.wait(60)
                self.answer_ok()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def test_an_edit_reloads_and_requests_in_flight_finish_on_the_old_worker(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    hold = Hold()
    with celld(project, tmp_path / "state") as run:
        assert text(run.url) == "v1 -"
        slow: dict[str, str] = {}
        thread = threading.Thread(
            target=lambda: slow.update(answer=text(run.url, f"/slow?hold={hold.url}"))
        )
        thread.start()
        try:
            assert hold.arrived.wait(30), run.log()
            set_version(project, "v2")
            until(lambda: text(run.url) == "v2 -")
            assert "Reloading local server... (src/version.js changed)" in run.log()
            assert "Local server updated and ready" in run.log()
        finally:
            hold.released.set()
            thread.join(60)
            hold.close()
        # It began and ended on v1; the Durable Object it called after the reload runs
        # the new code (calls go to the objects running at the time of the call).
        assert slow["answer"] == "v1 ok v2"
        assert text(run.url) == "v2 -"


def test_a_load_error_keeps_the_old_worker_and_says_where_then_a_fix_loads(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path / "p")
    with celld(project, tmp_path / "state") as run:
        assert text(run.url) == "v1 -"
        (project / "src" / "version.js").write_text('export const VERSION = "v2" +;\n')
        found = run.wait_for(
            r"src/version\.js:(\d+):(\d+): .*\n\(the previous version keeps serving\)"
        )
        assert found.group(1) == "1"
        assert text(run.url) == "v1 -"  # the old Worker still serves
        set_version(project, "v3")
        until(lambda: text(run.url) == "v3 -")
        # top-level code that throws as the Worker loads: the same
        (project / "src" / "version.js").write_text(
            'throw new Error("boom");\nexport const VERSION = "v9";\n'
        )
        run.wait_for(r"src/version\.js:1:\d+: the Worker threw while loading: Error: boom")
        assert text(run.url) == "v3 -"
        set_version(project, "v4")
        until(lambda: text(run.url) == "v4 -")


def test_a_dev_vars_change_updates_env(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with celld(project, tmp_path / "state") as run:
        assert text(run.url) == "v1 -"
        (project / ".dev.vars").write_text("GREETING=hello\n")
        until(lambda: text(run.url) == "v1 hello")
        (project / ".dev.vars").write_text("GREETING=again\n")
        until(lambda: text(run.url) == "v1 again")


def test_a_new_binding_in_the_config_takes_effect(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    source = (project / "src" / "index.js").read_text()
    (project / "src" / "index.js").write_text(
        source.replace(
            '    return new Response(`${VERSION} ${env.GREETING ?? "-"}`);',
            '    if (url.pathname === "/kv") {\n'
            '      if (!env.KV) return new Response("no KV");\n'
            '      await env.KV.put("k", "stored");\n'
            '      return new Response(await env.KV.get("k"));\n'
            "    }\n"
            '    return new Response(`${VERSION} ${env.GREETING ?? "-"}`);',
        )
    )
    with celld(project, tmp_path / "state") as run:
        assert text(run.url, "/kv") == "no KV"
        config = {**CONFIG, "kv_namespaces": [{"binding": "KV", "id": "kv1"}]}
        (project / "wrangler.json").write_text(json.dumps(config))
        until(lambda: text(run.url, "/kv") == "stored")
        assert "(wrangler.json changed)" in run.log()


def waiting_instance(url: str) -> Callable[[], dict[str, Any]]:
    """Create instance "i" and wait until it waits for its event; returns its status()."""
    httpx.post(url + "/create?id=i", timeout=30).raise_for_status()

    def status() -> dict[str, Any]:
        return dict(httpx.get(url + "/status?id=i", timeout=30).json())

    until(lambda: status()["status"] == "waiting")
    return status


def test_a_workflow_instance_goes_on_across_a_reload_on_the_new_code(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with celld(project, tmp_path / "state") as run:
        status = waiting_instance(run.url)
        # a new step after the recorded ones: the version check lets it run, as after a
        # restart
        (project / "src" / "index.js").write_text(
            WORKER % '    const more = [await step.do("c", async () => "new code")];'
        )
        set_version(project, "v2")
        until(lambda: text(run.url) == "v2 -")
        httpx.post(run.url + "/event?id=i", timeout=30).raise_for_status()
        done = until(lambda: (s := status())["status"] == "complete" and s)
        assert done["output"] == ["a", "went", "new code"]


def test_a_changed_history_fails_the_instance_as_after_a_restart(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with celld(project, tmp_path / "state") as run:
        status = waiting_instance(run.url)
        # a step inserted before the recorded waitForEvent: two histories would mix
        changed = (WORKER % "    const more = [];").replace(
            '    const go = await step.waitForEvent("go", { type: "go" });',
            '    await step.do("x", async () => 0);\n'
            '    const go = await step.waitForEvent("go", { type: "go" });',
        )
        (project / "src" / "index.js").write_text(changed)
        until(lambda: "Local server updated and ready" in run.log())
        httpx.post(run.url + "/event?id=i", timeout=30)
        error = until(lambda: (s := status())["status"] == "errored" and s)["error"]
        assert "is replayed by version" in error["message"], error
        assert '"x" (do #1)' in error["message"], error


def test_a_durable_object_keeps_its_storage_and_runs_the_new_code(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with celld(project, tmp_path / "state") as run:
        do = lambda: httpx.get(run.url + "/do", timeout=30).json()  # noqa: E731
        assert do() == {"n": 1, "version": "v1"}
        assert do() == {"n": 2, "version": "v1"}
        set_version(project, "v2")
        until(lambda: text(run.url) == "v2 -")
        assert do() == {"n": 3, "version": "v2"}


BUILD = (
    '[build]\ncommand = "test ! -e src/broken && mkdir -p dist && cp src/index.js dist/index.js"\n'
)


def test_build_command_runs_again_on_a_change_under_watch_dir(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    (project / "src" / "index.js").write_text(
        'export default { fetch() { return new Response("one"); } };\n'
    )
    (project / "wrangler.toml").write_text(
        'name = "built"\nmain = "dist/index.js"\ncompatibility_date = "2026-11-01"\n' + BUILD
    )
    with celld(project, tmp_path / "state") as run:
        assert text(run.url) == "one"
        (project / "src" / "index.js").write_text(
            'export default { fetch() { return new Response("two"); } };\n'
        )
        until(lambda: text(run.url) == "two")
        assert len(re.findall(r"\[custom build\] Running", run.log())) == 2
        # a failing build keeps the Worker that runs
        (project / "src" / "broken").write_text("")
        (project / "src" / "index.js").write_text(
            'export default { fetch() { return new Response("three"); } };\n'
        )
        run.wait_for(r"Running custom build .* failed: it exited with code 1")
        assert text(run.url) == "two"
        (project / "src" / "broken").unlink()
        until(lambda: text(run.url) == "three")


def test_no_watch_does_not_reload(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with (
        celld(project, tmp_path / "fixed", "--no-watch") as fixed,
        celld(project, tmp_path / "watching") as watching,
    ):
        set_version(project, "v2")
        (project / ".dev.vars").write_text("GREETING=hello\n")
        # The watching twin sees both changes; by then the other would have seen them too.
        until(lambda: text(watching.url) == "v2 hello")
        assert text(fixed.url) == "v1 -"
        assert "Reloading" not in fixed.log()


def test_a_file_in_a_new_folder_is_watched_once_imported_even_while_broken(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    set_version(project, "v1")
    (project / "src" / "index.js").write_text(
        'import { VERSION } from "./version.js";\n'
        "export default { fetch() { return new Response(VERSION); } };\n"
    )
    (project / "wrangler.json").write_text(
        json.dumps({"name": "grow", "main": "src/index.js", "compatibility_date": "2026-11-01"})
    )
    watching = re.compile(r"watching \d+ files in (\d+) folders")
    with celld(project, tmp_path / "state", "--log-level", "debug") as run:
        assert text(run.url) == "v1"
        assert watching.findall(run.log()) == ["2"]  # the project's folder and src/
        (project / "src" / "lib").mkdir()
        (project / "src" / "lib" / "extra.js").write_text("export const EXTRA = ;\n")
        (project / "src" / "index.js").write_text(
            'import { VERSION } from "./version.js";\n'
            'import { EXTRA } from "./lib/extra.js";\n'
            "export default { fetch() { return new Response(`${VERSION} ${EXTRA}`); } };\n"
        )
        run.wait_for(r"src/lib/extra\.js:1:\d+: ")
        assert text(run.url) == "v1"
        # the broken file, in a folder nothing watched before, is watched until it loads
        until(lambda: watching.findall(run.log()) == ["2", "3"])
        (project / "src" / "lib" / "extra.js").write_text('export const EXTRA = "x1";\n')
        until(lambda: text(run.url) == "v1 x1")
        # and now it is part of the module graph
        (project / "src" / "lib" / "extra.js").write_text('export const EXTRA = "x2";\n')
        until(lambda: text(run.url) == "v1 x2")
