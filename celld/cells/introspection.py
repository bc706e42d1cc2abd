"""Who gets which test modifiers: Cloudflare's introspection model, held in memory.

Only a celld in test mode has one of these (`CellSettings.test_mode`); everywhere else
`CellManager.introspection` is None and nothing here runs.

* An instance's modifiers (`introspectWorkflowInstance(wf, id)`) may be set before the
  instance exists: they wait for its id, and a mocked event is sent with its creation.
* A session of a workflow (`introspectWorkflow(wf)`, at most one per workflow) holds
  operations that every instance created while it lasts receives at creation; the
  session lists those instances.

The modifiers live in this process's memory (a restarted celld has none); what they
caused (results, failed attempts, ended sleeps) is durable like everything else.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from celld.cells.modifiers import ModifierError, Modifiers, Operation
from celld.engine import Machine, WorkflowError
from celld.store.base import InstanceRef


@dataclass
class Session:
    workflow: str
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    operations: list[Operation] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)


@dataclass
class _Staged:
    modifiers: Modifiers
    session: Session | None


class Introspection:
    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self._instances: dict[InstanceRef, Modifiers] = {}
        #: mocked events for ids not created yet, sent with the creation
        self._pending_events: dict[InstanceRef, list[Operation]] = {}
        self._staged: dict[InstanceRef, _Staged] = {}

    def get(self, ref: InstanceRef) -> Modifiers | None:
        """The instance's modifiers, consulted by its run at every step call."""
        return self._instances.get(ref)

    # -- one instance ----------------------------------------------------------------------

    def prepare(self, ref: InstanceRef, operations: Iterable[Operation]) -> Modifiers:
        """The instance's modifiers with `operations` added, checked as a whole (nothing
        changes if one conflicts); `install` makes them current."""
        modifiers = copy.deepcopy(self._instances.get(ref)) or Modifiers()
        for op in operations:
            modifiers.apply(op)
        return modifiers

    def install(self, ref: InstanceRef, modifiers: Modifiers) -> None:
        self._instances[ref] = modifiers

    def hold_events(self, ref: InstanceRef, events: Iterable[Operation]) -> None:
        """Mocked events for an id that has no instance yet: sent when it is created."""
        self._pending_events.setdefault(ref, []).extend(events)

    def forget(self, ref: InstanceRef) -> bool:
        """Drop everything held for the instance; True if anything was."""
        had = ref in self._instances or ref in self._pending_events
        self._instances.pop(ref, None)
        self._pending_events.pop(ref, None)
        return had

    # -- sessions (every instance created from now on) ---------------------------------------

    def start_session(self, workflow: str) -> Session:
        if workflow in self.sessions:
            raise ModifierError(
                f"workflow {workflow!r} already has an active introspection session; "
                "dispose of it first",
                409,
            )
        session = self.sessions[workflow] = Session(workflow)
        return session

    def session(self, workflow: str) -> Session:
        session = self.sessions.get(workflow)
        if session is None:
            raise ModifierError(f"workflow {workflow!r} has no introspection session", 404)
        return session

    def add_to_session(self, workflow: str, operations: list[Operation]) -> Session:
        session = self.session(workflow)
        trial = Modifiers()
        for op in [*session.operations, *operations]:
            trial.apply(op)  # refuse now what every creation would refuse
        session.operations.extend(operations)
        return session

    def stop_session(self, workflow: str) -> Session | None:
        return self.sessions.pop(workflow, None)

    # -- creation (called by CellManager.create around its commit) ---------------------------

    def stage(self, machine: Machine, now: int) -> None:
        """Before a new instance is committed: work out its modifiers (the session's
        operations on top of its own) and add the mocked events it is due to the machine,
        so that they are committed with it. A conflict refuses the creation."""
        ref = InstanceRef(machine.state.workflow, machine.state.id)
        session = self.sessions.get(ref.workflow)
        own = session.operations if session is not None else []
        try:
            modifiers = self.prepare(ref, own)
        except ModifierError as error:
            raise WorkflowError(f"introspection: {error.message}") from None
        for op in [*self._pending_events.get(ref, ()), *own]:
            if op.type == "mockEvent":
                assert op.event_type is not None
                machine.send_event(op.event_type, op.payload, now)
        self._staged[ref] = _Staged(modifiers, session)

    def settle(self, refs: Iterable[InstanceRef], created: Iterable[InstanceRef]) -> None:
        """After the commit: the instances `created` get their modifiers and join the
        session; the others (ids already taken, or a failed commit) get nothing."""
        made = set(created)
        for ref in refs:
            staged = self._staged.pop(ref, None)
            if staged is None or ref not in made:
                continue
            self._pending_events.pop(ref, None)
            if staged.modifiers.operations:
                self._instances[ref] = staged.modifiers
            if staged.session is not None and self.sessions.get(ref.workflow) is staged.session:
                staged.session.instances.append(ref.id)
