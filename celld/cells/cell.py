"""A cell: one workflow instance's machine, its one commit path and (while resident) its run.

The cell is the only writer of its instance: every durable change (creation, events,
lifecycle operations, step results, deadlines) goes through :meth:`Cell.commit`, one
at a time. It talks to the layer that owns it only through its port
(:mod:`celld.cells.port`).

A failed commit is never a workflow failure. The cell marks itself broken: nothing that
depended on the write is delivered, later commits fail at once, its run is dropped, and
the port forgets the cell and loads the instance again from the store once the store
commits again. The machine in memory is simply thrown away, so memory and disk can
never disagree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from celld.cells.instance_log import InstanceLog
from celld.cells.port import CellPort, WorkflowSpec
from celld.cells.run import CellRun
from celld.cells.runqueue import Priority
from celld.cells.startbatch import StartBatch
from celld.engine import (
    ErrorInfo,
    EventRecord,
    Machine,
    NotFoundError,
    RunStart,
    Status,
    StepRecord,
)
from celld.engine.state import Changes
from celld.isolate.tenant import Tenant
from celld.store.base import InstanceRef, StoreUnavailable, Write

log = logging.getLogger("celld.cells")

#: Told how a commit went: None (committed) or the error.
CommitDone = Callable[[BaseException | None], None]

#: Statuses that need a run in an isolate (after a crash too): the store's runnable flag.
RUNNABLE = frozenset({Status.QUEUED, Status.RUNNING, Status.WAITING_FOR_PAUSE})
#: Statuses a run can start from.
STARTABLE = frozenset({Status.QUEUED, Status.RUNNING, Status.WAITING})


class Cell:
    def __init__(
        self, port: CellPort, ref: InstanceRef, spec: WorkflowSpec, machine: Machine
    ) -> None:
        self.port = port
        self.ref = ref
        self.spec = spec
        self.machine = machine
        self.run: CellRun | None = None
        self.users = 0  # operations holding this cell loaded
        self.starting = False  # holds an isolate slot while its run starts
        self.broken = False
        self.deleted = False
        self.snapshot: dict[str, Any] = machine.status_view()
        #: the node's lease as of this load: its runs neither turn nor send while it says
        #: no, and never again once the node rejoined under another token
        self.fence = port.settings.lease.fence()
        self.log = InstanceLog(machine)  # what subscribe() streams, written with each commit
        self._committing = 0  # commit callers not yet answered
        self._queued: list[tuple[CommitDone, bool]] = []  # (done, deleting) for the next write
        self._in_flight: list[CommitDone] | None = None  # callers of the write in flight
        #: the write in flight, whether it deletes, and the status view it lands with
        self._landing: tuple[Write, bool, dict[str, Any]] | None = None
        self._readers = asyncio.Lock()  # history reads, one at a time
        self._held = False  # a history read holds writes off
        #: holds on writes until a turn's messages are dispatched: a run's start (see
        #: start_run) and an answer given ahead of its commit (`CellRun._answer_early`)
        self._turn_holds = 0
        self._hold_waiter: asyncio.Future[None] | None = None
        #: the runs admitted with this one's start, which post their starts together
        #: (set by the residency while the start is under way)
        self.start_batch: StartBatch | None = None

    @property
    def idle(self) -> bool:
        """Nothing holds the cell in memory: it may be unloaded (it hibernates)."""
        return self.users == 0 and self.run is None and not self.starting and self._committing == 0

    @property
    def parked(self) -> bool:
        return self.run is not None and self.run.parked

    # -- the one commit path ----------------------------------------------------------------

    async def commit(self) -> None:
        """Return once every change made so far is committed; raise StoreUnavailable (and
        break the cell) if it cannot be."""
        await self._commit(deleting=False)

    def commit_soon(self, done: CommitDone) -> None:
        """Commit every change made so far, then call `done(None)`, or `done(error)` if it
        could not be (a StoreUnavailable breaks the cell). No task or future: the step
        path's commit. `done` runs on the event loop, synchronously if nothing changed."""
        self._enqueue(done, deleting=False)

    async def _commit(self, *, deleting: bool) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settle(error: BaseException | None) -> None:
            if future.done():
                return  # the caller went away; the write went on
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

        self._enqueue(settle, deleting=deleting)
        await future

    # Writes of one cell go to the store one at a time, in order: callers that ask while
    # a write is in flight share the next one, which takes every change made until then.

    def _enqueue(self, done: CommitDone, *, deleting: bool) -> None:
        self._committing += 1
        self._queued.append((done, deleting))
        if self._in_flight is None and not self._held and not self._turn_holds:
            self._write_next()

    def _write_next(self) -> None:
        """Start the next write of the queue (a deletion is a write of its own)."""
        while self._queued and self._in_flight is None and not self._held and not self._turn_holds:
            queued = self._queued
            deleting = queued[0][1]
            if len(queued) == 1:  # (the usual case: one caller)
                group, self._queued = queued, []
            else:
                taken = 1 if deleting else len(queued)
                if not deleting:
                    taken = next((i for i, (_, d) in enumerate(queued) if d), taken)
                group, self._queued = queued[:taken], queued[taken:]
            callers = [done for done, _ in group]
            write: Write | None = None
            error: BaseException | None = None
            if self.deleted:
                error = NotFoundError()
            elif self.broken:
                error = StoreUnavailable("an earlier commit of this instance failed")
            elif deleting:
                self.machine.take_changes()  # whatever was pending goes with the rows
                write = Write(self.ref, Changes(), None, False, delete=True)
            else:
                try:
                    write = self.take_write()
                except Exception as failure:  # noqa: BLE001 - handed to the callers
                    error = failure
            if write is None:
                self._finish(callers, error)
                continue
            self._in_flight = callers
            # What readers see once it lands: the status as this write has it. The machine
            # may move on while the write is in flight (JS runs meanwhile), and a status
            # read must never show what is not committed yet.
            self._landing = (write, deleting, self.machine.status_view())
            try:
                self.port.commit_soon(write, self._landed)
            except Exception as failure:  # noqa: BLE001 - as if the commit had failed
                self._landed(failure)

    def _landed(self, error: BaseException | None) -> None:
        """The write in flight landed (or failed): one at a time, so it is `_landing`."""
        landing, self._landing = self._landing, None
        assert landing is not None
        write, deleting, view = landing
        self._written(write, deleting, error, view)

    def _written(
        self,
        write: Write,
        deleting: bool,
        error: BaseException | None,
        view: dict[str, Any] | None = None,
    ) -> None:
        callers, self._in_flight = self._in_flight or [], None
        if error is None:
            if deleting:
                self.deleted = True
            else:
                self.machine.forget_finished(
                    (row.key for row in write.changes.steps),
                    (event.seq for event in write.changes.events),
                )
                self.committed(write.next_wake, view)
        elif isinstance(error, StoreUnavailable):
            self.break_(error)
        waiter, self._hold_waiter = self._hold_waiter, None
        if waiter is not None and not waiter.done():
            self._held = True  # handed straight to the history read waiting for it
            waiter.set_result(None)
        self._finish(callers, error)
        self._write_next()

    def _finish(self, callers: list[CommitDone], error: BaseException | None) -> None:
        self._committing -= len(callers)
        self.port.release(self)
        for done in callers:
            try:
                done(error)
            except Exception:  # noqa: BLE001 - one caller's failure must not stop the others
                log.exception(
                    "workflow %s/%s: a commit's caller failed", self.ref.workflow, self.ref.id
                )

    @contextlib.asynccontextmanager
    async def _holding_commits(self) -> AsyncIterator[None]:
        """No write of this cell runs (and none forgets rows) while this is held; commits
        asked for meanwhile wait and go in one write after it."""
        async with self._readers:
            if self._in_flight is None:
                self._held = True
            else:
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._hold_waiter = waiter
                try:
                    await waiter
                except BaseException:
                    self._hold_waiter = None
                    if waiter.done() and not waiter.cancelled():
                        self._release_hold()
                    raise
            try:
                yield
            finally:
                self._release_hold()

    def _release_hold(self) -> None:
        self._held = False
        self._write_next()

    def take_write(self) -> Write | None:
        """The machine's changes since the last write, with the log entries they make."""
        machine = self.machine
        changes = machine.take_changes()
        if not changes:
            return None
        log = tuple(self.log.entries(changes, self.port.now()))
        return Write(self.ref, changes, machine.next_wake(), machine.status in RUNNABLE, log=log)

    def committed(self, next_wake: int | None, view: dict[str, Any] | None = None) -> None:
        """After a successful write: refresh what readers see (`view`, the status as that
        write has it; by default the machine's, unchanged since the write was taken) and
        the next alarm."""
        self.snapshot = self.machine.status_view() if view is None else view
        self.port.schedule(self.ref, next_wake)

    def break_(self, error: BaseException) -> None:
        """Memory can no longer be trusted: drop the run, and let the port reload the
        instance from the store later."""
        if self.broken:
            return
        self.broken = True
        log.warning(
            "workflow %s/%s: dropped from memory after a failure (%s); it is reloaded from "
            "the store once the store commits again",
            self.ref.workflow,
            self.ref.id,
            error,
        )
        run = self._detach_run()
        if run is not None:
            self.port.spawn(self._let_go(run), "freeing the isolate of a dropped run")
        self.port.lost(self)

    def on_task_failure(self, error: BaseException) -> None:
        """A background task of this cell failed: whatever it left half done in memory is
        dropped (a store failure has broken the cell already)."""
        self.break_(error)

    # -- history ------------------------------------------------------------------------------

    async def restore_history(self) -> None:
        """Bring finished steps back from the store (a new run's journal needs them). Holds
        writes off, so no row is forgotten between the read and the restore."""
        if not self.machine.history_dropped:
            return
        async with self._holding_commits():
            if self.broken:
                raise StoreUnavailable("an earlier commit of this instance failed")
            loaded = await self.port.read(self.ref)
            self.machine.restore_history(
                loaded.steps if loaded else (), loaded.events if loaded else ()
            )

    async def _run_start(self, quiet: bool = False) -> RunStart:
        """`Machine.start_run` with the finished steps it needs. When only they are missing
        from memory, the store reads them as journal text (no row becomes a Python
        object); otherwise the rows are restored first. A replay under another version
        of the Worker checks the recorded keys one by one, so it restores the rows too."""
        machine = self.machine
        version = machine.state.version
        same_version = version is None or version == self.port.version
        if not machine.history_dropped or not machine.journal_on_disk_suffices or not same_version:
            await self.restore_history()
            return machine.start_run(self.port.now(), quiet=quiet)
        # Writes held off: no finished row is committed and forgotten between the
        # read and the start, so every finished step is either on disk or in memory.
        async with self._holding_commits():
            if self.broken:
                raise StoreUnavailable("an earlier commit of this instance failed")
            recorded = await self.port.read_journal(self.ref)
            return machine.start_run(self.port.now(), recorded, quiet=quiet)

    async def history(self) -> tuple[list[StepRecord], list[EventRecord]]:
        """Every step row and event, for viewing (nothing is restored into memory)."""
        if not self.machine.history_dropped:
            return self.machine.steps(), self.machine.events()
        async with self._holding_commits():
            loaded = await self.port.read(self.ref)
            return self.machine.merged_history(
                loaded.steps if loaded else (), loaded.events if loaded else ()
            )

    # -- runs ---------------------------------------------------------------------------------

    async def prepare_run(self) -> bool:
        """Settle what a dead process left behind (a pause waiting for attempts that died),
        commit it, and say whether the instance needs a run."""
        must_run = self.machine.recover(self.port.now())
        await self.commit()
        return must_run

    async def start_run(self, *, preload: bool = False) -> None:
        """Replay run() from the top in an isolate. The caller holds an isolate slot for
        this cell and has set `starting`; this returns it through the port.

        `preload`: brought in ahead of its deadline; the replay only rebuilds the pending
        promise, so the instance goes on reading `waiting` throughout (a quiet start, see
        `Machine.start_run`: nothing changes, nothing is committed for it).
        """
        try:
            await self._start_run(preload)
        finally:
            self.starting = False
            self.port.release(self)

    async def _start_run(self, preload: bool) -> None:
        if self.run is not None or self.broken or self.machine.status not in STARTABLE:
            return
        try:
            # a place in an isolate, usually one shared with other runs (celld/cells/isolates.py)
            tenant = await self.port.join_isolate(self.ref, self.fence)
        except Exception as error:  # noqa: BLE001 - a Worker that cannot load fails this instance
            now = self.port.now()
            self.machine.start_run(now)
            self.machine.fail(ErrorInfo("Error", f"could not load the Worker: {error}"), now)
            await self.commit()
            return
        if self.broken:
            await self.port.leave_isolate(tenant)
            return
        try:
            start = await self._run_start(quiet=preload)
        except BaseException:
            await self.port.leave_isolate(tenant)
            raise
        batch = self.start_batch
        if batch is not None and not self.broken:
            # the other runs admitted with this one are started in the same pass, by one
            # call: one turn of each isolate starts them all (celld/cells/startbatch.py)
            status = self.machine.status
            outcome: list[BaseException | bool] = []

            def launch() -> None:
                try:
                    outcome.append(self._launch(tenant, start, preload, batch, status))
                except Exception as error:  # noqa: BLE001 - raised in this start's task
                    outcome.append(error)

            try:
                await batch.ready(self.ref, launch)
            except BaseException:  # cancelled while it waited (a shutdown)
                if not outcome:  # never posted: the place in the isolate goes back
                    batch.withdraw(self.ref)
                    await self.port.leave_isolate(tenant)
                raise
            if outcome and isinstance(outcome[0], BaseException):
                raise outcome[0]
            if outcome and outcome[0]:
                return
            # another start, a restart, an event or a lifecycle change (terminate, pause)
            # got in while this one waited: this start is void, and a run the instance
            # still needs starts afresh from what the machine holds now
            if self.run is None and not self.broken:
                self.machine.abandon_run()
            await self.port.leave_isolate(tenant)
            if self.run is None and not self.broken and self.machine.status in STARTABLE:
                self.port.request_run(self.ref, Priority.WAKE)
            return
        if self.broken:  # dropped while the journal was read: nothing of it may run
            await self.port.leave_isolate(tenant)
            return
        self._launch(tenant, start, preload, None, None)

    def _launch(
        self,
        tenant: Tenant,
        start: RunStart,
        preload: bool,
        batch: StartBatch | None,
        status: Status | None,
    ) -> bool:
        """Post the run's start (synchronously); False if a batch's wait made it void."""
        if status is not None and (
            self.broken
            or self.run is not None
            or self.deleted
            or self.machine.generation != start.generation
            or self.machine.status is not status
        ):
            return False
        run = CellRun(self, tenant)
        self.run = run
        # (told at once if a co-tenant's lost write condemned the isolate while the
        # journal was read: the run then moves elsewhere, as its co-tenants do)
        tenant.on_fault = run.on_fault
        if not preload:
            # The start (status, generation) commits while JS already runs: the start
            # acknowledges nothing, and every answer JS gets waits for a commit of its own,
            # which comes after this one. If it fails, the cell breaks and drops the run.
            # It is held until the first turn's messages are dispatched, so that what they
            # commit (usually the first step's result) goes in the same write: one commit
            # fewer before the first answer.
            self.hold_writes()
            tenant.after_next_turn(self.release_writes)
            self.commit_soon(self._start_committed)
        run.post_start(start)
        if batch is not None:
            batch.posted(tenant)
        self.machine.forget_finished()  # JS has the journal now
        return True

    def hold_writes(self) -> None:
        """Hold writes off until `release_writes`: what the next turn asks to commit goes
        in the same write as what is queued now."""
        self._turn_holds += 1

    def release_writes(self, *, every: bool = False) -> None:
        """The turn a hold waited for is dispatched (or the run ended without one): the
        held write goes, with whatever that turn asked to commit."""
        if self._turn_holds:
            self._turn_holds = 0 if every else self._turn_holds - 1
            if not self._turn_holds:
                self._write_next()

    @property
    def writes_held(self) -> bool:
        return self._turn_holds > 0

    def _start_committed(self, error: BaseException | None) -> None:
        if error is not None and not isinstance(error, StoreUnavailable):
            log.error(
                "workflow %s/%s: the commit of a run's start failed: %r",
                self.ref.workflow, self.ref.id, error,
            )  # fmt: skip

    def _detach_run(self) -> CellRun | None:
        """Close the run in memory now (synchronously: nothing reaches it after this)."""
        run, self.run = self.run, None
        self.release_writes(every=True)
        if run is None:
            return None
        run.quiet = run.ended or run.parked  # (before closing: see `_let_go`)
        run.close()
        # Whatever the run waited for in memory is forgotten: the alarm for its next
        # deadline (possibly already due) brings it back by replay.
        self.port.schedule(self.ref, self.machine.next_wake())
        return run

    async def _let_go(self, run: CellRun) -> None:
        try:
            await self.port.leave_isolate(run.host, quiet=run.quiet)
        finally:
            self.port.release(self)

    async def stop_run(self) -> None:
        """Drop the run and give its isolate back (the instance hibernates or is over)."""
        run = self._detach_run()
        if run is not None:
            await self._let_go(run)

    def evict(self) -> None:
        """Hibernate a parked run to free its slot for another (synchronous part first)."""
        run = self._detach_run()
        if run is not None:
            self.port.spawn(self._let_go(run), "hibernating a parked run", self.on_task_failure)

    async def settle_run(self, run: CellRun) -> None:
        """Commit, and if the run can no longer go on, release its isolate. A rollback that
        began (or goes on) needs a rollback run of its own.

        A run that cannot go on is detached at once (JS is told nothing more) and its
        isolate goes back to the pool beside the commit of its end, not before it: the
        end's commit does not wait for the isolate's last turn (its audit) nor, when the
        pool is full, for its close on a JS thread (which held a burst's completions
        back by seconds)."""
        if self.run is run and not run.live and self.machine.rolling_back:
            # its rollback run comes next: the isolate goes back first, as it did
            self._committing += 1  # not unloaded between letting go and committing
            try:
                await self.stop_run()
            finally:
                self._committing -= 1
        elif self.run is run and not run.live:
            detached = self._detach_run()
            if detached is not None:
                self.port.spawn(
                    self._let_go(detached), "giving a finished run's isolate back",
                    self.on_task_failure,
                )  # fmt: skip
        await self.commit()
        self._roll_back_if_needed()

    def _roll_back_if_needed(self) -> None:
        if self.machine.rolling_back and self.run is None and not self.starting and not self.broken:
            self.port.request_run(self.ref, Priority.WAKE)

    async def replay(self, run: CellRun) -> None:
        """Commit, drop the run and queue a fresh one if the instance still needs it."""
        try:
            await self.commit()
        except StoreUnavailable:
            # The cell broke (`break_` dropped the run, and the port reloads the instance
            # once the store commits again): the run goes on from its rows then.
            return
        if self.run is run:
            await self.stop_run()
        if not self.broken and self.machine.status in STARTABLE:
            self.port.request_run(self.ref, Priority.WAKE)

    async def parked_run(self, run: CellRun) -> None:
        """The run is only waiting: hibernate it if its next deadline is far away."""
        next_wake = self.machine.next_wake()
        far = next_wake is None or next_wake - self.port.now() > self.port.settings.residency_ms
        if far and self.run is run:
            await self.stop_run()
        else:
            self.port.release(self)  # queued runs may take its slot

    # -- outside events ----------------------------------------------------------------------

    def alarm_now(self, done: CommitDone) -> bool:
        """A deadline came for a resident run that only has to settle its due calls (no
        rollback, no replay per step): settle them and commit, with no task; `done` is
        told how the commit went. False (nothing done) when `on_alarm` must handle it."""
        run = self.run
        if (
            run is None
            or self.starting
            or self.broken
            or self.machine.rolling_back
            or self.port.settings.replay_every_step
            or self.machine.status not in (Status.RUNNING, Status.WAITING)
        ):
            return False
        decisions = self.machine.wake(self.port.now())
        run.deliver(decisions)
        if decisions and all(run.answers_uncommitted(key, d) for key, d in decisions):
            # JS is answered at once; the wake-up's rows ride with its next commit (the
            # step after the sleep, the run's end, or the idle pass after its next turn).
            done(None)
        else:
            self.commit_soon(done)
        return True

    async def on_alarm(self) -> None:
        """A deadline came: settle due calls of the resident run, or replay."""
        if self.machine.status not in (Status.RUNNING, Status.WAITING):
            return
        run = self.run
        if self.machine.rolling_back:  # a handler's retry delay is over
            if run is not None and run.rollback_mode:
                await run.drive_rollback()
            elif run is not None:
                await self.replay(run)
            else:
                self._roll_back_if_needed()
            return
        if run is None:
            if not self.starting:
                self.port.request_run(self.ref, Priority.WAKE)
            return
        decisions = self.machine.wake(self.port.now())
        if decisions and self.port.settings.replay_every_step and self.machine.in_flight() == 0:
            await self.replay(run)
            return
        run.deliver(decisions)
        await self.commit()

    async def send_event(self, event_type: Any, payload: str) -> None:
        decisions = self.machine.send_event(event_type, payload, self.port.now())
        await self.commit()
        if self.run is not None:
            self.run.deliver(decisions)
        elif (
            self.machine.status in (Status.RUNNING, Status.WAITING)
            # Hibernated and waiting for this type: the event stays buffered and the
            # replay's waitForEvent takes it.
            and self.machine.waits_for(event_type)
            and not self.starting
        ):
            self.port.request_run(self.ref, Priority.WAKE)

    async def pause(self) -> None:
        run = self.run
        if run is not None:
            # At a turn boundary, so that JS learns of the pause before it could start
            # another attempt on its own: while pausing, no attempt starts.
            await run.at_turn_boundary(lambda: self._pause_now(run))
        else:
            self.machine.pause(self.port.now())
        await self.commit()
        if self.machine.status is Status.PAUSED:
            await self.stop_run()

    def _pause_now(self, run: CellRun) -> None:
        self.machine.pause(self.port.now())
        if self.machine.status is Status.WAITING_FOR_PAUSE and self.run is run:
            run.hold()

    async def resume(self) -> None:
        must_run = self.machine.resume(self.port.now())
        await self.commit()
        if must_run:
            await self.stop_run()  # a run left from before the pause settled, if any
            self.port.request_run(self.ref, Priority.WAKE)
        elif self.run is not None:
            self.run.release_hold()
            self.run.deliver(self.machine.wake(self.port.now()))
            await self.commit()

    async def terminate(self, *, rollback: bool = False) -> None:
        """Terminate; with `rollback` the rollback handlers run first (in a rollback run)."""
        self.machine.terminate(self.port.now(), rollback=rollback)
        await self.commit()
        await self.stop_run()
        self._roll_back_if_needed()

    async def delete(self) -> None:
        """Delete the instance for good: its run stops (also when it deletes itself from
        inside that run), its rows go in one commit, and its id is free again."""
        await self._commit(deleting=True)
        self.port.schedule(self.ref, None)
        self.port.forget(self)
        await self.stop_run()

    async def restart(self, from_: dict[str, Any] | None) -> None:
        if from_ is not None:
            await self.restore_history()
        self.machine.restart(self.port.now(), from_)
        if from_ is None:  # a new history: it comes from the version running now
            self.machine.pin_version(self.port.version)
        await self.commit()
        await self.stop_run()
        self.port.request_run(self.ref, Priority.NEW)
