"""Several Workers in one `celld run`, as ``wrangler dev -c a/wrangler.toml -c b/...`` runs them.

The first Worker is the one served on the port; the others are reached through bindings
(service bindings, Durable Objects and workflows with ``script_name``). Each Worker is a
:class:`Service` with its own isolates, modules, vars and storage: the first keeps the state
folder it would have alone, each other one gets ``workers/<name>`` inside its own (or inside
``--persist-to`` when given), so adding a Worker to a session moves no one's data.

Queues are the session's, not a Worker's: one broker (celld/queues/broker.py), its file in
the first Worker's state folder, serves every Worker's producers and consumers, so a message
one Worker sends reaches the Worker that consumes its queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from celld.project.config import ProjectConfig
from celld.queues.broker import QueueBroker
from celld.server.entrypoints import BindingRefused, export_refusals, namespace_refusals
from celld.server.operator import Operator
from celld.server.service import Service, ServiceOptions

STATE_FOLDER = ".celld"


def state_folder(project: ProjectConfig, index: int, persist_to: Path | None) -> Path:
    """Where Worker number `index` of a session keeps its state."""
    base = (persist_to or project.root / STATE_FOLDER).resolve()
    return base if index == 0 else base / "workers" / project.name


@dataclass
class Session:
    """The Workers of one `celld run`; `services[0]` is served on the port."""

    services: list[Service]
    #: the queues of every Worker (opened by the first Worker that uses one)
    queues: QueueBroker
    #: why the session refused to start (shown instead of a traceback), once it did
    refused: str | None = field(default=None, init=False)

    @classmethod
    def create(
        cls, projects: Sequence[ProjectConfig], options: ServiceOptions, persist_to: Path | None
    ) -> Session:
        """Make every Worker's Service (bundling each; a broken one fails here). Two
        Workers of one name are refused: bindings could not tell them apart; so is a
        Durable Object binding to a running Worker that defines no such class
        (BindingRefused)."""
        seen: dict[str, Path] = {}
        for project in projects:
            if project.name in seen:
                raise ValueError(
                    f"two Workers are named {project.name!r} ({seen[project.name]} and "
                    f"{project.path}): each Worker of a session needs its own name"
                )
            seen[project.name] = project.path
        refused = namespace_refusals(projects)
        if refused:
            raise BindingRefused("\n".join(refused))
        names = frozenset(seen)
        peers: dict[str, Service] = {}
        services = []
        queues = QueueBroker(options.persist_to, options.clock, synchronous=options.synchronous)
        if options.cluster is not None:
            options.cluster.place_queues(queues)  # one consumer per queue in the cluster
        for index, project in enumerate(projects):
            # the served Worker's folder is the one `options` name (celld run chose it)
            own = (
                options
                if index == 0
                else replace(options, persist_to=state_folder(project, index, persist_to))
            )
            service = Service(
                project,
                own,
                workers=names if len(projects) > 1 else frozenset(),
                queues=queues,
            )
            service.peers = peers
            peers[project.name] = service
            services.append(service)
        return cls(services, queues)

    @property
    def primary(self) -> Service:
        return self.services[0]

    async def start(self) -> None:
        """Start every Worker, then check what their bindings need them to export; a
        missing export stops them all and raises BindingRefused."""
        # The others first: the served Worker's resumed instances may call them at once.
        for service in reversed(self.services):
            await service.start()
        by_name = {service.project.name: service for service in self.services}

        async def exports_of(worker: str) -> frozenset[str]:
            pool = by_name[worker].pool
            assert pool is not None, "started above"
            return await pool.export_names()

        refused = await export_refusals([s.project for s in self.services], exports_of)
        if refused:
            self.refused = "\n".join(refused)
            await self.stop()
            raise BindingRefused(self.refused)

    async def stop(self) -> None:
        for service in self.services:
            await service.stop()  # each takes its consumers back from the broker
        await self.queues.stop()

    def stopping(self) -> None:
        """celld was told to stop (see Service.stopping)."""
        for service in self.services:
            service.stopping()

    def app(self) -> ASGIApp:
        """The served Worker's app, starting and stopping the whole session; its operator
        routes (explorer API, page, CLI) show the workflows of every Worker."""
        operator = Operator.combined([service.operator() for service in self.services])
        app = self.primary.app(startup=self.start, shutdown=self.stop, operator=operator)
        return _PlainRefusal(app, self)


class _PlainRefusal:
    """ASGI wrapper: a session that refuses to start says why in its own words. (The
    server reports a failed startup with the traceback of the error, which for a binding
    the user must fix says nothing more than the message.)"""

    def __init__(self, app: ASGIApp, session: Session) -> None:
        self.app = app
        self.session = session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def plain(message: Message) -> None:
            refused = self.session.refused
            if message["type"] == "lifespan.startup.failed" and refused is not None:
                message = {**message, "message": refused}
            await send(message)

        await self.app(scope, receive, plain)
