"""pytest wiring for the compatibility suite.

* ``CELLD_COMPAT_TARGET`` picks the target: ``celld`` (default; the suite starts ``celld run``
  with a manual clock) or ``wrangler`` (the suite installs and starts ``wrangler dev``).
  ``CELLD_COMPAT_URL`` reuses a server already running instead.
* ``CELLD_COMPAT_RESULTS=FILE`` writes one JSON record per scenario (outcome, declared
  differences, summary) for ``python -m compat.report``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from compat.scenario import Scenario
from compat.targets import (
    CRYPTO,
    NODE,
    NPM_APP,
    OBJECTS,
    REALTIME,
    STATIC,
    WORKERS,
    Target,
    connect,
    ensure_node_modules,
)

_results: dict[str, dict[str, Any]] = {}
_started = time.monotonic()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "difference(wrangler=reason): wrangler dev differs from celld on purpose"
    )


def target_kind() -> str:
    return os.environ.get("CELLD_COMPAT_TARGET", "celld")


@pytest.fixture(scope="session")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """One server for the whole session (scenarios use unique instance ids)."""
    server = connect(target_kind(), tmp_path_factory.mktemp("compat") / "state")
    try:
        yield server
    finally:
        server.close()


def _serve(
    factory: pytest.TempPathFactory,
    project: Path,
    folder: str,
    url_variable: str,
    args: tuple[str, ...] = (),
) -> Iterator[Target]:
    """`project` on the kind of target the session runs against, closed at the end."""
    state = factory.mktemp(folder) / "state"
    server = connect(target_kind(), state, project, url_variable, args)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def npm_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The npm project (compat/projects/npm-app) on the same kind of target;
    CELLD_COMPAT_NPM_URL reuses a running server."""
    if not os.environ.get("CELLD_COMPAT_NPM_URL"):
        ensure_node_modules(NPM_APP)
    yield from _serve(tmp_path_factory, NPM_APP, "compat-npm", "CELLD_COMPAT_NPM_URL")


@pytest.fixture(scope="session")
def crypto_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The crypto project (compat/projects/crypto: Web Crypto, node:crypto, jose) on the same
    kind of target; CELLD_COMPAT_CRYPTO_URL reuses a running server."""
    if not os.environ.get("CELLD_COMPAT_CRYPTO_URL"):
        ensure_node_modules(CRYPTO)
    yield from _serve(tmp_path_factory, CRYPTO, "compat-crypto", "CELLD_COMPAT_CRYPTO_URL")


@pytest.fixture(scope="session")
def node_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The Node built-ins project (compat/projects/node) on the same kind of target;
    CELLD_COMPAT_NODE_URL reuses a running server."""
    if not os.environ.get("CELLD_COMPAT_NODE_URL"):
        ensure_node_modules(NODE)
    yield from _serve(tmp_path_factory, NODE, "compat-node", "CELLD_COMPAT_NODE_URL")


@pytest.fixture(scope="session")
def objects_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The Durable Objects project (compat/projects/objects) on the same kind of target;
    CELLD_COMPAT_OBJECTS_URL reuses a running server."""
    yield from _serve(tmp_path_factory, OBJECTS, "compat-objects", "CELLD_COMPAT_OBJECTS_URL")


@pytest.fixture(scope="session")
def realtime_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """WebSockets and Queues (compat/projects/realtime) on the same kind of target;
    CELLD_COMPAT_REALTIME_URL reuses a running server."""
    yield from _serve(tmp_path_factory, REALTIME, "compat-realtime", "CELLD_COMPAT_REALTIME_URL")


@pytest.fixture(scope="session")
def static_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """An assets-only Worker (compat/projects/static) on the same kind of target;
    CELLD_COMPAT_STATIC_URL reuses a running server."""
    yield from _serve(tmp_path_factory, STATIC, "compat-static", "CELLD_COMPAT_STATIC_URL")


#: The two Workers of compat/projects/workers, as `wrangler dev -c front -c back` runs them.
WORKERS_ARGS = (
    "-c",
    str(WORKERS / "front" / "wrangler.jsonc"),
    "-c",
    str(WORKERS / "back" / "wrangler.jsonc"),
)


@pytest.fixture(scope="session")
def workers_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """Two Workers in one session (compat/projects/workers: "front" served, "back" bound);
    CELLD_COMPAT_WORKERS_URL reuses a running server."""
    yield from _serve(
        tmp_path_factory, WORKERS / "front", "compat-workers", "CELLD_COMPAT_WORKERS_URL",
        WORKERS_ARGS,
    )  # fmt: skip


@pytest.fixture(scope="session")
def staging_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The same two Workers with `--env staging --var EXTRA:from-cli`;
    CELLD_COMPAT_STAGING_URL reuses a running server."""
    args = (*WORKERS_ARGS, "--env", "staging", "--var", "EXTRA:from-cli")
    yield from _serve(
        tmp_path_factory, WORKERS / "front", "compat-staging", "CELLD_COMPAT_STAGING_URL", args
    )


@pytest.fixture
def sc(target: Target, request: pytest.FixtureRequest) -> Scenario:
    """The scenario's handle on the target."""
    return Scenario(target, request.node)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not item.nodeid.startswith("compat/"):
        return
    record = _results.setdefault(
        item.nodeid,
        {
            "id": item.nodeid.split("::", 1)[-1],
            "module": Path(str(item.fspath)).stem,
            "doc": _summary(item),
            "difference": _difference(item),
            "outcome": "passed",
            "detail": "",
        },
    )
    xfail = item.get_closest_marker("xfail")
    if xfail is not None:
        record["xfail"] = str(xfail.kwargs.get("reason", ""))
    if report.failed:
        record["outcome"] = "failed" if report.when == "call" else "error"
        record["detail"] = _first_line(report.longreprtext)
    elif report.skipped and report.when in ("setup", "call"):
        record["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        record["detail"] = _first_line(str(getattr(report, "wasxfail", "")))


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("CELLD_COMPAT_RESULTS")
    if not path or not _results:
        return
    payload = {
        "target": target_kind(),
        "finished": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        # the whole pytest session's, which may hold more than the compatibility suite
        "seconds": round(time.monotonic() - _started),
        "scenarios": list(_results.values()),
    }
    Path(path).write_text(json.dumps(payload, indent=1) + "\n")


def _summary(item: pytest.Item) -> str:
    function = getattr(item, "function", None)
    doc = (function.__doc__ or "").strip().splitlines() if function else []
    return doc[0] if doc else ""


def _difference(item: pytest.Item) -> str:
    marker = item.get_closest_marker("difference")
    return str(marker.kwargs.get("wrangler", "")) if marker else ""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()[:300]
    return text.strip().splitlines()[-1][:300] if text.strip() else ""
