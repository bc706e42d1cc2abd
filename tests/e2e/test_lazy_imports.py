"""What a server that never uses a feature does not load, and that the feature still works
when it is first used (celld/isolate/webcrypto/__init__.py: `cryptography` is imported on
the first crypto call, not at start; asyncpg only with a PostgreSQL store, whose own tests
run it end to end: for the idle server's memory)."""

from __future__ import annotations

import concurrent.futures
import hashlib
from pathlib import Path

from tests.celld_server import CelldServer

PROJECTS = Path(__file__).resolve().parent.parent / "projects"
#: the shared library of `cryptography`'s OpenSSL bindings, as /proc/PID/maps names it
CRYPTO_LIBRARY = "cryptography/hazmat/bindings/_rust"
#: asyncpg's protocol extension
ASYNCPG_LIBRARY = "asyncpg/protocol/protocol"


def mapped(server: CelldServer, fragment: str) -> bool:
    """Whether the server process has a file whose path holds `fragment` mapped."""
    assert server.process is not None
    maps = Path(f"/proc/{server.process.pid}/maps").read_text()
    return fragment in maps


def test_crypto_is_loaded_when_first_used_and_then_works(tmp_path: Path) -> None:
    server = CelldServer(PROJECTS / "worker", tmp_path / "state").start()
    try:
        assert server.get("/hello").status_code == 200
        assert not mapped(server, CRYPTO_LIBRARY), "cryptography was loaded at start"
        assert not mapped(server, ASYNCPG_LIBRARY), "asyncpg was loaded on a SQLite store"
        # several first calls at once: each waits for the one import, none sees half a module
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: server.get("/digest"), range(6)))
        expected = hashlib.sha256(b"abc").hexdigest()
        assert [(a.status_code, a.text) for a in answers] == [(200, expected)] * 6
        assert mapped(server, CRYPTO_LIBRARY)
        assert server.get("/digest").text == expected
    finally:
        server.stop()
