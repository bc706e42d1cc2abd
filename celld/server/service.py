"""Assembles a running Worker: config, JS threads, the Worker pool and the workflows.

Several Workers can run in one session (celld.server.session); each is one Service with its
own isolates, modules, vars and storage, and `peers` names them all. A binding to another
Worker of the session is connected here: Durable Object calls go to that Worker's objects,
workflow calls to its workflows, service calls to its isolates (`op_service`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
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
from celld.isolate.host import HostError
from celld.isolate.isolate import Limits
from celld.isolate.layout import verdict
from celld.isolate.ops import isolate_ops
from celld.isolate.program import Program, build_program
from celld.isolate.runtime import object_scripts
from celld.isolate.threads import JsThreadPool
from celld.isolate.watchdog import WATCHDOG
from celld.isolate.webops import close_fetch_client
from celld.isolate.worker_pool import WorkerPool
from celld.objects.manager import ObjectManager
from celld.objects.migrations import migrate_state
from celld.project.config import ProjectConfig, WorkflowConfig
from celld.server import lifecycle_log
from celld.server.app import INTERNAL_PREFIX, build_app
from celld.server.explorer import explorer_routes
from celld.server.explorer_workers import workers_routes
from celld.server.guard import OperatorGuard
from celld.server.metrics import render_metrics
from celld.server.operator import Operator, OperatorError
from celld.server.scheduled import scheduled_routes, test_scheduled_routes
from celld.server.shape import RequestShape
from celld.server.testing import testing_routes
from celld.server.ui import ui_routes
from celld.store.base import Store, StoreUnavailable
from celld.store.choice import check_store, open_store

log = logging.getLogger("celld")
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
    #: Per-workflow step limits beyond the config's cap (benchmarks of very long runs).
    step_limit_overrides: dict[str, int] = field(default_factory=dict, init=False)
    bindings: Bindings = field(init=False)
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

    def hosted_workflows(self) -> list[WorkflowConfig]:
        """The workflows whose instances this Worker runs: its own, and those of Workers
        that are not running (their instances fail at start, as under wrangler dev)."""
        return [w for w in self.project.workflows if not self._connected_workflow(w)]

    def _connected_workflow(self, workflow: WorkflowConfig) -> bool:
        return workflow.unconnected is not None and workflow.unconnected in self.workers

    def __post_init__(self) -> None:
        # Bundling happens before the server listens, so a broken project fails
        # `celld run` at once with the file and line at fault; so does a store that
        # cannot serve this project's bindings.
        check_store(self.options.store, self.project.bindings)
        objects = self.project.bindings.objects
        # The direct calls into QuickJS are checked here, at start (a mismatch is said once
        # in the log); Durable Objects that could not be given a CPU limit are refused.
        verdict()
        if objects.bindings:
            classes = ", ".join(sorted({b.class_name for b in objects.bindings}))
            WATCHDOG.require(f"this project's Durable Objects ({classes}) cannot run")
        warn_unconnected(self.project, self.workers)
        self.program = build_program(
            self.project.main,
            object_scripts() if objects.bindings or objects.unconnected else (),
            root=self.project.root,
            compatibility_flags=self.project.compatibility_flags,
            cache_dir=self.options.persist_to / "module-cache",
            tsconfig=self.project.tsconfig,
            jsx_factory=self.project.jsx_factory,
            jsx_fragment=self.project.jsx_fragment,
        )
        if objects.bindings or objects.migrations:
            applied = migrate_state(objects, self.options.persist_to, self.options.clock.now())
            if applied:
                log.info("applied Durable Object migrations: %s", ", ".join(applied))
        self.bindings = Bindings(
            self.project.bindings,
            self.options.persist_to,
            self.options.clock.now,
            synchronous=self.options.synchronous,
        )

    def env_message(self) -> dict[str, object]:
        def missing(worker: str | None) -> dict[str, str]:
            return {} if self.running(worker) else {"missing": not_found_message(worker or "")}

        workflows = [
            {"binding": w.binding, "name": w.name} | missing(w.unconnected)
            for w in self.project.workflows
        ]
        # A namespace's ids are keyed by "<worker>-<class>", as under `wrangler dev`.
        objects = [
            {
                "binding": b.binding,
                "cls": b.class_name,
                "key": f"{b.script_name or self.project.name}-{b.class_name}",
            }
            | ({"worker": b.script_name} if b.script_name else {})
            | missing(b.script_name)
            for b in (
                *self.project.bindings.objects.bindings,
                *self.project.bindings.objects.unconnected,
            )
        ]
        services = [
            {"binding": s.binding, "service": s.service, "entrypoint": s.entrypoint}
            | missing(s.service)
            for s in self.project.bindings.services
        ]
        return {
            "vars": dict(self.project.vars),
            "workflows": workflows,
            "durable_objects": objects,
            "services": services,
            **self.bindings.env_message(),
        }

    async def op_do(self, message: dict[str, Any]) -> dict[str, Any]:
        """A Durable Object call from an isolate of this Worker, to the Worker that hosts
        the class (`worker`: another Worker of the session)."""
        target = self.peer(message.pop("worker", None))
        if target.objects is None:
            raise HostError(
                f"celld: Worker {target.project.name!r} binds no Durable Object class "
                f"{message.get('cls')!r}",
                "TypeError",
            )
        return await target.objects.op_do(message)

    async def op_workflow(self, message: dict[str, Any]) -> Any:
        """A workflow binding call: to the Worker that runs the workflow."""
        name = message.get("workflow")
        for w in self.project.workflows:
            if w.name == name and self._connected_workflow(w):
                target = self.peer(w.unconnected)
                if target.cells is None:
                    raise HostError(f"celld: Worker {target.project.name!r} has no workflows")
                return await target.cells.ops["wf.binding"](message)
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

    async def start(self) -> None:
        self.options.persist_to.mkdir(parents=True, exist_ok=True)
        self.threads = JsThreadPool(self.options.js_threads)
        limits = Limits(
            cpu_ms=self.project.cpu_ms or Limits().cpu_ms,
            memory_bytes=self.options.memory_bytes,
        )
        ops = isolate_ops()
        await self.bindings.open()
        ops.update(self.bindings.ops())
        ops["svc"] = self.op_service
        if self.project.bindings.objects.bindings or self.project.bindings.objects.unconnected:
            ops["do"] = self.op_do
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
            )
        hosted = self.hosted_workflows()
        if hosted:
            self.store = open_store(
                self.options.store, self.options.persist_to, self.options.synchronous
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
                    w.schedules,
                )
                for w in hosted
            }
            cell_threads = self.threads
            if self.options.cells.inline_turns:
                self.workflow_threads = cell_threads = JsThreadPool(1, name="celld-wf")
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
            self._own_workflow_op = self.cells.ops["wf.binding"]
            # Workflow steps call other Workers' workflows through the same route.
            self.cells.ops["wf.binding"] = self.op_workflow
            ops = self.cells.ops
        elif self.project.workflows:
            ops["wf.binding"] = self.op_workflow
        self.pool = WorkerPool(
            self.program,
            self.threads,
            ops,
            self.env_message(),
            size=self.options.worker_isolates,
            limits=limits,
        )
        await self.pool.start()
        if self.objects is not None:
            self.objects.ops = ops  # objects may call objects and drive workflows
            await self.objects.start()
        if self.cells is not None:
            await self.cells.start()

    async def stop(self) -> None:
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
            assets=self.bindings.assets,
            before_worker=(
                test_scheduled_routes(get_pool, now) if self.options.test_scheduled else None
            ),
            url_rewrite=self.options.url_rewrite,
            internal_routes=[
                *scheduled_routes(get_pool, now),
                *self._clock_routes(),
                *self._instance_routes(operator),
                *workers_routes(lambda: [p.project for p in self.peers.values()] or [self.project]),
                *explorer_routes(operator),
                *testing_routes(operator),
                *ui_routes(),
                Route(f"{INTERNAL_PREFIX}/{{rest:path}}", self._unknown_internal, methods=ALL),
            ],
        )
        app.add_middleware(OperatorGuard, token=self.options.operator_token)
        app.add_middleware(RequestShape)  # outermost: a Host no URL can hold gets 400
        return app

    @staticmethod
    async def _unknown_internal(request: Request) -> Response:
        """celld's own prefix never reaches the Worker: unknown paths there are 404s."""
        message = f"celld has no route {request.method} {request.url.path}"
        return JSONResponse({"error": message}, status_code=404)

    def operator(self) -> Operator:
        """The operator surface's view of this service (its parts appear at start)."""
        workflows = [
            {
                "name": w.name,
                "binding": w.binding,
                "class_name": w.class_name,
                "script_name": w.script_name or self.project.name,
            }
            for w in self.hosted_workflows()
        ]
        return Operator(lambda: (self.cells, self.store), workflows)

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

        async def move_clock(request: Request) -> Response:
            advance = int(request.query_params.get("advance", "0"))
            clock.advance(advance)
            await asyncio.sleep(0)
            return JSONResponse({"now": clock.now()})

        async def read_clock(request: Request) -> Response:
            return JSONResponse({"now": clock.now()})

        return [
            Route(f"{INTERNAL_PREFIX}/clock", move_clock, methods=["POST"]),
            Route(f"{INTERNAL_PREFIX}/clock", read_clock, methods=["GET"]),
        ]
