"""Assembles a running celld: config, JS threads, the Worker pool and the workflows."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from celld.bindings.registry import Bindings
from celld.bindings.unconnected import not_found_message, warn_unconnected
from celld.cells.clock import Clock, ManualClock, SystemClock
from celld.cells.manager import CellManager, CellSettings, WorkflowSpec
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
from celld.project.config import ProjectConfig
from celld.queues.broker import QueueBroker, outcome_from_js
from celld.queues.rules import Outcome
from celld.server import lifecycle_log
from celld.server.app import INTERNAL_PREFIX, build_app
from celld.server.explorer import explorer_routes
from celld.server.guard import OperatorGuard
from celld.server.metrics import render_metrics
from celld.server.operator import Operator
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
    #: the session's queues (celld/queues/), when the project sends or consumes any
    queues: QueueBroker | None = field(default=None, init=False)

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
        warn_unconnected(self.project)
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
        workflows = [
            {"binding": w.binding, "name": w.name}
            | ({"missing": not_found_message(w.unconnected)} if w.unconnected else {})
            for w in self.project.workflows
        ]
        # A namespace's ids are keyed by "<worker>-<class>", as under `wrangler dev`.
        objects = [
            {
                "binding": b.binding,
                "cls": b.class_name,
                "key": f"{b.script_name or self.project.name}-{b.class_name}",
            }
            | ({"missing": not_found_message(b.script_name)} if b.script_name else {})
            for b in (
                *self.project.bindings.objects.bindings,
                *self.project.bindings.objects.unconnected,
            )
        ]
        return {
            "vars": dict(self.project.vars),
            "workflows": workflows,
            "durable_objects": objects,
            **self.bindings.env_message(),
        }

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
        if not self.project.bindings.queues.empty:
            self.queues = QueueBroker(
                self.options.persist_to, self.options.clock, synchronous=self.options.synchronous
            )
            await self.queues.open()
            ops["queue"] = self.queues.op_queue
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
            # Before the cells take their copy: workflow steps may call objects too.
            ops["do"] = self.objects.op_do
        if self.project.workflows:
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
                for w in self.project.workflows
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
            ops = self.cells.ops
        self.pool = WorkerPool(
            self.program,
            self.threads,
            ops,
            self.env_message(),
            size=self.options.worker_isolates,
            limits=limits,
        )
        await self.pool.start()
        if self.queues is not None:
            for consumer in self.project.bindings.queues.consumers:
                self.queues.consume(consumer, self._deliver_batch)
            self.queues.start()
        if self.objects is not None:
            self.objects.ops = ops  # objects may call objects and drive workflows
            await self.objects.start()
        if self.cells is not None:
            await self.cells.start()

    async def _deliver_batch(
        self, queue: str, messages: list[dict[str, object]], metadata: dict[str, object]
    ) -> Outcome:
        assert self.pool is not None, "celld is not started"
        return outcome_from_js(await self.pool.queue(queue, messages, metadata))

    async def stop(self) -> None:
        if self.queues is not None:
            await self.queues.stop()  # batches in flight are delivered again next start
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

    def app(self) -> Starlette:
        def get_pool() -> WorkerPool:
            assert self.pool is not None, "celld is not started"
            return self.pool

        operator = self.operator()
        now = self.options.clock.now
        app = build_app(
            get_pool,
            startup=self.start,
            shutdown=self.stop,
            metrics=lambda: render_metrics(self),
            assets=self.bindings.assets,
            before_worker=(
                test_scheduled_routes(get_pool, now) if self.options.test_scheduled else None
            ),
            url_rewrite=self.options.url_rewrite,
            internal_routes=[
                *scheduled_routes(get_pool, now),
                *self._clock_routes(),
                *self._instance_routes(),
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
            for w in self.project.workflows
        ]
        return Operator(lambda: (self.cells, self.store), workflows)

    def _instance_routes(self) -> list[Route]:
        """GET /cdn-cgi/celld/workflows/{workflow}/instances/{id}: one instance's steps."""

        async def describe(request: Request) -> Response:
            if self.cells is None:
                return JSONResponse({"error": "this project has no workflows"}, status_code=404)
            try:
                found = await self.cells.describe(
                    request.path_params["workflow"], request.path_params["instance"]
                )
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
