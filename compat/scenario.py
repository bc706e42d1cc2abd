"""What a scenario sees: a target plus the ids it created, and helpers phrased as a user acts.

Every helper goes through the core project's HTTP API (compat/projects/core/src/index.js), so a
scenario only observes what a Worker could observe: statuses, outputs, errors.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from compat.targets import FINAL, Target

_RUN = uuid.uuid4().hex[:8]


class UndeclaredDifference(AssertionError):
    """A scenario expects targets to differ without declaring why (see differences.py)."""


class Scenario:
    """One scenario's view of the target."""

    def __init__(self, target: Target, node: pytest.Item) -> None:
        self.target = target
        self.node = node
        self._label = node.name.replace("[", "-").replace("]", "")[:40]
        self._label = "".join(c if c.isalnum() or c in "-_" else "-" for c in self._label)
        self._seq = 0
        self.created: list[tuple[str, str]] = []

    # -- identity and differences ------------------------------------------------------------

    @property
    def on(self) -> str:
        """The target's name: "celld" or "wrangler"."""
        return self.target.name

    def new_id(self, tag: str = "") -> str:
        """A fresh instance id, unique across runs of the suite against one server."""
        self._seq += 1
        return f"{self._label}-{_RUN}-{self._seq}{tag}"[:100]

    def pick(self, *, celld: Any, wrangler: Any) -> Any:
        """The value the current target must show; differing values need a declared difference."""
        if celld != wrangler:
            marker = self.node.get_closest_marker("difference")
            if marker is None or "wrangler" not in marker.kwargs:
                raise UndeclaredDifference(
                    f"{self.node.name} expects celld={celld!r} but wrangler={wrangler!r}; "
                    "declare it with @difference(wrangler=REASON)"
                )
        return celld if self.on == "celld" else wrangler

    # -- the binding -----------------------------------------------------------------------

    def create(
        self,
        ops: list[dict[str, Any]] | None = None,
        *,
        id: str | None = None,  # noqa: A002 - the binding's own word
        params: Any = None,
        wf: str = "SCRIPT",
        **payload: Any,
    ) -> str:
        """Create an instance whose params are {ops, **payload} (or `params` as given)."""
        instance_id = id if id is not None else self.new_id()
        body = params if params is not None else {"ops": ops or [], **payload}
        response = self.target.request(
            "POST", "/create", params={"id": instance_id, "wf": wf}, json=body
        )
        assert response.status_code == 200, response.text
        self.created.append((wf, instance_id))
        return str(response.json()["id"])

    def call(
        self,
        path: str,
        *,
        id: str | None = None,
        wf: str = "SCRIPT",
        body: Any = None,
        **query: Any,
    ) -> tuple[int, Any]:
        """POST/GET an endpoint of the core Worker; returns (HTTP status, JSON body)."""
        params = {"wf": wf, **query}
        if id is not None:
            params["id"] = id
        method = "GET" if path in ("/get", "/status") else "POST"
        kwargs: dict[str, Any] = {"params": params}
        if body is not None:
            kwargs["content"] = body if isinstance(body, bytes) else _json(body)
        response = self.target.request(method, path, **kwargs)
        return response.status_code, response.json()

    def ok(self, path: str, **kwargs: Any) -> Any:
        code, body = self.call(path, **kwargs)
        assert code == 200, f"{path} failed: {body}"
        return body

    def error(self, path: str, **kwargs: Any) -> dict[str, str]:
        """Call an endpoint that must throw; returns the error's {name, message}."""
        code, body = self.call(path, **kwargs)
        assert code == 500, f"{path} did not throw: {body}"
        return {"name": body["error"]["name"], "message": body["error"]["message"]}

    def status(self, instance_id: str, wf: str = "SCRIPT") -> dict[str, Any]:
        return self.ok("/status", id=instance_id, wf=wf)

    def event(self, instance_id: str, type: str, payload: Any = None, wf: str = "SCRIPT") -> Any:  # noqa: A002
        return self.ok("/event", id=instance_id, wf=wf, type=type, body=payload)

    def pause(self, instance_id: str, wf: str = "SCRIPT") -> Any:
        return self.ok("/pause", id=instance_id, wf=wf)

    def resume(self, instance_id: str, wf: str = "SCRIPT") -> Any:
        return self.ok("/resume", id=instance_id, wf=wf)

    def terminate(self, instance_id: str, wf: str = "SCRIPT", *, rollback: bool = False) -> Any:
        body = {"rollback": True} if rollback else None
        return self.ok("/terminate", id=instance_id, wf=wf, body=body)

    def restart(self, instance_id: str, wf: str = "SCRIPT", **options: Any) -> Any:
        return self.ok("/restart", id=instance_id, wf=wf, body=options or None)

    # -- storage bindings (compat/projects/core/src/storage.js) ------------------------------

    def storage(self, *ops: dict[str, Any]) -> list[Any]:
        """Run storage operations in one request; each result described as JSON."""
        response = self.target.request("POST", "/storage", json=list(ops))
        assert response.status_code == 200, response.text
        return list(response.json())

    def one(self, op: dict[str, Any]) -> Any:
        return self.storage(op)[0]

    def clock_s(self) -> int:
        """The target's idea of now, in seconds (celld's test clock moves only when told)."""
        now = getattr(self.target, "now", None)
        return int(now() // 1000) if callable(now) else int(time.time())

    # -- time and polling ------------------------------------------------------------------

    def wait(self, ms: int, *, settle: bool = True) -> None:
        """Let `ms` of workflow time pass (settle: let this scenario's instances finish work)."""
        if settle:
            self.settle()
        self.target.wait(ms, settled=settle)
        if settle:
            self.settle()

    def settle(self) -> None:
        """Let this scenario's instances finish what they can do without time passing."""
        for wf in {wf for wf, _ in self.created}:
            self.target.idle([i for w, i in self.created if w == wf], wf)

    def until(
        self,
        instance_id: str,
        want: str | Iterable[str] | Callable[[dict[str, Any]], bool],
        *,
        wf: str = "SCRIPT",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Poll status() until it matches `want` (a status, statuses or a predicate)."""
        if callable(want):
            check = want
        else:
            wanted = {want} if isinstance(want, str) else set(want)

            def check(s: dict[str, Any]) -> bool:
                return s["status"] in wanted

        deadline = time.monotonic() + (timeout or self.target.poll_timeout)
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            last = self.status(instance_id, wf)
            if check(last):
                return last
            if last.get("status") in FINAL and not callable(want):
                break
            time.sleep(0.03)
        raise AssertionError(f"{instance_id}: wanted {want!r}, last status {_short(last)}")

    def finished(self, instance_id: str, wf: str = "SCRIPT") -> dict[str, Any]:
        """Poll until the instance is complete, errored or terminated."""
        return self.until(instance_id, FINAL, wf=wf)

    def output(self, instance_id: str, wf: str = "SCRIPT") -> Any:
        """The output of an instance that must complete."""
        s = self.finished(instance_id, wf)
        assert s["status"] == "complete", _short(s)
        return s["output"]

    def results(self, instance_id: str, wf: str = "SCRIPT") -> list[Any]:
        """The `results` list a ScriptWorkflow run returns (one entry per op)."""
        return list(self.output(instance_id, wf)["results"])

    def failure(self, instance_id: str, wf: str = "SCRIPT") -> dict[str, str]:
        """The status().error of an instance that must error."""
        s = self.finished(instance_id, wf)
        assert s["status"] == "errored", _short(s)
        return dict(s["error"])

    def running_status(self) -> str:
        """What status() says while an instance sleeps, waits or waits to retry."""
        return str(self.pick(celld="waiting", wrangler="running"))


def _short(value: Any, limit: int = 600) -> str:
    """repr() cut to a readable length (some scenarios carry megabyte strings)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _json(value: Any) -> str:
    import json

    return json.dumps(value)
