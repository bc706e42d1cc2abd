"""Several Workers in one `celld run`, as ``wrangler dev -c a/wrangler.toml -c b/...`` runs them.

The first Worker is the one served on the port; the others are reached through bindings
(service bindings, Durable Objects and workflows with ``script_name``). Each Worker is a
:class:`Service` with its own isolates, modules, vars and storage: the first keeps the state
folder it would have alone, each other one gets ``workers/<name>`` inside its own (or inside
``--persist-to`` when given), so adding a Worker to a session moves no one's data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from starlette.applications import Starlette

from celld.project.config import ProjectConfig
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

    @classmethod
    def create(
        cls, projects: Sequence[ProjectConfig], options: ServiceOptions, persist_to: Path | None
    ) -> Session:
        """Make every Worker's Service (bundling each; a broken one fails here). Two
        Workers of one name are refused: bindings could not tell them apart."""
        seen: dict[str, Path] = {}
        for project in projects:
            if project.name in seen:
                raise ValueError(
                    f"two Workers are named {project.name!r} ({seen[project.name]} and "
                    f"{project.path}): each Worker of a session needs its own name"
                )
            seen[project.name] = project.path
        names = frozenset(seen)
        peers: dict[str, Service] = {}
        services = []
        for index, project in enumerate(projects):
            own = replace(options, persist_to=state_folder(project, index, persist_to))
            service = Service(project, own, workers=names if len(projects) > 1 else frozenset())
            service.peers = peers
            peers[project.name] = service
            services.append(service)
        return cls(services)

    @property
    def primary(self) -> Service:
        return self.services[0]

    async def start(self) -> None:
        # The others first: the served Worker's resumed instances may call them at once.
        for service in reversed(self.services):
            await service.start()

    async def stop(self) -> None:
        for service in self.services:
            await service.stop()

    def app(self) -> Starlette:
        if len(self.services) == 1:
            return self.primary.app()
        return self.primary.app(startup=self.start, shutdown=self.stop)
