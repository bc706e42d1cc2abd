"""The native layer fails safe (celld/isolate/layout.py, memread.py, watchdog.py).

Pointers from the quickjs binding are read through the kernel and cross-checked before any
call touches them, so bad ones are refused instead of crashing; the JSValue layout and
tags are proven by known answers at start; a mismatch is said once and isolates use the
binding's own methods, and Durable Objects keep a CPU limit or are refused.

Whatever could crash runs in a subprocess: a segfault fails the test (its exit status)
instead of killing pytest. Mismatches are simulated in that subprocess before anything
uses the native layer, by changing the layout native.py expects (`native.EXPECTED`) or by
making every safe read fail; for `celld run`, through a sitecustomize module on PYTHONPATH.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.celld_server import CelldServer

REPO = Path(__file__).resolve().parents[1]
OBJECTS = REPO / "compat" / "projects" / "objects"
DURABLE = REPO / "tests" / "projects" / "durable"
BINARY = REPO / "tests" / "projects" / "binary"
WARNING = "direct calls into QuickJS are off"
CPU_MESSAGE = "Durable Object exceeded its CPU time limit and was reset."

#: Mismatches, as statements run before celld uses its native layer: pointers expected one
#: word off (what a field added to the binding's object would do), expected where the
#: object's type sits (readable memory of the wrong kind), a renumbered tag, and a kernel
#: that refuses every safe read (then no pointer can be verified at all).
WRONG_OFFSET = "native.EXPECTED = dataclasses.replace(native.EXPECTED, pointers_at=24)"
WRONG_WORD = "native.EXPECTED = dataclasses.replace(native.EXPECTED, pointers_at=8)"
WRONG_TAG = "native.EXPECTED = dataclasses.replace(native.EXPECTED, tags=native.Tags(float64=7))"
NO_BUFFER_CALL = "native.BUFFER_SYMBOLS = ('JS_GetArrayBuffer', 'JS_celld_no_such_call')"
NO_SAFE_READS = "memread.MemoryReader.read = lambda self, address, size: None"
PREAMBLE = "import dataclasses\nfrom celld.isolate import memread, native\n"


def run_python(source: str, timeout: float = 180) -> Any:
    """Run `source` in a fresh interpreter; the JSON it prints last is the answer. A crash
    (a signal: negative status) or an error fails the test with its output."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"exit status {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- reading memory ------------------------------------------------------------------------

READER = """
    import ctypes, json, mmap, os
    from celld.isolate import memread

    libc = ctypes.CDLL(None)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    # three pages: readable, no access at all, unmapped
    base = libc.mmap(None, 3 * page, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    ctypes.memmove(base, b"celld" * 10, 50)
    assert libc.mprotect(base + page, page, 0) == 0
    assert libc.munmap(base + 2 * page, page) == 0
    reader = memread.reader()
    reader.method = METHOD
    answers = {
        "readable": (memread.read(base, 50) or b"").decode(),
        "null page": memread.read(8, 8),
        "no access": memread.read(base + page, 8),
        "unmapped": memread.read(base + 2 * page, 8),
        "runs into no access": memread.read(base + page - 8, 16),
        "last readable bytes": (memread.read(base + page - 8, 8) or b"").hex(),
        "method": reader.method,
    }
    print(json.dumps(answers))
"""


@pytest.mark.parametrize("method", ["process_vm_readv", "pipe"])
def test_unreadable_memory_is_refused_without_a_fault(method: str) -> None:
    answers = run_python(READER.replace("METHOD", repr(method)))
    assert answers == {
        "readable": "celld" * 10,
        "null page": None,
        "no access": None,
        "unmapped": None,
        "runs into no access": None,
        "last readable bytes": "00" * 8,
        "method": method,
    }


# -- verifying pointers --------------------------------------------------------------------

FORGED = """
    import ctypes, json, mmap, struct
    import quickjs
    from celld.isolate import layout, native

    lib = native.library()
    libc = ctypes.CDLL(None)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    base = libc.mmap(None, 3 * page, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert libc.mprotect(base + page, page, 0) == 0
    assert libc.munmap(base + 2 * page, page) == 0
    no_access, unmapped = base + page, base + 2 * page

    context = quickjs.Context()
    runtime, js_context = struct.unpack("=QQ", ctypes.string_at(id(context) + 16, 16))
    junk = ctypes.create_string_buffer(b"\\x11" * 4096)
    # readable memory whose first words name the real runtime, as a JSContext's would
    lookalike = ctypes.create_string_buffer(struct.pack("=8Q", *([runtime] * 8)) + bytes(4032))
    # readable memory naming a runtime pointer that cannot be read
    names_no_access = ctypes.create_string_buffer(struct.pack("=8Q", *([no_access] * 8)))

    def forged(first, second):
        # an object whose pointer fields hold `first` and `second`
        return ctypes.create_string_buffer(bytes(16) + struct.pack("=QQ", first, second))

    cases = {
        "zero": (forged(0, 0), None),
        "small": (forged(8, 16), None),
        "odd": (forged(runtime + 1, js_context), None),
        "unmapped": (forged(unmapped, unmapped), None),
        "no access": (forged(no_access, no_access), None),
        "junk": (forged(ctypes.addressof(junk), ctypes.addressof(junk)), None),
        "unreadable runtime": (forged(no_access, ctypes.addressof(names_no_access)), None),
        "swapped": (forged(js_context, runtime), None),
        "a look-alike context": (forged(runtime, ctypes.addressof(lookalike)), None),
        "a real pair, another owner": (forged(runtime, js_context), None),
        "a real pair": (forged(runtime, js_context), id(context)),
    }
    answers = {}
    for name, (memory, owner) in cases.items():
        address = ctypes.addressof(memory)
        found = layout.verify_pointers(lib, address, owner if owner else address)
        answers[name] = found if isinstance(found, str) else "accepted"
    found = layout.verify_pointers(lib, unmapped, unmapped)
    answers["an unreadable object"] = found if isinstance(found, str) else "accepted"
    print(json.dumps(answers))
"""


def test_bad_pointers_are_refused_without_a_crash() -> None:
    answers = run_python(FORGED)
    assert answers.pop("a real pair") == "accepted"
    expected = {
        "zero": "not an address",
        "small": "is not readable memory",
        "odd": "not an address",
        "unmapped": "is not readable memory",
        "no access": "is not readable memory",
        "junk": "does not name the JSRuntime",
        "unreadable runtime": "the JSRuntime pointer (0x",
        "swapped": "does not name the JSRuntime",
        "a look-alike context": "opaque is not the binding's context object",
        "a real pair, another owner": "opaque is not the binding's context object",
        "an unreadable object": "cannot be read at offset",
    }
    assert set(answers) == set(expected)
    for name, words in expected.items():
        assert words in answers[name], (name, answers[name])


def test_the_installed_binding_passes_every_check() -> None:
    answers = run_python(
        """
        import json
        from celld.isolate import layout
        result = layout.verdict()
        print(json.dumps([
            result.pointers, result.values, result.buffers, result.direct_calls,
            result.binary_values,
        ]))
        """
    )
    assert answers == [None, None, None, True, True]


# -- a mismatch in process -----------------------------------------------------------------

MISMATCH = """
    import asyncio, dataclasses, json, logging
    from celld.isolate import memread, native
    PATCH

    warnings = []
    class Keep(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())
    logging.getLogger("celld").addHandler(Keep())

    from celld.isolate.bytecode import BYTECODE
    from celld.isolate.isolate import Isolate, IsolateFault, Limits
    from celld.isolate.layout import verdict
    from celld.isolate.runtime import runtime_scripts
    from celld.isolate.watchdog import NoCpuLimit
    from tests.jsharness import pool, run_js_async

    def echo(text):
        return text + "!"

    async def main():
        answers = {}
        isolates = []
        for inline in (False, True):
            isolate = Isolate(pool().pick())
            isolate.inline = inline
            await isolate.load(runtime_scripts())
            isolates.append(isolate)
        answers["native"] = [isolate.native for isolate in isolates]
        answers["evaluated"] = [await isolate.eval("6 * 7") for isolate in isolates]
        for isolate in isolates:
            await isolate.close()
        answers["compiled"] = len(BYTECODE._compiled)
        answers["turns"] = await run_js_async(
            "await __celld_host.request('timer', {ms: 1}); return ['ok', 0.5, null];",
            inline=True,
        )
        try:
            await run_js_async("for (;;) {}", limits=Limits(cpu_ms=200))
        except IsolateFault as fault:
            answers["plain loop"] = fault.reason
        callables = {"__celld_test_echo": echo}
        try:
            answers["callable"] = await run_js_async(
                "return __celld_test_echo('a');", callables=callables
            )
            await run_js_async(
                "__celld_test_echo('b'); for (;;) {}",
                limits=Limits(cpu_ms=200),
                callables=callables,
                timeout=120,
            )
        except IsolateFault as fault:
            answers["callable loop"] = fault.reason
        except NoCpuLimit as refused:
            answers["callable loop"] = "refused: " + str(refused)
        answers["verdict"] = [verdict().pointers, verdict().values]
        answers["warnings"] = warnings
        print(json.dumps(answers))

    asyncio.run(main())
"""


def mismatch_in_process(patch: str) -> Any:
    return run_python(MISMATCH.replace("PATCH", patch))


def assert_falls_back_and_works(answers: dict[str, Any]) -> None:
    # Said once, naming what did not match, however many isolates were made.
    assert len(answers["warnings"]) == 1, answers["warnings"]
    assert WARNING in answers["warnings"][0]
    # Everything goes through the binding's methods, and works.
    assert answers["native"] == [False, False]
    assert answers["compiled"] == 0
    assert answers["evaluated"] == [42, 42]
    assert answers["turns"] == ["ok", 0.5, None]
    assert answers["plain loop"] == "CPU time limit exceeded"


def test_a_wrong_tag_falls_back_and_keeps_the_cpu_watchdog() -> None:
    answers = mismatch_in_process(WRONG_TAG)
    assert answers["verdict"][0] is None
    assert "a float (0.5) has tag 8 where 7 was expected" in answers["verdict"][1]
    assert_falls_back_and_works(answers)
    assert "tag 8 where 7" in answers["warnings"][0]
    # Host callables work, and an endless loop beside them is still stopped.
    assert answers["callable"] == "a!"
    assert answers["callable loop"] == "CPU time limit exceeded"


@pytest.mark.parametrize("patch", [WRONG_OFFSET, WRONG_WORD])
def test_a_wrong_offset_falls_back_and_the_watchdog_finds_the_runtime(patch: str) -> None:
    answers = mismatch_in_process(patch)
    assert answers["verdict"][0] is not None
    assert_falls_back_and_works(answers)
    assert answers["verdict"][0] in answers["warnings"][0]
    assert "verified at offset 16 instead" in answers["warnings"][0]
    assert answers["callable"] == "a!"
    assert answers["callable loop"] == "CPU time limit exceeded"


def test_without_a_verified_runtime_isolates_with_callables_are_refused() -> None:
    answers = mismatch_in_process(NO_SAFE_READS)
    assert "memory cannot be read safely here" in answers["verdict"][0]
    assert_falls_back_and_works(answers)
    assert "Durable Objects cannot run" in answers["warnings"][0]
    # No isolate with host callables runs without a way to stop it.
    assert "callable" not in answers
    assert answers["callable loop"].startswith("refused: ")
    assert "could not be verified" in answers["callable loop"]


# -- a mismatch under `celld run` ----------------------------------------------------------


def mismatched(tmp_path: Path, patch: str) -> dict[str, str]:
    """Environment for a `celld run` whose native layer sees the mismatch `patch`."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"{PREAMBLE}{patch}\n")
    return {"PYTHONPATH": str(site)}


def objects_project(tmp_path: Path) -> Path:
    """The objects test project with a CPU limit short enough to wait for."""
    project = tmp_path / "objects"
    shutil.copytree(OBJECTS, project, ignore=shutil.ignore_patterns(".celld", "node_modules"))
    config = project / "wrangler.jsonc"
    text = config.read_text()
    config.write_text(text.replace('"main":', '"limits": { "cpu_ms": 500 },\n  "main":', 1))
    return project


def rpc(server: CelldServer, name: str, *call: Any) -> Any:
    response = server.get("/rpc", params={"name": name, "call": json.dumps(list(call))})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(
    ("patch", "said"),
    [
        (WRONG_TAG, "tag 8 where 7 was expected"),
        (WRONG_OFFSET, "found and verified at offset 16 instead"),
    ],
)
def test_celld_run_with_a_mismatch_runs_workflows_and_stops_runaway_objects(
    tmp_path: Path, patch: str, said: str
) -> None:
    server = CelldServer(
        objects_project(tmp_path), tmp_path / "state", env=mismatched(tmp_path, patch)
    )
    server.start(timeout=90)
    try:
        assert rpc(server, "a", "increment", 1) == {"value": 1}
        assert rpc(server, "n", "notes.add", "x") == {"value": {"written": 1}}
        # a workflow whose step calls the object back
        assert rpc(server, "a", "startTally", "tally-1") == {"value": "tally-1"}
        status = server.wait_for(
            lambda: (
                (s := server.get("/wfstatus", params={"id": "tally-1"}).json())["status"]
                in ("complete", "errored")
                and s
            ),
            timeout=120,
        )
        assert status == {"status": "complete", "output": {"first": 11}}
        # an endless loop in an object is stopped at the CPU limit; the others go on
        stuck = rpc(server, "stuck", "spinForever")
        assert stuck["error"]["message"] == CPU_MESSAGE
        assert rpc(server, "a", "increment", 1) == {"value": 12}
        assert rpc(server, "stuck", "increment", 1) == {"value": 1}
    finally:
        server.stop()
    log = server.log()
    assert log.count(WARNING) == 1, log[-4000:]
    assert said in log


def test_celld_run_without_a_verified_runtime_refuses_durable_objects(tmp_path: Path) -> None:
    env = mismatched(tmp_path, NO_SAFE_READS)
    server = CelldServer(objects_project(tmp_path), tmp_path / "state", env=env)
    with pytest.raises(RuntimeError) as caught:
        server.start(timeout=90)
    assert server.process is not None and server.process.returncode == 1
    message = str(caught.value)
    assert "this project's Durable Objects (Counter, Notes, Plain) cannot run" in message
    assert "could not be verified here (memory cannot be read safely here" in message
    assert message.count(WARNING) == 1


def test_celld_run_without_a_verified_runtime_runs_workflows_through_the_binding(
    tmp_path: Path,
) -> None:
    server = CelldServer(DURABLE, tmp_path / "state", env=mismatched(tmp_path, NO_SAFE_READS))
    server.start(timeout=90)
    try:
        ops = {"ops": [{"do": "a", "value": 1}, {"do": "b", "value": "two"}]}
        assert server.post("/create", params={"id": "plain"}, json=ops).status_code == 200
        created = server.post(
            "/create", params={"id": "run", "wf": "RUNAWAY"}, json={"where": "run"}
        )
        assert created.status_code == 200, created.text

        def final(instance: str, wf: str = "SCRIPT") -> Any:
            def done() -> Any:
                s = server.get("/status", params={"id": instance, "wf": wf}).json()
                return s if s["status"] in ("complete", "errored") else None

            return server.wait_for(done, timeout=120)

        assert final("plain") == {"status": "complete", "output": {"results": [1, "two"]}}
        runaway = final("run", "RUNAWAY")
        assert runaway["status"] == "errored"
        assert "CPU time limit exceeded" in runaway["error"]["message"]
    finally:
        server.stop()
    log = server.log()
    assert log.count(WARNING) == 1, log[-4000:]


def test_celld_run_without_verified_array_buffer_calls_sends_binary_values_as_base64(
    tmp_path: Path,
) -> None:
    """Direct calls stay on; binary values cross inside the messages as base64 and are
    stored as text, with the same bytes reaching the run; said once in the log."""
    state = tmp_path / "state"
    env = mismatched(tmp_path, NO_BUFFER_CALL)
    server = CelldServer(BINARY, state, env=env).start(timeout=90)
    try:
        created = server.post("/kinds", params={"id": "k", "size": 3000})
        assert created.status_code == 200, created.text
        view = server.wait_for(
            lambda: (v := server.describe("binary-workflow", "k"))["status"] == "complete" and v,
            timeout=120,
        )
    finally:
        server.stop()
    digests = json.loads(view["output"])
    assert digests["Float64Array"] == {
        "type": "Float64Array",
        "size": 3000,
        "own": 3000,
        "sha": hashlib.sha256(
            bytes((i * 31 + 10 * 7 + (i >> 8)) & 255 for i in range(3000))
        ).hexdigest(),
    }
    connection = sqlite3.connect(state / "celld.sqlite3")
    try:
        kinds = {kind for (kind,) in connection.execute("SELECT typeof(value) FROM steps")}
    finally:
        connection.close()
    assert kinds == {"text"}
    log = server.log()
    assert log.count("binary values cross into QuickJS as base64 text") == 1, log[-3000:]
    assert "does not export JS_celld_no_such_call" in log
    assert WARNING not in log
