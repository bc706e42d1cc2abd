"""Assembles a running Worker: config, JS threads, the Worker pool and the workflows.

Several Workers can run in one session (celld.server.session); each is one Service with its
own isolates, modules, vars and storage, and `peers` names them all. A binding to another
Worker of the session is connected here: Durable Object calls go to that Worker's objects,
workflow calls to its workflows, service calls to its isolates (`op_service`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from celld.bindings.registry import Bindings
from celld.bindings.unconnected import not_found_message, warn_unconnected
from celld.cells.clock import Clock, ManualClock, SystemClock
from celld.cells.manager import CellManager, CellSettings, WorkflowSpec
from celld.cells.tasks import TaskOwner
from celld.cluster.member import Member
from celld.isolate.host import HostError, OpHandler
from celld.isolate.isolate import Limits, ScriptError
from celld.isolate.layout import verdict
from celld.isolate.ops import isolate_ops
from celld.isolate.program import Program, build_program
from celld.isolate.runtime import object_scripts
from celld.isolate.threads import JsThreadPool
from celld.isolate.watchdog import WATCHDOG
from celld.isolate.webops import close_fetch_client
from celld.isolate.websockets import SocketHub
from celld.isolate.worker_pool import WorkerPool
from celld.objects.manager import ObjectManager
from celld.objects.migrations import migrate_state
from celld.objects.placement import Placement
from celld.project.config import ProjectConfig, WorkflowConfig
from celld.queues.broker import QueueBroker, outcome_from_js
from celld.queues.rules import Outcome
from celld.server import lifecycle_log
from celld.server.app import INTERNAL_PREFIX, build_app
from celld.server.explorer import explorer_routes
from celld.server.explorer_workers import workers_routes
from celld.server.guard import OperatorGuard
from celld.server.live_parts import live_routes
from celld.server.metrics import render_metrics
from celld.server.operator import Operator, OperatorError
from celld.server.scheduled import scheduled_routes, test_scheduled_routes
from celld.server.shape import RequestShape
from celld.server.testing import testing_routes
from celld.server.ui import ui_routes
from celld.store.base import Store, StoreUnavailable
from celld.store.choice import check_store, is_postgres, open_store

log = logging.getLogger("celld")
#: the first position of a stack ("(src/index.js:3:9)")
_FIRST_POSITION = re.compile(r"\(([^()\s]+:\d+:\d+)\)")


class WorkerLoadError(Exception):
    """The Worker's code threw as it was evaluated (top-level code)."""


ALL = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


@dataclass
class ServiceOptions:
    persist_to: Path
    js_threads: int | None = None
    worker_isolates: int | None = None
    memory_bytes: int = Limits().memory_bytes
    synchronous: str = "FULL"
    clock: Clock = field(default_factory=SystemClock)
    cells: CellSettings = field(default_factory=CellSettings.from_environment)
    #: required on operator routes when set (always set when bound beyond loopback)
    operator_token: str | None = None
    #: None or "sqlite": SQLite under persist_to; "postgresql://...": a shared database
    store: str | None = None
    #: serve /__scheduled before the Worker's routes (`celld run --test-scheduled`)
    test_scheduled: bool = False
    #: ([dev] upstream_protocol, [dev] host): what the Worker's request.url says instead
    url_rewrite: tuple[str | None, str | None] | None = None
    #: this process's place in a `celld run --workers N` cluster (celld.cluster)
    cluster: Member | None = None
    #: seconds a replaced Worker's requests get to finish before it is closed
    reload_grace_s: float = 30.0


@dataclass
class Service:
    """Everything `celld run` starts, in the order it starts it."""

    project: ProjectConfig
    options: ServiceOptions
    program: Program = field(init=False)
    threads: JsThreadPool = field(init=False)
    #: Workflow runs turn on the event loop; this thread loads their isolates (and runs
    #: those moved off the loop), so a burst of loads never queues before Worker requests.
    workflow_threads: JsThreadPool | None = field(init=False, default=None)
    pool: WorkerPool | None = field(default=None, init=False)
    store: Store | None = field(default=None, init=False)
    cells: CellManager | None = field(default=None, init=False)
    objects: ObjectManager | None = field(default=None, init=False)
    #: on a store shared by several nodes: where objects and D1 databases are placed
    placement: Placement | None = field(default=None, init=False)
    #: every WebSocket of the process (celld/isolate/websockets.py)
    sockets: SocketHub = field(default_factory=SocketHub, init=False)
    #: Per-workflow step limits beyond the config's cap (benchmarks of very long runs).
    step_limit_overrides: dict[str, int] = field(default_factory=dict, init=False)
    bindings: Bindings = field(init=False)
    #: run once the service has started / before it stops (the reload on change)
    on_start: list[Callable[[], Awaitable[None]]] = field(default_factory=list, init=False)
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list, init=False)
    #: set except while a new version's objects and workflows are being started
    _ready: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    #: previous versions of the Worker finishing their requests
    _retired: TaskOwner = field(default_factory=lambda: TaskOwner("reload"), init=False)
    #: the operator surface's list of workflows (kept in step with the config)
    operator_workflows: list[dict[str, str]] = field(default_factory=list, init=False)
    #: the workflow binding's own route into this Worker's cells (before `op_workflow`)
    _own_workflow_op: Any = field(default=None, init=False)
    #: The names of the session's Workers (this one included); empty when it runs alone.
    workers: frozenset[str] = frozenset()
    #: The session's Workers by name, filled once all of them are made.
    peers: dict[str, Service] = field(default_factory=dict)

    def running(self, worker: str | None) -> bool:
        """Whether `worker` (None: this one) runs in this session."""
        return worker is None or worker == self.project.name or worker in self.workers

    def peer(self, worker: str | None) -> Service:
        """The Service of `worker` in this session; HostError with wrangler's words if none."""
        if worker is None or worker == self.project.name:
            return self
        found = self.peers.get(worker)
        if found is None:
            raise HostError(not_found_message(worker))
        return found

    def hosted_workflows(self, project: ProjectConfig | None = None) -> list[WorkflowConfig]:
        """The workflows whose instances this Worker runs: its own, and those of Workers
        that are not running (their instances fail at start, as under wrangler dev)."""
        project = project or self.project
        return [w for w in project.workflows if not self._connected_workflow(w)]

    def _connected_workflow(self, workflow: WorkflowConfig) -> bool:
        return workflow.unconnected is not None and workflow.unconnected in self.workers

    #: the session's queues (celld/queues/): the Session hands every Worker the same
    #: broker; a Service made alone opens its own once its project sends or consumes any
    queues: QueueBroker | None = None
    #: whether this Service made `queues` (and so stops it)
    _owns_queues: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        # Bundling happens before the server listens, so a broken project fails
        # `celld run` at once with the file and line at fault; so does a store that
        # cannot serve this project's bindings.
        self.program = self._prepare(self.project)
        self._apply_migrations(self.project)
        self.bindings = self._bindings(self.project)
        self._ready.set()

    def _prepare(self, project: ProjectConfig) -> Program:
        """Check what `project` needs of this machine and bundle its Worker (raises
        ModuleError, ConfigError, NoCpuLimit with the reason)."""
        check_store(self.options.store, project.bindings)
        objects = project.bindings.objects
        # The direct calls into QuickJS are checked here, at start (a mismatch is said once
        # in the log); Durable Objects that could not be given a CPU limit are refused.
        verdict()
        if objects.bindings:
            classes = ", ".join(sorted({b.class_name for b in objects.bindings}))
            WATCHDOG.require(f"this project's Durable Objects ({classes}) cannot run")
        warn_unconnected(project, self.workers)
        return build_program(
            project.main,
            object_scripts() if objects.bindings or objects.unconnected else (),
            root=project.root,
            compatibility_flags=project.compatibility_flags,
            compatibility_date=project.compatibility_date,
            cache_dir=self.options.persist_to / "module-cache",
            tsconfig=project.tsconfig,
            jsx_factory=project.jsx_factory,
            jsx_fragment=project.jsx_fragment,
        )

    def _apply_migrations(self, project: ProjectConfig) -> None:
        objects = project.bindings.objects
        if objects.bindings or objects.migrations:
            applied = migrate_state(objects, self.options.persist_to, self.options.clock.now())
            if applied:
                log.info("applied Durable Object migrations: %s", ", ".join(applied))

    def _bindings(self, project: ProjectConfig) -> Bindings:
        return Bindings(
            project.bindings,
            self.options.persist_to,
            self.options.clock.now,
            synchronous=self.options.synchronous,
            shared=self.options.store if is_postgres(self.options.store) else None,
        )

    def env_message(
        self, project: ProjectConfig | None = None, bindings: Bindings | None = None
    ) -> dict[str, object]:
        """What js/ needs to build `env` (of `project` and `bindings`, else the running ones)."""
        project = project or self.project
        bindings = bindings or self.bindings

        def missing(worker: str | None) -> dict[str, str]:
            return {} if self.running(worker) else {"missing": not_found_message(worker or "")}

        workflows = [
            {"binding": w.binding, "name": w.name} | missing(w.unconnected)
            for w in project.workflows
        ]
        # A namespace's ids are keyed by "<worker>-<class>", as under `wrangler dev`.
        objects = [
            {
                "binding": b.binding,
                "cls": b.class_name,
                "key": f"{b.script_name or project.name}-{b.class_name}",
            }
            | ({"worker": b.script_name} if b.script_name else {})
            | missing(b.script_name)
            for b in (
                *project.bindings.objects.bindings,
                *project.bindings.objects.unconnected,
            )
        ]
        services = [
            {"binding": s.binding, "service": s.service, "entrypoint": s.entrypoint}
            | missing(s.service)
            for s in project.bindings.services
        ]
        return {
            "vars": dict(project.vars),
            "workflows": workflows,
            "durable_objects": objects,
            "services": services,
            **bindings.env_message(),
        }

    async def start(self) -> None:
        self.options.persist_to.mkdir(parents=True, exist_ok=True)
        self.threads = JsThreadPool(self.options.js_threads)
        await self._place(self.project, self.bindings)
        await self.bindings.open()
        await self._open_queues(self.project)
        ops = self._ops(self.project, self.bindings)
        pool = await self._start_pool(self.project, self.program, self.bindings, ops)
        await self._start_parts(ops)
        self.pool = pool
        if self.queues is not None and self.queues.opened:
            for consumer in self.project.bindings.queues.consumers:
                self.queues.consume(consumer, self._deliver_batch, self.project.name)
            self.queues.start()
            await self.queues.claim()
        if self.options.cluster is not None:
            await self.options.cluster.start(self)
        for hook in self.on_start:
            await hook()

    async def _place(self, project: ProjectConfig, bindings: Bindings) -> None:
        """On a shared store, Durable Objects and D1 databases are placed on one node at a
        time by the store's node membership (celld/objects/placement.py): the store opens
        here, before the bindings, whether or not the project has workflows."""
        bound = project.bindings
        if not is_postgres(self.options.store) or not (bound.objects.bindings or bound.d1):
            return
        await self._open_shared_store()
        from celld.store.postgres import PostgresStore  # asyncpg: only with PostgreSQL

        if self.placement is None:
            assert isinstance(self.store, PostgresStore)
            self.placement = Placement(self.store)
        bindings.place_d1(self.placement)

    async def _open_shared_store(self) -> None:
        """The node's PostgreSQL store, opened once (for placement, queues, workflows)."""
        if self.store is None:
            self.store = open_store(
                self.options.store,
                self.options.persist_to,
                self.options.synchronous,
                placement=True,
            )
            await self.store.open()
            if lifecycle_log.enabled():
                self.store.on_committed = lifecycle_log.observe

    async def _open_queues(self, project: ProjectConfig) -> None:
        """The queue broker, open once a version of the project sends or consumes a queue."""
        if project.bindings.queues.empty:
            return
        if self.queues is None:
            self.queues = QueueBroker(
                self.options.persist_to, self.options.clock, synchronous=self.options.synchronous
            )
            self._owns_queues = True
            if self.options.cluster is not None:
                self.options.cluster.place_queues(self.queues)
        if is_postgres(self.options.store) and not self.queues.opened:
            # several nodes: messages in the shared database, each queue consumed by one
            await self._open_shared_store()
            from celld.queues.pgqueues import place_on_nodes
            from celld.store.postgres import PostgresStore

            assert isinstance(self.store, PostgresStore)
            place_on_nodes(self.queues, self.store)
        await self.queues.open()

    async def _deliver_batch(
        self, queue: str, messages: list[dict[str, object]], metadata: dict[str, object]
    ) -> Outcome:
        assert self.pool is not None, "celld is not started"
        return outcome_from_js(await self.pool.queue(queue, messages, metadata))

    def _limits(self, project: ProjectConfig) -> Limits:
        return Limits(
            cpu_ms=project.cpu_ms or Limits().cpu_ms, memory_bytes=self.options.memory_bytes
        )

    def _ops(self, project: ProjectConfig, bindings: Bindings) -> dict[str, OpHandler]:
        """The host operations of every isolate. Calls into Durable Objects and workflows
        go through the service to the ones running at the time of the call, so a request
        that began on the previous version of the Worker reaches the new ones."""
        ops = isolate_ops()
        ops.update(bindings.ops())
        ops["svc"] = self.op_service
        if self.queues is not None and not project.bindings.queues.empty:
            ops["queue"] = self.queues.op_queue
        if project.bindings.objects.bindings or project.bindings.objects.unconnected:
            ops["do"] = self.op_do
        if project.workflows:
            ops["wf.binding"] = self.op_workflow
        if self.options.cluster is not None:
            # objects and D1 run in their owner
            self.options.cluster.route_bindings(ops, project.name)
        return ops

    async def _start_pool(
        self,
        project: ProjectConfig,
        program: Program,
        bindings: Bindings,
        ops: dict[str, OpHandler],
    ) -> WorkerPool:
        """The Worker's isolates, loaded (a Worker that throws as it loads raises here)."""
        pool = WorkerPool(
            program,
            self.threads,
            ops,
            self.env_message(project, bindings),
            size=self.options.worker_isolates,
            limits=self._limits(project),
            sockets=self.sockets,
        )
        try:
            await pool.start()
        except ScriptError as error:
            await pool.close()
            # The Worker threw as it loaded: say where in its own files (file:line:col).
            detail = program.lines.rewrite(error.detail)
            where = _FIRST_POSITION.search(detail)
            raise WorkerLoadError(
                f"{where.group(1) + ': ' if where else ''}the Worker threw while loading: {detail}"
            ) from None
        except BaseException:
            await pool.close()
            raise
        return pool

    async def _start_parts(self, ops: dict[str, OpHandler]) -> None:
        """Start the Durable Objects and workflows of `self.program` (at start, and again
        for each new version of the Worker, see `replace`)."""
        limits = self._limits(self.project)
        self.objects = self.cells = self._own_workflow_op = None
        if self.project.bindings.objects.bindings:
            self.objects = ObjectManager(
                self.project.bindings.objects,
                self.options.persist_to,
                self.options.clock,
                self.threads,
                self.program,
                self.env_message(),
                limits=limits,
                synchronous=self.options.synchronous,
                sockets=self.sockets,
                placement=self.placement,
            )
            self.objects.ops = ops  # objects may call objects and drive workflows
            if self.options.cluster is not None:
                self.objects.owns = partial(  # alarms: the owner's
                    self.options.cluster.owns_object, self.project.name
                )
        hosted = self.hosted_workflows()
        if hosted:
            cluster = self.options.cluster
            if self.store is None:
                self.store = open_store(
                    self.options.store,
                    cluster.store_dir(self.options.persist_to)
                    if cluster
                    else self.options.persist_to,
                    self.options.synchronous,
                )
                await self.store.open()
                if lifecycle_log.enabled():
                    self.store.on_committed = lifecycle_log.observe
            specs = {
                w.name: WorkflowSpec(
                    w.name,
                    w.binding,
                    w.class_name,
                    self.step_limit_overrides.get(w.name, w.step_limit),
                    w.schedules if cluster is None or cluster.runs_schedules else (),
                )
                for w in hosted
            }
            cell_threads = self.threads
            if self.options.cells.inline_turns:
                if self.workflow_threads is None:
                    self.workflow_threads = JsThreadPool(1, name="celld-wf")
                cell_threads = self.workflow_threads
            self.cells = CellManager(
                specs,
                self.store,
                self.options.clock,
                cell_threads,
                self.program,
                ops,
                self.env_message(),
                limits=limits,
                settings=self.options.cells,
            )
            if cluster is not None:
                # binding calls reach their instance's owner
                cluster.route(self.cells, self.project.name)
            self._own_workflow_op = self.cells.ops["wf.binding"]
            # Workflow steps call other Workers' workflows through the same route.
            self.cells.ops["wf.binding"] = self.op_workflow
        if self.objects is not None:
            await self.objects.start()
        if self.cells is not None:
            await self.cells.start()

    async def op_do(self, message: dict[str, Any]) -> dict[str, Any]:
        """A Durable Object call from an isolate of this Worker, to the Worker that hosts
        the class (`worker`: another Worker of the session). While a Worker's objects are
        replaced (reload on change), calls wait for the new ones."""
        target = self.peer(message.pop("worker", None))
        await target._ready.wait()
        if target.objects is None:
            raise HostError(
                f"celld: Worker {target.project.name!r} binds no Durable Object class "
                f"{message.get('cls')!r}",
                "TypeError",
            )
        return await target.objects.op_do(message)

    def op_workflow(self, message: dict[str, Any]) -> Awaitable[Any]:
        """A workflow binding call: to the Worker that runs the workflow. A call to this
        Worker's own workflows once it is ready goes straight to them, so what they answer
        at once (a future already done: `get` and `status` of an instance in memory) is
        posted back without a task of its own."""
        name = message.get("workflow")
        for w in self.project.workflows:
            if w.name == name and self._connected_workflow(w):
                return self._op_peer_workflow(w.unconnected, message)
        if self._ready.is_set() and self.cells is not None and self._own_workflow_op is not None:
            return self._own_workflow_op(message)  # type: ignore[no-any-return]
        return self._op_own_workflow(message)

    async def _op_peer_workflow(self, worker: str | None, message: dict[str, Any]) -> Any:
        target = self.peer(worker)
        await target._ready.wait()
        if target.cells is None:
            raise HostError(f"celld: Worker {target.project.name!r} has no workflows")
        return await target.cells.ops["wf.binding"](message)

    async def _op_own_workflow(self, message: dict[str, Any]) -> Any:
        name = message.get("workflow")
        await self._ready.wait()
        if self.cells is None or self._own_workflow_op is None:
            raise HostError(f"celld: no workflow {name!r} is bound", "TypeError")
        return await self._own_workflow_op(message)

    async def op_service(self, message: dict[str, Any]) -> dict[str, Any]:
        """A service binding's fetch or RPC call, served by an isolate of its Worker."""
        target = self.peer(message.get("service"))
        if target.pool is None:
            raise HostError(f"Worker {target.project.name!r} is still starting; retry")
        return await target.pool.call_entrypoint(
            {k: v for k, v in message.items() if k not in ("op", "t", "service")}
        )

    async def replace(self, project: ProjectConfig) -> bool:
        """Serve a new version of the project (its config, vars and code) in place of the
        one running, as a restart would but without one. The new Worker is bundled and
        loaded first: an error raises here, with the old version serving on. Then Durable
        Objects and workflows stop and start again on the new code: objects keep their
        storage; unfinished instances go on from the store, checked against the version
        they started on, as after a restart. Requests in flight finish on the old Worker,
        which answers new ones until the new one is ready. False (and nothing replaced)
        when the project and its bundle are those running."""
        program = await asyncio.to_thread(self._prepare, project)
        if project == self.project and program.version == self.program.version:
            return False
        await self._open_queues(project)
        bindings = self._bindings(project)
        await self._place(project, bindings)
        await bindings.open()
        ops = self._ops(project, bindings)
        try:
            pool = await self._start_pool(project, program, bindings, ops)
        except BaseException:
            await bindings.close()
            raise
        old = (self.project, self.program, self.bindings, self.pool, self.cells, self.objects)
        self._ready.clear()
        try:
            if self.cells is not None:
                await self.cells.stop()
            if self.objects is not None:
                await self.objects.stop()
            try:
                self._apply_migrations(project)
                self.project, self.program, self.bindings = project, program, bindings
                await self._start_parts(ops)
            except BaseException:
                # The old version's objects and workflows come back (they were stopped,
                # not closed); its Worker never stopped serving.
                self.project, self.program, self.bindings = old[:3]
                await self._start_parts(self._ops(self.project, self.bindings))
                self._retired.spawn(self._retire(pool, bindings), "closing the new Worker")
                raise
        finally:
            self._ready.set()
        self.pool = pool
        self.operator_workflows[:] = self._workflow_list()
        self._retired.spawn(self._retire(old[3], old[2]), "closing the previous Worker")
        return True

    async def _retire(self, pool: WorkerPool | None, bindings: Bindings) -> None:
        """Close a replaced Worker once its requests are done (or after the grace)."""
        if pool is not None:
            await pool.drained(self.options.reload_grace_s)
            await pool.close()
        await bindings.close()

    def stopping(self) -> None:
        """celld was told to stop: the WebSockets the shutdown closes wake no object."""
        self.sockets.stopping = True

    async def stop(self) -> None:
        # batches in flight are delivered again next start
        if self.queues is not None and self._owns_queues:
            await self.queues.stop()
        elif self.queues is not None:
            await self.queues.release([c.queue for c in self.project.bindings.queues.consumers])
        self.stopping()
        await self.sockets.close_all(1012, "service restart")
        if self.options.cluster is not None:
            await self.options.cluster.stop(self)
        for hook in self.on_stop:
            await hook()
        await self._retired.close()
        if self.pool is not None:
            await self.pool.close()
        if self.cells is not None:
            await self.cells.stop()
        if self.objects is not None:
            await self.objects.stop()
        if self.store is not None:
            await self.store.close()
        await self.bindings.close()
        await close_fetch_client()
        self.threads.shutdown()
        if self.workflow_threads is not None:
            self.workflow_threads.shutdown()

    def app(
        self,
        startup: Callable[[], Awaitable[None]] | None = None,
        shutdown: Callable[[], Awaitable[None]] | None = None,
        operator: Operator | None = None,
    ) -> Starlette:
        """The HTTP app serving this Worker; `startup`/`shutdown` start and stop more than
        this Worker, and `operator` shows more workflows than its own (a session of
        several)."""

        def get_pool() -> WorkerPool:
            assert self.pool is not None, "celld is not started"
            return self.pool

        operator = operator or self.operator()
        now = self.options.clock.now
        app = build_app(
            get_pool,
            startup=startup or self.start,
            shutdown=shutdown or self.stop,
            metrics=lambda: render_metrics(self),
            assets=lambda: self.bindings.assets,
            before_worker=(
                test_scheduled_routes(get_pool, now) if self.options.test_scheduled else None
            ),
            url_rewrite=self.options.url_rewrite,
            sockets=lambda: self.sockets,
            internal_routes=[
                *scheduled_routes(get_pool, now),
                *self._clock_routes(),
                *self._instance_routes(operator),
                *workers_routes(lambda: [p.project for p in self.peers.values()] or [self.project]),
                *explorer_routes(operator),
                *live_routes(lambda: self.queues, self.socket_hubs),
                *testing_routes(operator),
                *ui_routes(),
                Route(f"{INTERNAL_PREFIX}/{{rest:path}}", self._unknown_internal, methods=ALL),
            ],
        )
        app.add_middleware(OperatorGuard, token=self.options.operator_token)
        app.add_middleware(RequestShape)  # outermost: a Host no URL can hold gets 400
        return app

    def socket_hubs(self) -> list[tuple[str, SocketHub]]:
        """The WebSockets of every Worker of the session, by Worker name."""
        services = list(self.peers.values()) or [self]
        return [(service.project.name, service.sockets) for service in services]

    @staticmethod
    async def _unknown_internal(request: Request) -> Response:
        """celld's own prefix never reaches the Worker: unknown paths there are 404s."""
        message = f"celld has no route {request.method} {request.url.path}"
        return JSONResponse({"error": message}, status_code=404)

    def operator(self) -> Operator:
        """The operator surface's view of this service (its parts appear at start)."""
        self.operator_workflows[:] = self._workflow_list()
        return Operator(lambda: (self.cells, self.store), self.operator_workflows)

    def _workflow_list(self) -> list[dict[str, str]]:
        return [
            {
                "name": w.name,
                "binding": w.binding,
                "class_name": w.class_name,
                "script_name": w.script_name or self.project.name,
            }
            for w in self.hosted_workflows()
        ]

    @staticmethod
    def _instance_routes(operator: Operator) -> list[Route]:
        """GET /cdn-cgi/celld/workflows/{workflow}/instances/{id}: one instance's steps
        (from the cells of the Worker that runs the workflow)."""

        async def describe(request: Request) -> Response:
            workflow = request.path_params["workflow"]
            try:
                cells = operator.cells(workflow)
            except OperatorError as error:
                return JSONResponse({"error": error.message}, status_code=error.status)
            try:
                found = await cells.describe(workflow, request.path_params["instance"])
            except StoreUnavailable as error:
                return JSONResponse(
                    {"error": f"the store is unavailable, retry later: {error}"}, status_code=503
                )
            if found is None:
                return JSONResponse({"error": "instance not found"}, status_code=404)
            return JSONResponse(found)

        path = f"{INTERNAL_PREFIX}/workflows/{{workflow}}/instances/{{instance:path}}"
        return [Route(path, describe, methods=["GET"])]

    def _clock_routes(self) -> list[Route]:
        """With a manual clock (tests), POST /cdn-cgi/celld/clock?advance=MS moves it."""
        clock = self.options.clock
        if not isinstance(clock, ManualClock):

            async def no_clock(request: Request) -> Response:
                message = "this celld has no test clock: start it with CELLD_TEST_CLOCK=manual"
                return JSONResponse({"error": message}, status_code=404)

            return [Route(f"{INTERNAL_PREFIX}/clock", no_clock, methods=["GET", "POST"])]

        # Each node has a clock of its own: on a shared store the answer says so, since
        # moving one node's clock leaves the instances and schedules of the others as they are.
        scope: dict[str, str] = {"scope": "node"}
        if is_postgres(self.options.store):
            scope["note"] = (
                "this node's clock only: the other nodes on the store keep their own; move "
                "each node's clock to move the cluster's"
            )

        async def move_clock(request: Request) -> Response:
            advance = int(request.query_params.get("advance", "0"))
            clock.advance(advance)
            await asyncio.sleep(0)
            return JSONResponse({"now": clock.now(), **scope})

        async def read_clock(request: Request) -> Response:
            return JSONResponse({"now": clock.now(), **scope})

        return [
            Route(f"{INTERNAL_PREFIX}/clock", move_clock, methods=["POST"]),
            Route(f"{INTERNAL_PREFIX}/clock", read_clock, methods=["GET"]),
        ]
