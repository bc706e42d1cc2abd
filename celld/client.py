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

Tests can also change what instances do, as Cloudflare's `introspectWorkflow` and
`introspectWorkflowInstance` (`cloudflare:test`) do, with a celld in test mode
(CELLD_TEST_MODE=1, or a manual clock):

    with celld.introspect_workflow_instance("order-workflow", "order-7") as order:
        order.modify(lambda m: m.disable_sleeps().mock_step_result("charge card", {"ok": 1}))
        celld.workflow("order-workflow").create(id="order-7")
        assert order.wait_for_step_result("charge card") == {"ok": 1}
    # disposed: the modifiers are gone and the instance is deleted

It speaks the same local explorer API as `wrangler workflows ... --local` (plus celld's
waiting and clock routes), so anything it does a Worker's binding could do too. Values
are plain JSON both ways. Errors from celld raise CelldError with its HTTP status and
message. A token (for a celld bound beyond loopback) comes from `token=` or
CELLD_ADMIN_TOKEN.
"""

from __future__ import annotations

import os
from collections.abc import Callable
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
        # celld's fuller answers (steps by name and count, deadlines, events; see
        # celld.server.explorer_shape), not the wrangler dev shape wrangler's CLI gets
        headers = {"x-celld-details": "1"}
        if token:
            headers["authorization"] = f"Bearer {token}"
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

    def introspect_workflow(self, name: str) -> WorkflowIntrospector:
        """Modifiers for every instance of `name` created from now on (one session per
        workflow at a time); dispose of it (or use `with`) at the end of the test."""
        return self.workflow(name).introspect()

    def introspect_workflow_instance(self, name: str, instance_id: str) -> InstanceIntrospector:
        """Modifiers for one instance, which need not exist yet."""
        return self.workflow(name).introspect_instance(instance_id)

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
        search: str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """One page of instances, newest first, and the paging facts (total_count, ...);
        `search` keeps those whose id contains it, ignoring case."""
        params: dict[str, Any] = {"page": page, "per_page": per_page}
        filters = {"status": status, "date_start": date_start, "date_end": date_end}
        for key, value in {**filters, "search": search}.items():
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

    def introspect(self) -> WorkflowIntrospector:
        """Start an introspection session (`introspectWorkflow`)."""
        result = self.client.request("POST", f"{self._celld_path}/introspection")["result"]
        return WorkflowIntrospector(self, str(result["id"]))

    def introspect_instance(self, instance_id: str) -> InstanceIntrospector:
        """`introspectWorkflowInstance`: nothing is sent until `modify`."""
        return InstanceIntrospector(Instance(self, instance_id))

    @property
    def _celld_path(self) -> str:
        return f"{CELLD_API}/workflows/{_q(self.name)}"

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

    def terminate(self, *, rollback: bool = False) -> str:
        """Terminate; with `rollback` the registered rollback handlers run first (the
        instance reads `running` until they are done)."""
        body: dict[str, Any] = {"status": "terminate"}
        if rollback:
            body["rollback"] = True
        return self._change(body)

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


# -- introspection: Cloudflare's test modifiers, in snake_case ----------------------------------

Step = str | dict[str, Any]
"""A step: its name, or `{"name": N, "index": I}` (the I-th call of that name, from 1)."""


def _selector(step: Step) -> dict[str, Any]:
    return {"name": step} if isinstance(step, str) else dict(step)


class Modifier:
    """Records operations for `modify` / `modify_all` (Cloudflare's modifier methods in
    snake_case). Each returns the modifier, so a lambda can chain them."""

    def __init__(self) -> None:
        self.operations: list[dict[str, Any]] = []

    def _add(self, operation: dict[str, Any]) -> Modifier:
        self.operations.append(operation)
        return self

    def disable_sleeps(self, steps: list[Step] | None = None) -> Modifier:
        """Every sleep (or the steps given) ends as soon as it is reached."""
        operation: dict[str, Any] = {"type": "disableSleeps"}
        if steps is not None:
            operation["steps"] = [_selector(s) for s in steps]
        return self._add(operation)

    def disable_retry_delays(self, steps: list[Step] | None = None) -> Modifier:
        """Failed attempts are retried at once (every step.do, or the steps given)."""
        operation: dict[str, Any] = {"type": "disableRetryDelays"}
        if steps is not None:
            operation["steps"] = [_selector(s) for s in steps]
        return self._add(operation)

    def mock_step_result(self, step: Step, result: Any) -> Modifier:
        """The step returns `result` (a JSON value) without running its callback."""
        return self._add({"type": "mockStepResult", "step": _selector(step), "stepResult": result})

    def mock_step_error(
        self, step: Step, error: BaseException | str | dict[str, str], times: int | None = None
    ) -> Modifier:
        """Attempts of the step fail with `error` (its class name and message): the next
        `times` attempts, or every one."""
        if isinstance(error, BaseException):
            shape = {"name": type(error).__name__, "message": str(error)}
        elif isinstance(error, str):
            shape = {"name": "Error", "message": error}
        else:
            shape = dict(error)
        operation: dict[str, Any] = {
            "type": "mockStepError",
            "step": _selector(step),
            "error": shape,
        }
        if times is not None:
            operation["times"] = times
        return self._add(operation)

    def force_step_timeout(self, step: Step, times: int | None = None) -> Modifier:
        """Attempts of the step time out at once (the next `times`, or every one)."""
        operation: dict[str, Any] = {"type": "forceStepTimeout", "step": _selector(step)}
        if times is not None:
            operation["times"] = times
        return self._add(operation)

    def mock_event(self, event: dict[str, Any] | str, payload: Any = _NO_PAYLOAD) -> Modifier:
        """Send an event (`{"type", "payload"}`, or a type and a payload) to the instance."""
        shape = {"type": event} if isinstance(event, str) else dict(event)
        if payload is not _NO_PAYLOAD:
            shape["payload"] = payload
        return self._add({"type": "mockEvent", "event": shape})

    def force_event_timeout(self, step: Step) -> Modifier:
        """The step's waitForEvent times out at once."""
        return self._add({"type": "forceEventTimeout", "step": _selector(step)})


class _Introspector:
    """What both introspectors share: applying recorded operations, and disposing (a
    DELETE of their path) once, also on leaving a `with` block."""

    def __init__(self, client: Client, path: str) -> None:
        self.http_client = client
        self.path = path
        self.disposed = False

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()

    def _apply(self, path: str, fn: Callable[[Modifier], Any]) -> None:
        if self.disposed:
            raise RuntimeError("this introspector has been disposed")
        modifier = Modifier()
        fn(modifier)
        self.http_client.request("POST", path, json={"operations": modifier.operations})

    def dispose(self) -> None:
        if not self.disposed:
            self.disposed = True
            self.http_client.request("DELETE", self.path)


class InstanceIntrospector(_Introspector):
    """One instance's modifiers (`introspectWorkflowInstance`); `dispose` (or leaving a
    `with` block) drops them and deletes the instance."""

    def __init__(self, instance: Instance) -> None:
        path = f"{instance.workflow._celld_path}/instances/{_q(instance.id)}/introspection"
        super().__init__(instance.client, path)
        self.instance = instance
        self.id = instance.id

    def modify(self, fn: Callable[[Modifier], Any]) -> InstanceIntrospector:
        """Call `fn` with a Modifier and apply what it recorded."""
        self._apply(self.path, fn)
        return self

    def modifiers(self) -> list[dict[str, Any]]:
        """The operations applied so far (values left out)."""
        return list(self.http_client.request("GET", self.path)["result"]["operations"])

    def wait_for_step_result(self, step: Step, timeout: float = 10.0) -> Any:
        selector = _selector(step)
        return self.instance.wait_for_step_result(
            selector["name"], selector.get("index", 1), timeout=timeout
        )

    def wait_for_status(self, status: str, timeout: float = 10.0) -> None:
        self.instance.wait_for_status(status, timeout=timeout)

    def get_output(self) -> Any:
        return self.instance.status().get("output")

    def get_error(self) -> dict[str, str] | None:
        error = self.instance.status().get("error")
        return dict(error) if error else None


class WorkflowIntrospector(_Introspector):
    """A session (`introspectWorkflow`): its operations go to every instance created
    while it lasts. `dispose` (or leaving a `with` block) ends it and disposes of those
    instances."""

    def __init__(self, workflow: Workflow, session_id: str) -> None:
        super().__init__(workflow.client, f"{workflow._celld_path}/introspection")
        self.workflow = workflow
        self.id = session_id

    def modify_all(self, fn: Callable[[Modifier], Any]) -> None:
        """Call `fn` with a Modifier; what it recorded goes to every instance created
        from now on."""
        self._apply(f"{self.path}/modify", fn)

    def get(self) -> list[InstanceIntrospector]:
        """The instances created in this session so far."""
        result = self.http_client.request("GET", self.path)["result"]
        return [InstanceIntrospector(Instance(self.workflow, i)) for i in result["instances"]]
