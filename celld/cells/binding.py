"""The Workflow binding: what `env.MY_WORKFLOW` and its instance handles do.

Every method arrives as one `wf.binding` host request from an isolate (the Worker's or a
workflow's). Creation validates, commits the new instance (create returns once it is
durably queued) and queues its first run; the lifecycle methods go to the instance's
cell, loading it if it is hibernated.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from celld.cells.cell import Cell
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
from celld.isolate.host import HostError
from celld.store.base import InstanceRef, Write

if TYPE_CHECKING:
    from celld.cells.manager import CellManager

MAX_BATCH = 100


def binding_error(error: WorkflowError) -> HostError:
    """Binding errors reach the Worker as workerd's RPC shows them: Error, 'WorkflowError: ...'."""
    shape = status_error(error.info())
    return HostError(shape.message, shape.name)


class WorkflowBindings:
    def __init__(self, manager: CellManager) -> None:
        self.manager = manager
        self._creating: set[InstanceRef] = set()

    async def handle(self, message: dict[str, Any]) -> Any:
        """The `wf.binding` host operation: one method of a Workflow binding."""
        workflow = message.get("workflow")
        method = message.get("method")
        if workflow not in self.manager.specs:
            raise HostError(f"no workflow named {workflow!r} is configured")
        handler = getattr(self, f"_op_{method}", None)
        if handler is None:
            raise HostError(f"Workflow bindings have no method {method!r}")
        try:
            return await handler(workflow, message)
        except WorkflowError as error:
            raise binding_error(error) from None

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
        )

    async def _free_id(self, ref: InstanceRef) -> bool:
        """True if `ref` can be created: unused, or retained no longer."""
        if ref in self.manager.cells or ref in self._creating:
            return False
        exists, expires = await self.manager.store.retained_until(ref)
        if not exists:
            return True
        if expires is not None and expires <= self.manager.clock.now():
            await self.manager.store.delete([ref])
            return True
        return False

    async def _op_create(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:
        machine = self._new_machine(workflow, message)
        ref = InstanceRef(workflow, machine.state.id)
        if not await self._free_id(ref) or ref in self._creating:
            raise AlreadyExistsError(ref.id)
        self._creating.add(ref)
        try:
            cell = Cell(self.manager, ref, self.manager.specs[workflow], machine)
            await cell.persist()
        finally:
            self._creating.discard(ref)
        self.manager.request_run(cell, wake=False)
        return {"id": ref.id}

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
        created: list[Machine] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        for index, machine in enumerate(machines):
            instance_id = machine.state.id
            ref = InstanceRef(workflow, instance_id)
            if instance_id in seen:
                errors.append(
                    {"index": index, "id": instance_id, "code": 10415,
                     "message": "workflows.api.error.instance.duplicate_in_batch"}
                )  # fmt: skip
                continue
            seen.add(instance_id)
            if not await self._free_id(ref):
                errors.append(
                    {"index": index, "id": instance_id, "code": 10405,
                     "message": "workflows.api.error.instance.already_exists"}
                )  # fmt: skip
                continue
            created.append(machine)
        refs = [InstanceRef(workflow, m.state.id) for m in created]
        self._creating.update(refs)
        try:
            cells = [
                Cell(self.manager, ref, self.manager.specs[workflow], m)
                for ref, m in zip(refs, created, strict=True)
            ]
            writes = [Write(c.ref, c.machine.take_changes(), None, True) for c in cells]
            if writes:
                await self.manager.store.write_many(writes)
        finally:
            self._creating.difference_update(refs)
        for cell in cells:
            cell.snapshot = cell.machine.status_view()
            self.manager.request_run(cell, wake=False)
        ids = [ref.id for ref in refs]
        return {"created": ids, "errors": errors} if report else {"ids": ids}

    async def _instance(self, workflow: str, message: dict[str, Any]) -> InstanceRef:
        instance_id = message.get("id")
        try:
            validate_instance_id(instance_id)
        except WorkflowError:
            raise NotFoundError() from None
        return InstanceRef(workflow, str(instance_id))

    async def _op_get(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:
        ref = await self._instance(workflow, message)
        if ref not in self.manager.cells and not await self.manager.store.exists(ref):
            raise NotFoundError()
        return {"id": ref.id}

    async def _op_status(self, workflow: str, message: dict[str, Any]) -> dict[str, Any]:
        ref = await self._instance(workflow, message)
        cell = self.manager.cells.get(ref)
        if cell is not None:
            return cell.snapshot
        async with self.manager.using(ref) as loaded:
            if loaded is None:
                raise NotFoundError()
            return loaded.snapshot

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
            await cell.terminate()

    async def _op_restart(self, workflow: str, message: dict[str, Any]) -> None:
        async with self._existing(workflow, message) as cell:
            await cell.restart(message.get("from"))

    async def _op_sendEvent(self, workflow: str, message: dict[str, Any]) -> None:  # noqa: N802
        event_type: Any = message.get("type")  # validated by the engine
        async with self._existing(workflow, message) as cell:
            await cell.send_event(event_type, message.get("payload") or "")
