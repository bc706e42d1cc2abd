"""A small Python client for a running celld: drive instances, and test helpers.

    from celld.client import Client

    with Client("http://127.0.0.1:8787") as celld:
        orders = celld.workflow("order-workflow")
        instance = orders.create(params={"order": 7})
        instance.wait_for_status("waiting")
        celld.advance_clock(3_600_000)            # only with CELLD_TEST_CLOCK=manual
        instance.send_event("approve", {"by": "ada"})
        assert instance.wait_for_step_result("ship") == {"shipped": 7}
        assert instance.wait_for_status("complete")["output"] == ...

It speaks the same local explorer API as `wrangler workflows ... --local` (plus celld's
waiting and clock routes), so anything it does a Worker's binding could do too. Values
are plain JSON both ways. Errors from celld raise CelldError with its HTTP status and
message. A token (for a celld bound beyond loopback) comes from `token=` or
CELLD_ADMIN_TOKEN.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

EXPLORER = "/cdn-cgi/local/explorer/api"
CELLD_API = "/cdn-cgi/celld/api"
_NO_PAYLOAD: Any = object()
NO_CLOCK = "this celld has no test clock: start it with CELLD_TEST_CLOCK=manual"


class CelldError(Exception):
    """celld refused a request: `status` is the HTTP status, `message` what it said."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status})")
        self.status = status
        self.message = message


def _q(value: str) -> str:
    return quote(value, safe="")


class Client:
    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8787",
        *,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        token = token if token is not None else os.environ.get("CELLD_ADMIN_TOKEN") or None
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One request; returns the whole answer ({result, result_info?, ...})."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise CelldError(0, f"could not reach celld at {self.base_url}: {error}") from None
        try:
            data = response.json()
        except ValueError:
            raise CelldError(response.status_code, response.text[:500] or "no answer") from None
        if response.is_error or not isinstance(data, dict) or data.get("success") is False:
            errors = data.get("errors") if isinstance(data, dict) else None
            message = errors[0].get("message") if errors else response.reason_phrase
            raise CelldError(response.status_code, str(message))
        return data

    # -- workflows -------------------------------------------------------------------------

    def workflows(self) -> list[dict[str, Any]]:
        return list(self.request("GET", f"{EXPLORER}/workflows")["result"])

    def workflow(self, name: str) -> Workflow:
        return Workflow(self, name)

    # -- the manual test clock ----------------------------------------------------------------

    def clock_now(self) -> int:
        """The engine's time in epoch ms (celld started with CELLD_TEST_CLOCK=manual)."""
        return int(self._clock("GET"))

    def advance_clock(self, ms: int) -> int:
        """Move the test clock forward: sleeps, retry delays and timeouts that fall due run."""
        return int(self._clock("POST", params={"advance": int(ms)}))

    def _clock(self, method: str, **kwargs: Any) -> int:
        response = self.http.request(method, "/cdn-cgi/celld/clock", **kwargs)
        if response.status_code == 404:
            raise CelldError(404, response.json().get("error") or NO_CLOCK)
        if response.is_error:
            raise CelldError(response.status_code, response.text[:500])
        return int(response.json()["now"])


class Workflow:
    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name
        self.path = f"{EXPLORER}/workflows/{_q(name)}"

    def details(self) -> dict[str, Any]:
        """Name, class, script and per-status instance counts."""
        return dict(self.client.request("GET", self.path)["result"])

    def instances_page(
        self,
        *,
        status: str | None = None,
        page: int = 1,
        per_page: int = 25,
        date_start: str | None = None,
        date_end: str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """One page of instances, newest first, and the paging facts (total_count, ...)."""
        params: dict[str, Any] = {"page": page, "per_page": per_page}
        for key, value in (("status", status), ("date_start", date_start), ("date_end", date_end)):
            if value is not None:
                params[key] = value
        data = self.client.request("GET", f"{self.path}/instances", params=params)
        return list(data["result"]), dict(data.get("result_info") or {})

    def instances(self, **filters: Any) -> list[dict[str, Any]]:
        return self.instances_page(**filters)[0]

    def create(self, *, id: str | None = None, params: Any = None) -> Instance:  # noqa: A002
        body: dict[str, Any] = {}
        if id is not None:
            body["id"] = id
        if params is not None:
            body["params"] = params
        result = self.client.request("POST", f"{self.path}/instances", json=body)["result"]
        return Instance(self, str(result["id"]))

    def get(self, instance_id: str) -> Instance:
        """A handle on an instance; `latest` means the newest one (resolved now)."""
        if instance_id == "latest":
            newest = self.instances(per_page=1)
            if not newest:
                raise CelldError(404, f'There are no instances in workflow "{self.name}"')
            instance_id = str(newest[0]["id"])
        instance = Instance(self, instance_id)
        instance.describe()  # 404 now rather than on first use
        return instance


class Instance:
    def __init__(self, workflow: Workflow, instance_id: str) -> None:
        self.workflow = workflow
        self.client = workflow.client
        self.id = instance_id
        self.path = f"{workflow.path}/instances/{_q(instance_id)}"

    def __repr__(self) -> str:
        return f"Instance({self.workflow.name!r}, {self.id!r})"

    def describe(self) -> dict[str, Any]:
        """Status, params, output or error, every step (attempts, deadlines) and events."""
        return dict(self.client.request("GET", self.path)["result"])

    def status(self) -> dict[str, Any]:
        """{status, output (when complete), error (when errored)}, as `instance.status()`."""
        details = self.describe()
        view: dict[str, Any] = {"status": details["status"]}
        if details["status"] == "complete":
            view["output"] = details["output"]
        if details.get("error"):
            view["error"] = details["error"]
        return view

    def _change(self, body: dict[str, Any]) -> str:
        result = self.client.request("PATCH", f"{self.path}/status", json=body)["result"]
        return str(result["status"])

    def pause(self) -> str:
        return self._change({"status": "pause"})

    def resume(self) -> str:
        return self._change({"status": "resume"})

    def terminate(self) -> str:
        return self._change({"status": "terminate"})

    def delete(self) -> None:
        """Delete the instance (its run stops; its id is free again)."""
        self.client.request("DELETE", self.path)

    def restart(
        self,
        from_step: str | None = None,
        *,
        count: int | None = None,
        type: str | None = None,  # noqa: A002
    ) -> str:
        """Run again from the start, or from a step (its results and later ones are redone)."""
        body: dict[str, Any] = {"status": "restart"}
        if from_step is not None:
            body["from"] = {"name": from_step}
            if count is not None:
                body["from"]["count"] = count
            if type is not None:
                body["from"]["type"] = type
        return self._change(body)

    def send_event(self, type: str, payload: Any = _NO_PAYLOAD) -> None:  # noqa: A002
        kwargs: dict[str, Any] = {}
        if payload is not _NO_PAYLOAD:
            kwargs["json"] = payload
        self.client.request("POST", f"{self.path}/events/{_q(type)}", **kwargs)

    # -- test helpers (waiting happens in celld: one request, no polling loop here) -----------

    def wait_for_status(self, status: str, timeout: float = 10.0) -> dict[str, Any]:
        """Return {status, output?, error?} once the instance has `status`; CelldError 408
        after `timeout` seconds, 409 if it ended with another status."""
        path = f"{CELLD_API}/workflows/{_q(self.workflow.name)}/instances/{_q(self.id)}"
        data = self.client.request(
            "GET",
            f"{path}/wait-for-status",
            params={"status": status, "timeout_ms": int(timeout * 1000)},
            timeout=timeout + 10,
        )
        return dict(data["result"])

    def wait_for_step_result(
        self,
        name: str,
        count: int = 1,
        *,
        type: str = "do",
        timeout: float = 10.0,  # noqa: A002
    ) -> Any:
        """The output of step `name` (its `count`-th call) once it has one; CelldError 409
        if the step failed, 408 after `timeout` seconds."""
        path = f"{CELLD_API}/workflows/{_q(self.workflow.name)}/instances/{_q(self.id)}"
        data = self.client.request(
            "GET",
            f"{path}/wait-for-step-result",
            params={"name": name, "count": count, "type": type, "timeout_ms": int(timeout * 1000)},
            timeout=timeout + 10,
        )
        return data["result"]["output"]

    def wait_until_settled(self, timeout: float = 10.0) -> dict[str, Any]:
        """The instance's details once nothing already due is left to do (it is final,
        paused, or its next deadline is later than the engine's now). Call it after
        `advance_clock` before looking: the moved clock's wake-ups have then happened."""
        path = f"{CELLD_API}/workflows/{_q(self.workflow.name)}/instances/{_q(self.id)}"
        data = self.client.request(
            "GET",
            f"{path}/wait-until-settled",
            params={"timeout_ms": int(timeout * 1000)},
            timeout=timeout + 10,
        )
        return dict(data["result"])

    # the names Cloudflare's test APIs use
    waitForStatus = wait_for_status  # noqa: N815
    waitForStepResult = wait_for_step_result  # noqa: N815
