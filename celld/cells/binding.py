"""The Workflow binding: what `env.MY_WORKFLOW` and its instance handles do.

Every method arrives as one `wf.binding` host request from an isolate (the Worker's or a
workflow's). Creation validates, commits the new instances (create returns once they are
durably queued; the store judges id uniqueness) and queues their first runs; the
lifecycle methods go to the instance's cell, loading it if it is hibernated. With a store
several nodes share, an instance another live node owns has its operations forwarded to
that node (status reads are answered here, from the store).

A store failure reaches the caller as a clear error that says to retry; the operation
changed nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import orjson

from celld.cells.cell import Cell
from celld.cells.instance_log import TERMINAL
from celld.engine import (
    AlreadyExistsError,
    BatchTooLargeError,
    EmptyBatchError,
    Machine,
    NotFoundError,
    WorkflowError,
    status_error,
    validate_instance_id,
)
from celld.engine.errors import DeleteBatchTooLargeError, EmptyDeleteBatchError
from celld.isolate.host import HostError
from celld.project.cron import ADDRESSABLE_ID_RE
from celld.store.base import (
    InstanceRef,
    LogRow,
    NotDone,
    OutcomeUnknown,
    OwnedElsewhere,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from celld.cells.manager import CellManager

MAX_BATCH = 100
#: How long one `subscribeNext` host call waits for an event before JS asks again.
SUBSCRIBE_WAIT_S = 20.0


#: A status view with an output longer than this (its text) is not sent with `get`'s answer.
GET_VIEW_MAX = 16 * 1024


def _found(instance_id: str, view: dict[str, Any]) -> dict[str, Any]:
    """`get`'s answer for an instance in memory: its id and its status as committed, which
    the handle may use for a `status()` asked before anything else reaches the isolate
    (js/workflows/binding.js); a hibernated instance's status is not read for it."""
    output = view.get("output")
    if isinstance(output, str) and len(output) > GET_VIEW_MAX:
        return {"id": instance_id}
    return {"id": instance_id, "view": view}


def binding_error(error: WorkflowError) -> HostError:
    """Binding errors reach the Worker as workerd's RPC shows them: Error, 'WorkflowError: ...'."""
    shape = status_error(error.info())
    return HostError(shape.message, shape.name)


def store_error(error: StoreUnavailable) -> HostError:
    return HostError(
        f"(store.unavailable) celld could not use its store, so nothing was changed; "
        f"retry the call ({error})"
    )


class WorkflowBindings:
    def __init__(self, manager: CellManager) -> None:
        self.manager = manager

    def handle(self, message: dict[str, Any]) -> Awaitable[Any]:
        """The `wf.binding` host operation: one method of a Workflow binding. `get` and
        `status` of an instance in memory are answered at once, as a future already done
        (the host posts the answer without a task; `get`'s carries the status, which a
        `status()` right after it uses instead of a call of its own); everything else runs
        as a coroutine."""
        answer = self._answer_now(message)
        if answer is not None:
            return answer
        return self._handle(message)

    def _answer_now(self, message: dict[str, Any]) -> asyncio.Future[Any] | None:
        method = message.get("method")
        if method not in ("get", "status") or message.get("forwarded"):
            return None
        workflow, instance_id = message.get("workflow"), message.get("id")
        if workflow not in self.manager.specs or not isinstance(instance_id, str):
            return None
        cell = self.manager.loaded(InstanceRef(workflow, instance_id))
        if cell is None or cell.broken:
            return None
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        answer.set_result(_found(instance_id, cell.snapshot) if method == "get" else cell.snapshot)
        return answer

    async def _handle(self, message: dict[str, Any]) -> Any:
        workflow = message.get("workflow")
        method = message.get("method")
        if workflow not in self.manager.specs:
            raise HostError(f"no workflow named {workflow!r} is configured")
        handler = getattr(self, f"_op_{method}", None)
        if handler is None:
            raise HostError(f"Workflow bindings have no method {method!r}")
        try:
            try:
                return await handler(workflow, message)
            except OwnedElsewhere as elsewhere:
                if message.get("forwarded"):
                    raise  # the sender asks again where the instance is now
                return await self._forward(handler, workflow, message, elsewhere)
        except WorkflowError as error:
            raise binding_error(error) from None
        except StoreUnavailable as error:
            raise store_error(error) from None
        except OutcomeUnknown as error:
            raise HostError(str(error)) from None

    async def _forward(
        self, handler: Any, workflow: str, message: dict[str, Any], elsewhere: OwnedElsewhere
    ) -> Any:
        """Have the owning node do the operation; if it was not done there (the owner died
        before taking it, or the instance moved), dispatch it again from here."""
        for _ in range(10):
            try:
                reply = await self.manager.store.forward(
                    elsewhere.owner, {**message, "forwarded": True}
                )
            except NotDone:
                try:
                    return await handler(workflow, message)
                except OwnedElsewhere as moved:
                    elsewhere = moved
                    continue
            if "error" in reply:
                raise HostError(reply["error"], reply.get("name") or "Error")
            return reply.get("ok")
        raise HostError(
            f"instance {elsewhere.ref.id} kept moving between nodes; retry the call "
            "(nothing was changed)"
        )

    def _retention(self, options: dict[str, Any]) -> dict[str, Any] | None:
        retention = options.get("retention")
        if retention is not None and not isinstance(retention, dict):
            raise HostError(
                "retention must be an object {successRetention?, errorRetention?}", "TypeError"
            )
        return retention

    def _new_machine(self, workflow: str, options: dict[str, Any]) -> Machine:
        instance_id = options.get("id")
        if instance_id is None:
            instance_id = str(uuid.uuid4())
        params = options.get("params")
        return Machine.create(
            workflow,
            instance_id,
            params if isinstance(params, str) else "{}",
            self.manager.clock.now(),
            retention=self._retention(options),
            step_limit=self.manager.specs[workflow].step_limit,
            version=self.manager.version,
        )

    async def _op_create(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:
        machine = self._new_machine(workflow, message)
        if not await self.manager.create([machine]):
            raise AlreadyExistsError(machine.state.id)
        return {"id": machine.state.id}

    async def _op_createBatch(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        options = message.get("instances")
        if not isinstance(options, list):
            raise HostError("createBatch() takes an array", "TypeError")
        if not options:
            raise EmptyBatchError()
        if len(options) > MAX_BATCH:
            raise BatchTooLargeError()
        machines = [self._new_machine(workflow, item) for item in options]
        report = bool(message.get("report"))
        errors: list[dict[str, Any]] = []
        unique: list[Machine] = []
        seen: set[str] = set()
        for index, machine in enumerate(machines):
            instance_id = machine.state.id
            if instance_id in seen:
                errors.append(
                    {"index": index, "id": instance_id, "code": 10415,
                     "message": "workflows.api.error.instance.duplicate_in_batch"}
                )  # fmt: skip
                continue
            seen.add(instance_id)
            unique.append(machine)
        created = {ref.id for ref in await self.manager.create(unique)}
        for index, machine in enumerate(machines):
            instance_id = machine.state.id
            if machine in unique and instance_id not in created:
                errors.append(
                    {"index": index, "id": instance_id, "code": 10405,
                     "message": "workflows.api.error.instance.already_exists"}
                )  # fmt: skip
        errors.sort(key=lambda e: e["index"])
        ids = [m.state.id for m in unique if m.state.id in created]
        return {"created": ids, "errors": errors} if report else {"ids": ids}

    async def _instance(self, workflow: str, message: dict[str, Any]) -> InstanceRef:
        """The instance a lookup names: a user id, or the id a cron schedule gave one of
        its instances (spaces, `*`, `/`: Cloudflare's addressable ids)."""
        instance_id = message.get("id")
        try:
            validate_instance_id(instance_id)
        except WorkflowError:
            if not isinstance(instance_id, str) or not ADDRESSABLE_ID_RE.match(instance_id):
                raise NotFoundError() from None
        return InstanceRef(workflow, str(instance_id))

    async def _op_get(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:
        ref = await self._instance(workflow, message)
        cell = self.manager.loaded(ref)
        if cell is not None and not cell.broken:
            return _found(ref.id, cell.snapshot)
        if cell is None and not await self.manager.store.exists(ref):
            raise NotFoundError()
        return {"id": ref.id}

    async def _op_status(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:
        ref = await self._instance(workflow, message)
        cell = self.manager.loaded(ref)
        if cell is not None and not cell.broken:
            return cell.snapshot
        if cell is None and not self.manager.residency.busy(ref):
            # Not in memory, not being created or loaded: its rows are what it committed.
            view = await self.manager.peek_status(ref)
            if view is None:
                raise NotFoundError()
            return view
        try:
            async with self.manager.using(ref) as loaded:
                if loaded is None:
                    raise NotFoundError()
                return loaded.snapshot
        except OwnedElsewhere:
            view = await self.manager.view(ref)  # what its owner committed last
            if view is None:
                raise NotFoundError() from None
            return view.snapshot

    @asynccontextmanager
    async def _existing(self, workflow: str, message: dict[str, Any]) -> AsyncIterator[Cell]:
        ref = await self._instance(workflow, message)
        async with self.manager.using(ref) as cell:
            if cell is None:
                raise NotFoundError()
            yield cell

    async def _op_pause(self, workflow: str, message: dict[str, Any]) -> None:
        async with self._existing(workflow, message) as cell:
            await cell.pause()

    async def _op_resume(self, workflow: str, message: dict[str, Any]) -> None:
        async with self._existing(workflow, message) as cell:
            await cell.resume()

    async def _op_terminate(self, workflow: str, message: dict[str, Any]) -> None:
        async with self._existing(workflow, message) as cell:
            await cell.terminate(rollback=message.get("rollback") is True)

    async def _op_restart(self, workflow: str, message: dict[str, Any]) -> None:
        async with self._existing(workflow, message) as cell:
            await cell.restart(message.get("from"))

    async def _op_delete(self, workflow: str, message: dict[str, Any]) -> None:
        async with self._existing(workflow, message) as cell:
            await cell.delete()

    async def _op_deleteBatch(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        """One entry per input position; an id given twice is deleted once (both positions
        report it deleted)."""
        ids = message.get("ids")
        if not isinstance(ids, list):
            raise HostError("deleteBatch() takes an array of instance ids", "TypeError")
        if not ids:
            raise EmptyDeleteBatchError()
        if len(ids) > MAX_BATCH:
            raise DeleteBatchTooLargeError()
        outcome: dict[Any, bool] = {}
        for instance_id in ids:
            key = instance_id if isinstance(instance_id, str) else repr(instance_id)
            if key in outcome:
                continue
            outcome[key] = await self._delete_one(workflow, instance_id)
        deleted: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for instance_id in ids:
            key = instance_id if isinstance(instance_id, str) else repr(instance_id)
            if outcome[key]:
                deleted.append({"id": instance_id})
            else:
                errors.append(
                    {"id": instance_id, "code": 10400,
                     "message": "workflows.api.error.instance.not_found"}
                )  # fmt: skip
        return {"deleted": deleted, "errors": errors}

    async def _op_subscribe(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:
        """`instance.subscribe()`: the instance must exist; reading is `subscribeNext`."""
        await self._op_get(workflow, message)
        return {}

    async def _op_subscribeNext(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        """The next logged event after `cursor` whose type passes `filter`, waiting for one
        for up to SUBSCRIBE_WAIT_S (then `{retry, cursor}`: JS asks again). `{done}` once the
        instance's final event is behind the cursor, or when it is gone."""
        ref = await self._instance(workflow, message)
        cursor = message.get("cursor")
        cursor = cursor if isinstance(cursor, int) and cursor >= 0 else 0
        wanted = message.get("filter")
        allowed = set(wanted) if isinstance(wanted, list) else None
        store = self.manager.store
        deadline = asyncio.get_running_loop().time() + SUBSCRIBE_WAIT_S
        while True:
            rows = await store.log_after(ref, cursor, 100)
            for row in rows:
                cursor = row.event_id
                if allowed is None or row.type in allowed:
                    return {"done": False, "cursor": cursor, "value": self._event(ref, row)}
                if row.type in TERMINAL:
                    return {"done": True, "cursor": cursor}
            if rows:
                continue
            if await store.log_ended(ref, cursor) or not await store.exists(ref):
                return {"done": True, "cursor": cursor}
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return {"retry": True, "cursor": cursor}
            await self.manager.log_hub.wait(ref, left)

    @staticmethod
    def _event(ref: InstanceRef, row: LogRow) -> dict[str, Any]:
        body = orjson.loads(row.body)
        return {
            "instanceId": ref.id,
            "eventId": row.event_id,
            "timestamp": row.timestamp,
            "type": row.type,
            **body,
        }

    async def _delete_one(self, workflow: str, instance_id: Any) -> bool:
        """Delete one instance of a batch, here or on the node that owns it; False if there
        is no such instance."""
        message = {"workflow": workflow, "method": "delete", "id": instance_id}
        try:
            await self._op_delete(workflow, message)
        except NotFoundError:
            return False
        except OwnedElsewhere as elsewhere:
            try:
                await self._forward(self._op_delete, workflow, message, elsewhere)
            except HostError as error:
                if str(error) != str(binding_error(NotFoundError())):
                    raise
                return False
            except NotFoundError:
                return False
        return True

    async def _op_sendEvent(self, workflow: str, message: dict[str, Any]) -> None:  # noqa: N802
        event_type: Any = message.get("type")  # validated by the engine
        async with self._existing(workflow, message) as cell:
            await cell.send_event(event_type, message.get("payload") or "")
