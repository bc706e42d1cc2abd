"""Cloudflare's introspection operations for tests, as the operator surface offers them.

`introspectWorkflowInstance(wf, id).modify(...)` is `modify_instance`;
`introspectWorkflow(wf)` is a session (`start_session`, `modify_all`, `session`,
`dispose_session`). Disposing drops the modifiers and deletes the instances they were
for, as disposing an introspector does on Cloudflare (the next test starts clean and
may reuse the ids). Refused (403) unless celld runs in test mode.
"""

from __future__ import annotations

from typing import Any

from celld.cells.introspection import Introspection, Session
from celld.cells.modifiers import ModifierError, Operation, parse_operation
from celld.engine import WorkflowError, validate_instance_id
from celld.server.operator import CODE_NOT_FOUND, Operator, OperatorError
from celld.server.values import encode
from celld.store.base import InstanceRef

NOT_TEST_MODE = (
    "test modifiers need celld in test mode: start it with CELLD_TEST_MODE=1 "
    "(a manual clock, CELLD_TEST_CLOCK=manual, implies it)"
)
MAX_OPERATIONS = 1_000


def _refused(error: ModifierError) -> OperatorError:
    return OperatorError(error.status, error.message)


class Introspector:
    def __init__(self, operator: Operator) -> None:
        self.operator = operator

    def _registry(self, workflow: str) -> Introspection:
        self.operator.require_workflow(workflow)
        registry = self.operator.cells(workflow).introspection
        if registry is None:
            raise OperatorError(403, NOT_TEST_MODE)
        return registry

    @staticmethod
    def operations(raw: Any) -> list[Operation]:
        """`{operations: [...]}`'s list, validated (400 naming what is wrong)."""
        if raw is ... or raw is None:
            return []
        if not isinstance(raw, list) or len(raw) > MAX_OPERATIONS:
            raise OperatorError(400, f"operations must be an array of at most {MAX_OPERATIONS}")
        try:
            return [parse_operation(op, encode) for op in raw]
        except ModifierError as error:
            raise _refused(error) from None

    async def _exists(self, workflow: str, instance_id: str) -> bool:
        try:
            await self.operator.status(workflow, instance_id)
        except OperatorError as error:
            if error.code == CODE_NOT_FOUND:
                return False
            raise
        return True

    # -- one instance ------------------------------------------------------------------------

    async def modify_instance(
        self, workflow: str, instance_id: str, operations: list[Operation]
    ) -> dict[str, Any]:
        """Add modifiers to the instance (it need not exist yet). A live run takes them at
        a turn boundary of its isolate; mocked events are sent now, or with the creation."""
        registry = self._registry(workflow)
        try:
            validate_instance_id(instance_id)
        except WorkflowError as error:
            raise OperatorError(400, error.message) from None
        ref = InstanceRef(workflow, instance_id)
        try:
            modifiers = registry.prepare(ref, operations)
        except ModifierError as error:
            raise _refused(error) from None
        cell = self.operator.cells(workflow).loaded(ref)
        run = cell.run if cell is not None else None
        if run is None:
            registry.install(ref, modifiers)
        else:

            def take() -> None:
                registry.install(ref, modifiers)
                run.modified()

            await run.at_turn_boundary(take)
        events = [op for op in operations if op.type == "mockEvent"]
        if events and await self._exists(workflow, instance_id):
            for op in events:
                assert op.event_type is not None and op.payload is not None
                await self.operator.send_encoded_event(
                    workflow, instance_id, op.event_type, op.payload
                )
        else:
            registry.hold_events(ref, events)
        return self.instance_view(workflow, instance_id)

    def instance_view(self, workflow: str, instance_id: str) -> dict[str, Any]:
        modifiers = self._registry(workflow).get(InstanceRef(workflow, instance_id))
        return {
            "workflow": workflow,
            "id": instance_id,
            "operations": modifiers.view() if modifiers is not None else [],
        }

    async def dispose_instance(self, workflow: str, instance_id: str) -> dict[str, Any]:
        """Drop the instance's modifiers and delete the instance, if it exists."""
        registry = self._registry(workflow)
        registry.forget(InstanceRef(workflow, instance_id))
        deleted = await self._exists(workflow, instance_id)
        if deleted:
            try:
                await self.operator.delete(workflow, instance_id)
            except OperatorError as error:
                if error.code != CODE_NOT_FOUND:
                    raise
                deleted = False
        return {"id": instance_id, "deleted": deleted}

    # -- a session: every instance created while it lasts -----------------------------------

    def start_session(self, workflow: str, operations: list[Operation]) -> dict[str, Any]:
        registry = self._registry(workflow)
        try:
            registry.start_session(workflow)
        except ModifierError as error:
            raise _refused(error) from None
        try:
            registry.add_to_session(workflow, operations)
        except ModifierError as error:
            registry.stop_session(workflow)  # a session that could not start is none
            raise _refused(error) from None
        return self.session(workflow)

    def modify_all(self, workflow: str, operations: list[Operation]) -> dict[str, Any]:
        registry = self._registry(workflow)
        try:
            registry.add_to_session(workflow, operations)
        except ModifierError as error:
            raise _refused(error) from None
        return self.session(workflow)

    def session(self, workflow: str) -> dict[str, Any]:
        try:
            session = self._registry(workflow).session(workflow)
        except ModifierError as error:
            raise _refused(error) from None
        return _session_view(session)

    async def dispose_session(self, workflow: str) -> dict[str, Any]:
        """End the session (later instances get nothing) and dispose of every instance it
        modified. Disposing twice is harmless."""
        session = self._registry(workflow).stop_session(workflow)
        if session is None:
            return {"workflow": workflow, "disposed": []}
        disposed = [await self.dispose_instance(workflow, i) for i in session.instances]
        return {"workflow": workflow, "disposed": disposed}


def _session_view(session: Session) -> dict[str, Any]:
    return {
        "workflow": session.workflow,
        "id": session.id,
        "operations": [op.describe() for op in session.operations],
        "instances": list(session.instances),
    }
