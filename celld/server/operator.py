"""What an operator can see and do, in one place for the explorer API, the CLI and the page.

Instance operations go through the same entry point as the Worker's `env.MY_WORKFLOW`
binding (`wf.binding`), so an operator's pause or event is exactly a Worker's pause or
event: same validation, same errors, same durability. Reads come from
`CellManager.describe` (one instance) and the store's listing queries.

Every answer is plain JSON: stored values are decoded for reading (celld.server.values)
and step outputs marked `sensitive: "output"` are replaced with "[REDACTED]".
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from celld.cells.manager import CellManager
from celld.engine.lifecycle import allowed_actions
from celld.isolate.host import HostError
from celld.project.cron import parse_scheduled_id
from celld.server.attempts import attempts_of, logged_attempts
from celld.server.values import REDACTED, decode, encode, iso, parse_iso
from celld.store.base import InstanceRef, Store

STATUSES = (
    "queued", "running", "paused", "errored", "terminated", "complete", "waitingForPause",
    "waiting",
)  # fmt: skip
FINAL = frozenset({"errored", "terminated", "complete"})
ACTIONS = ("pause", "resume", "terminate", "restart")
MAX_PER_PAGE = 100
MAX_SEARCH = 100  # an instance id is at most 100 characters
MAX_WAIT_MS = 300_000
POLL_S = 0.025

# wrangler's local explorer error codes (what its CLI prints comes from `message`)
CODE_NOT_FOUND = 10501
CODE_BAD_DATE_RANGE = 10502
CODE_INVALID = 10001


class OperatorError(Exception):
    """A request the operator surface refuses: HTTP status, explorer code, message."""

    def __init__(self, status: int, message: str, code: int = CODE_INVALID) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _binding_error(error: HostError, instance_id: Any = None) -> OperatorError:
    """The binding's error as the explorer answers it. A missing or duplicate instance is
    worded as `wrangler dev`'s explorer words it (the binding itself keeps production's
    wording), so wrangler's CLI prints the same line against both."""
    message = str(error)
    if "(store.unavailable)" in message:
        return OperatorError(503, message)
    if "not_found" in message:
        if isinstance(instance_id, str):
            message = f"Workflow instance '{instance_id}' not found."
        return OperatorError(404, message, CODE_NOT_FOUND)
    if "already_exists" in message:
        if isinstance(instance_id, str):
            message = (
                "WorkflowError: (instance.already_exists) Workflow instance with id "
                f'"{instance_id}" already exists'
            )
        return OperatorError(409, message)
    if "cannot_" in message:
        return OperatorError(409, message)
    return OperatorError(400, message)


Parts = Callable[[], tuple[CellManager | None, Store | None]]


class Operator:
    """The operations behind every operator route; `cells` and `store` appear at start.

    One Operator may stand for several Workers (`combined`): each workflow is answered by
    the cells and store of the Worker that runs it."""

    def __init__(self, get_parts: Parts, workflows: list[dict[str, str]]) -> None:
        self._get_parts = get_parts
        #: [{name, binding, class_name, script_name}] from the project config
        self.workflows = workflows
        #: workflow name -> the parts of the Worker that runs it (when not `get_parts`)
        self._owners: dict[str, Parts] = {}

    @classmethod
    def combined(cls, operators: list[Operator]) -> Operator:
        """One Operator over the workflows of several Workers (a session of several),
        listed in the order given. A name two of them run is answered by the first, as
        ``wrangler dev``'s explorer lists one workflow per name."""
        first = operators[0]
        merged = cls(first._get_parts, [])
        for operator in operators:
            for workflow in operator.workflows:
                if any(w["name"] == workflow["name"] for w in merged.workflows):
                    continue
                merged.workflows.append(workflow)
                merged._owners[workflow["name"]] = operator._owners.get(
                    workflow["name"], operator._get_parts
                )
        return merged

    # -- plumbing ------------------------------------------------------------------------

    def _parts(self, workflow: str | None = None) -> tuple[CellManager, Store]:
        """The cells and store running `workflow` (None: the first Worker's)."""
        get = self._owners.get(workflow or "", self._get_parts)
        cells, store = get()
        if cells is None or store is None:
            raise OperatorError(404, "this project has no workflows", CODE_NOT_FOUND)
        return cells, store

    def require_workflow(self, name: str) -> dict[str, str]:
        for workflow in self.workflows:
            if workflow["name"] == name:
                return workflow
        raise OperatorError(404, f"Workflow '{name}' not found.", CODE_NOT_FOUND)

    async def _call(self, workflow: str, method: str, **fields: Any) -> Any:
        cells, _ = self._parts(workflow)
        self.require_workflow(workflow)
        handle: Callable[[dict[str, Any]], Awaitable[Any]] = cells.ops["wf.binding"]  # type: ignore[assignment]
        try:
            return await handle({"workflow": workflow, "method": method, **fields})
        except HostError as error:
            raise _binding_error(error, fields.get("id")) from None

    # -- workflows -----------------------------------------------------------------------

    def list_workflows(self) -> list[dict[str, str]]:
        return [
            {"name": w["name"], "class_name": w["class_name"], "script_name": w["script_name"]}
            for w in self.workflows
        ]

    async def workflow_details(self, name: str) -> dict[str, Any]:
        workflow = self.require_workflow(name)
        cells, store = self._parts(name)
        counts = dict.fromkeys(sorted(STATUSES), 0)  # wrangler dev's order
        counts.update(await store.workflow_counts(name))
        return {
            "name": workflow["name"],
            "class_name": workflow["class_name"],
            "script_name": workflow["script_name"],
            "binding": workflow["binding"],
            "version": cells.version,  # the running Worker's version (bundle hash)
            "instances": counts,
            # cron schedules: last tick handled and the next one (ISO times, UTC)
            "schedules": [
                {**s, "lastTick": iso(s["lastTick"]), "nextTick": iso(s["nextTick"])}
                for s in cells.scheduler.of(name)
            ],
        }

    # -- instances -----------------------------------------------------------------------

    async def list_instances(
        self,
        name: str,
        *,
        page: int = 1,
        per_page: int = 25,
        status: str | None = None,
        date_start: str | None = None,
        date_end: str | None = None,
        search: str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """One page of instances, newest first, with their allowed `actions`; `search`
        keeps those whose id contains it (ignoring case)."""
        self.require_workflow(name)
        cells, store = self._parts(name)
        if page < 1:
            raise OperatorError(400, "page must be a whole number >= 1")
        if not 1 <= per_page <= MAX_PER_PAGE:
            raise OperatorError(400, f"per_page must be between 1 and {MAX_PER_PAGE}")
        if status is not None and status not in STATUSES:
            raise OperatorError(400, f"status must be one of {', '.join(STATUSES)}")
        if search is not None and len(search) > MAX_SEARCH:
            raise OperatorError(400, f"search must be at most {MAX_SEARCH} characters")
        try:
            start = parse_iso(date_start) if date_start else None
            end = parse_iso(date_end) if date_end else None
        except ValueError as error:
            raise OperatorError(400, str(error)) from None
        if end is not None and date_end is not None and len(date_end.strip()) == 10:
            end += 86_400_000 - 1  # a bare date covers the whole UTC day
        if start is not None and end is not None and start > end:
            raise OperatorError(
                400, "'date_start' must not be after 'date_end'.", CODE_BAD_DATE_RANGE
            )
        rows = await store.list_instances(
            name,
            offset=(page - 1) * per_page,
            limit=per_page,
            status=status,
            created_from=start,
            created_to=end,
            id_contains=search,
        )
        total = await store.count_instances(
            name, status=status, created_from=start, created_to=end, id_contains=search
        )
        items = [
            {
                "id": r.id,
                "status": r.status,
                "created_on": iso(r.created_at),
                "started_on": iso(r.started_at),
                "ended_on": iso(r.finished_at),
                "actions": actions_for(r.status),
            }
            for r in rows
        ]
        info = {
            "page": page,
            "per_page": per_page,
            "total_count": total,
            "total_pages": max(1, -(-total // per_page)),
            "now": iso(cells.clock.now()),  # the engine's clock: an unfinished one's duration
        }
        return items, info

    async def latest_id(self, name: str) -> str:
        items, _ = await self.list_instances(name, per_page=1)
        if not items:
            raise OperatorError(404, f'There are no instances in workflow "{name}"', CODE_NOT_FOUND)
        return str(items[0]["id"])

    async def create(self, name: str, instance_id: Any = None, params: Any = None) -> str:
        fields: dict[str, Any] = {}
        if instance_id is not None:
            if not isinstance(instance_id, str):
                raise OperatorError(400, "id must be a string")
            fields["id"] = instance_id
        if params is not None:
            fields["params"] = encode(params)
        created = await self._call(name, "create", **fields)
        return str(created["id"])

    async def status(self, name: str, instance_id: str) -> dict[str, Any]:
        view = await self._call(name, "status", id=instance_id)
        result: dict[str, Any] = {"status": view["status"]}
        if "output" in view:
            result["output"] = decode(view["output"])
        if view.get("error"):
            result["error"] = view["error"]
        if view.get("rollback"):
            result["rollback"] = view["rollback"]
        return result

    async def change_status(
        self,
        name: str,
        instance_id: str,
        action: Any,
        restart_from: Any = None,
        *,
        rollback: bool = False,
    ) -> dict[str, Any]:
        if action not in ACTIONS:
            raise OperatorError(400, f"status must be one of {', '.join(ACTIONS)}")
        fields: dict[str, Any] = {"id": instance_id}
        if action == "restart":
            if restart_from is not None and not (
                isinstance(restart_from, dict) and isinstance(restart_from.get("name"), str)
            ):
                raise OperatorError(400, "from must be an object {name, count?, type?}")
            fields["from"] = restart_from
        if action == "terminate":
            fields["rollback"] = rollback
        before = await self._call(name, "status", id=instance_id)
        await self._call(name, action, **fields)
        view = await self._call(name, "status", id=instance_id)
        # Cloudflare answers a pause or resume that changes nothing (a resume of a complete
        # instance) as a success; `applied` (for celld's tools) says whether the lifecycle
        # allowed the action from the status found just before, so they report no success
        # for it. (A status read does not tell a rollback in progress, which reads
        # `running`: a pause then counts as applied though the machine ignores it.)
        applied = action in allowed_actions(before["status"])
        return {
            "status": view["status"],
            "timestamp": iso(time.time() * 1000),
            "applied": applied,
        }

    async def delete(self, name: str, instance_id: str) -> None:
        await self._call(name, "delete", id=instance_id)

    async def delete_batch(self, name: str, ids: Any) -> dict[str, Any]:
        """`{deleted: [{id}], errors: [{id, code, message}]}`, one entry per position."""
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise OperatorError(400, "instances must be an array of instance ids")
        result: dict[str, Any] = await self._call(name, "deleteBatch", ids=ids)
        return result

    async def delete_all(self, name: str) -> dict[str, Any]:
        """Delete every instance of the workflow (`wrangler workflows delete NAME`), a
        page at a time through the binding's deleteBatch."""
        self.require_workflow(name)
        _, store = self._parts(name)
        while True:
            rows = await store.list_instances(name, offset=0, limit=MAX_PER_PAGE)
            if not rows:
                return {"status": "ok", "success": True}
            result = await self.delete_batch(name, [r.id for r in rows])
            if not result["deleted"]:  # none of them could go: say why instead of looping
                first = result["errors"][0]
                raise OperatorError(409, f"could not delete {first['id']}: {first['message']}")

    async def send_event(self, name: str, instance_id: str, event_type: str, payload: Any) -> None:
        """`payload` is a JSON value, or ... for none (the event's payload is undefined)."""
        text = '{"$":"undefined"}' if payload is ... else encode(payload)
        await self.send_encoded_event(name, instance_id, event_type, text)

    async def send_encoded_event(
        self, name: str, instance_id: str, event_type: str, payload: str
    ) -> None:
        """sendEvent with the payload already in the serializer's text."""
        await self._call(name, "sendEvent", id=instance_id, type=event_type, payload=payload)

    def cells(self, workflow: str | None = None) -> CellManager:
        """The cells running `workflow` (None: the first Worker's)."""
        return self._parts(workflow)[0]

    async def describe(
        self, name: str, instance_id: str, *, attempts: bool = True
    ) -> dict[str, Any]:
        """The explorer's instance details, plus celld's deadlines, counts and events.
        With `attempts`, each attempt's times and error come from the instance's event log
        (celld.server.attempts); without, only from its step rows (the waiting helpers,
        which poll)."""
        self.require_workflow(name)
        cells, store = self._parts(name)
        await self._call(name, "get", id=instance_id)  # validates the id: 404 otherwise
        found = await cells.describe(name, instance_id)
        if found is None:
            raise OperatorError(
                404, f"Workflow instance '{instance_id}' not found.", CODE_NOT_FOUND
            )
        logged = await logged_attempts(store, InstanceRef(name, instance_id)) if attempts else None
        steps = [_step(row, logged) for row in found["steps"]]
        final_or_paused = found["status"] in FINAL or found["status"] == "paused"
        # JS is at work: a run is starting, an attempt runs, or run() is between steps
        # (resident, not finished, and waiting on no step)
        running = bool(
            found["starting"]
            or found["attempts_in_flight"]
            or (found["resident"] and not found["calls_pending"] and not final_or_paused)
        )
        return {
            "id": found["id"],
            "workflow": name,
            "status": found["status"],
            "params": decode(found.get("params")),
            "trigger": {"source": "cron" if parse_scheduled_id(found["id"]) else "unknown"},
            # the hash of the Worker bundle the instance started on (version pinning)
            "versionId": found.get("version"),
            "queued": iso(found["created_at"]),
            "start": iso(found["started_at"]),
            "end": iso(found["finished_at"]),
            "output": decode(found.get("output")) if found["status"] == "complete" else None,
            "error": found.get("error"),
            "steps": steps,
            "step_count": len(steps),
            "next_wake": iso(found.get("next_wake")),
            "now": iso(cells.clock.now()),
            "running": running,  # the engine's clock (a test clock may differ)
            "events": [
                {
                    "type": e["type"],
                    "timestamp": iso(e["timestamp"]),
                    "consumed": e["consumed"],
                    "payload": decode(e.get("payload")),
                }
                for e in found["events"]
            ],
            "rollback": _rollback(found.get("rollback")),
            "actions": actions_for(
                found["status"],
                rolling_back=(found.get("rollback") or {}).get("state") == "rolling_back",
            ),
        }

    # -- test helpers --------------------------------------------------------------------

    async def wait_for_status(
        self, name: str, instance_id: str, wanted: str, timeout_ms: int
    ) -> dict[str, Any]:
        """Return the status once it is `wanted`; 409 if the instance ended otherwise,
        408 after `timeout_ms` of real time."""
        if wanted not in STATUSES:
            raise OperatorError(400, f"status must be one of {', '.join(STATUSES)}")
        deadline = _deadline(timeout_ms)
        while True:
            view = await self.status(name, instance_id)
            if view["status"] == wanted:
                return view
            if view["status"] in FINAL and wanted not in FINAL:
                raise OperatorError(
                    409, f"instance is {view['status']}; it will not become {wanted}"
                )
            if time.monotonic() >= deadline:
                raise OperatorError(
                    408, f"instance still {view['status']} after {timeout_ms} ms, not {wanted}"
                )
            await asyncio.sleep(POLL_S)

    async def wait_until_settled(
        self, name: str, instance_id: str, timeout_ms: int
    ) -> dict[str, Any]:
        """Return the details once the instance waits on nothing already due: no JS of it
        runs (`running`: an attempt, or run() between steps; its status may still say
        `waiting` then), and it is final or paused or its next deadline is after the
        engine's now. After moving a test clock,
        this is when everything the move made due has happened."""
        deadline = _deadline(timeout_ms)
        busy = ("queued", "running", "waitingForPause")
        while True:
            details = await self.describe(name, instance_id, attempts=False)
            wake = details["next_wake"]
            due = wake is not None and wake <= details["now"]
            if details["status"] not in busy and not details["running"] and not due:
                return details
            if time.monotonic() >= deadline:
                raise OperatorError(
                    408, f"instance still {details['status']} after {timeout_ms} ms"
                )
            await asyncio.sleep(POLL_S)

    async def wait_for_step_result(
        self,
        name: str,
        instance_id: str,
        step: str,
        *,
        count: int = 1,
        step_type: str = "do",
        timeout_ms: int,
    ) -> dict[str, Any]:
        """The step's result once it has one; 409 if the step failed or the instance ended
        without reaching it, 408 after `timeout_ms` of real time."""
        deadline = _deadline(timeout_ms)
        while True:
            details = await self.describe(name, instance_id, attempts=False)
            for row in details["steps"]:
                if (row["name"], row["count"], row["kind"]) != (step, count, step_type):
                    continue
                if row["state"] in ("done", "received"):
                    return {"output": row.get("output"), "sensitive": row.get("sensitive")}
                if row["state"] in ("failed", "timed_out"):
                    raise OperatorError(409, f"step {step!r} failed: {row.get('error')}")
            if details["status"] in FINAL:
                raise OperatorError(
                    409, f"instance is {details['status']} without a result for {step!r}"
                )
            if time.monotonic() >= deadline:
                raise OperatorError(408, f"step {step!r} has no result after {timeout_ms} ms")
            await asyncio.sleep(POLL_S)


def actions_for(status: str, *, rolling_back: bool = False) -> list[str]:
    """What an operator may do to an instance in `status`: the lifecycle's allowed actions
    (celld.engine.lifecycle decides), and delete, which any status allows."""
    return [*allowed_actions(status, rolling_back=rolling_back), "delete"]


def _rollback(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """A rollback's progress with times as ISO strings (``None``: no rollback began)."""
    if progress is None:
        return None
    return {
        **progress,
        "started_at": iso(progress["started_at"]),
        "finished_at": iso(progress["finished_at"]),
        "steps": [
            {**s, "retry_at": iso(s["retry_at"]), "finished_at": iso(s["finished_at"])}
            for s in progress["steps"]
        ],
    }


def _deadline(timeout_ms: int) -> float:
    if not 0 <= timeout_ms <= MAX_WAIT_MS:
        raise OperatorError(400, f"timeout must be between 0 and {MAX_WAIT_MS} ms")
    return time.monotonic() + timeout_ms / 1000


def _config(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    raw = json.loads(text)
    # in wrangler dev's order (wrangler's --json prints it as is)
    retries = {"limit": raw.get("limit"), "backoff": raw.get("backoff"), "delay": raw.get("delay")}
    config: dict[str, Any] = {"retries": retries, "timeout": raw.get("timeout")}
    if raw.get("sensitive"):
        config["sensitive"] = raw["sensitive"]
    return config


def _attempts(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The attempts of a `step.do`, as far as its row knows them (see
    celld.server.attempts for the full history).

    celld keeps the count of failed attempts and the last error, not a row per attempt,
    so times are given where they are known (the first start, the last end) and null
    elsewhere; the last failed attempt carries the error.
    """
    failed = int(row.get("failed_attempts") or 0)
    state = row["state"]
    attempts = [
        {"attempt": n, "start": None, "end": None, "success": False, "error": None}
        for n in range(1, failed + 1)
    ]
    if state == "running":
        attempts.append(
            {"attempt": failed + 1, "start": None, "end": None, "success": None, "error": None}
        )
    elif state == "done":
        attempts.append(
            {"attempt": failed + 1, "start": None, "end": None, "success": True, "error": None}
        )
        attempts[-1]["end"] = iso(row.get("finished_at"))
    if attempts:
        attempts[0]["start"] = iso(row.get("started_at"))
        if state in ("failed",):
            attempts[-1]["end"] = iso(row.get("finished_at"))
        if state in ("failed", "retrying"):
            attempts[-1]["error"] = row.get("error")
    return attempts


def _step(row: dict[str, Any], logged: dict[str, list[dict[str, Any]]] | None) -> dict[str, Any]:
    kind = row["type"]
    state = row["state"]
    base: dict[str, Any] = {
        "name": row["name"],
        "count": row["count"],
        "kind": kind,
        "state": state,
        "start": iso(row.get("started_at")),
        "end": iso(row.get("finished_at")),
    }
    if kind == "do":
        config = _config(row.get("config"))
        sensitive = bool(config and config.get("sensitive") == "output")
        success = True if state == "done" else False if state == "failed" else None
        step: dict[str, Any] = {
            **base,
            "type": "step",
            "success": success,
            "config": config,
            "attempts": (
                _attempts(row)
                if logged is None
                else attempts_of(row, logged.get(f"{row['name']}-{row['count']}", []))
            ),
            "retry_at": iso(row.get("wake_at")) if state == "retrying" else None,
            "error": row.get("error") if state in ("failed", "retrying") else None,
            "sensitive": sensitive,
        }
        if state == "done":
            step["output"] = REDACTED if sensitive else decode(row.get("value"))
        return step
    if kind == "sleep":
        finished = state == "done"
        return {
            **base,
            "type": "sleep",
            "end": base["end"] or (iso(row.get("wake_at")) if finished else None),
            "finished": finished,
            "until": iso(row.get("wake_at")),
            "error": None,
        }
    # waitForEvent
    output = None
    if state == "received" and row.get("value"):
        event = json.loads(row["value"])
        output = {
            "type": event.get("type"),
            "payload": decode(event.get("payload")),
            "timestamp": iso(event.get("timestamp")),
        }
    return {
        **base,
        "type": "waitForEvent",
        "event_type": row.get("event_type"),
        "finished": state in ("received", "timed_out"),
        "timeout_at": iso(row.get("wake_at")) if state == "waiting" else None,
        "output": output,
        "error": row.get("error") if state == "timed_out" else None,
    }
