"""Reload on change, as `wrangler dev` does by default (`celld run --no-watch` turns it off).

What is watched: every file of the Worker's module graph (the files the module loader
read), the config file, `tsconfig.json` and `package.json` beside it, and the vars files
there (`.dev.vars`, `.dev.vars.<env>`, `.env`, `.env.<...>`). Files under `node_modules`
are left out, where wrangler's esbuild watches them too: packages change by `npm install`,
after which `celld run` is started again, and watching them would take an inotify watch
for each of their folders (thousands in a project with a few dependencies). With a
`[build] command`, everything under its `watch_dir` (default `src`, relative to the
config file) is watched too, and a change there runs the command again first; its
failure is printed and the running Worker kept.

On a change (a burst of writes is taken as one: watchfiles waits for a quiet moment),
the project is loaded again through the callback `celld run` gives (config, vars, code)
and handed to :meth:`celld.server.service.Service.replace`, which swaps it in while
requests in flight finish on the old Worker. A config or module error (file:line:col)
is printed and the old Worker keeps serving; the next change tries again. A change that
leaves the bundle, the config and the vars as they were (an editor touching a file, a
build writing the same output) reloads nothing.

With `celld run --workers N`, process 0 alone watches, runs the build and reloads first;
then it asks the other processes to load the project again (``others``), each of them
through :func:`reload_here`, and says any that failed. So the build runs once per change,
every process serves the new version, each loads only once process 0's build is done, and
a Durable Object migration is applied once, by process 0, before the others load it. A
process that fails to load keeps its previous version, as process 0 does.

The watching itself is watchfiles' (inotify and its kin through the Rust `notify`
crate, the library uvicorn's own reloader uses), not a loop of stat calls.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import watchfiles

from celld.project.build import BuildFailed, BuildStep, read_build, run_build
from celld.project.config import ProjectConfig
from celld.project.errors import ConfigError
from celld.server.service import Service

log = logging.getLogger("celld")
# watchfiles logs "N changes detected" at info; celld says what changed itself.
logging.getLogger("watchfiles").setLevel(logging.WARNING)

#: How long a burst of changes may go on before it is taken (watchfiles' debounce), and
#: the quiet that ends one earlier (its step), in milliseconds.
DEBOUNCE_MS = 1_600
QUIET_MS = 100

_VARS_FILE = re.compile(r"^\.(dev\.vars|env)(\..+)?$")
_POSITION = re.compile(r"^(?P<path>[^\n]+?):\d+:\d+: ")


@dataclass(frozen=True)
class Targets:
    """What to watch: single files (their folders watched, not recursively) and whole
    trees (a build's `watch_dir`)."""

    files: frozenset[Path]
    folders: frozenset[Path]
    trees: frozenset[Path]

    def wants(self, path: Path) -> bool:
        if path in self.files:
            return True
        if path.parent in self.folders and _VARS_FILE.match(path.name):
            return True
        return self.in_tree(path)

    def in_tree(self, path: Path) -> bool:
        return any(path.is_relative_to(tree) for tree in self.trees)


def _outside_node_modules(path: Path) -> bool:
    return "node_modules" not in path.parts


def watch_targets(service: Service, build: BuildStep | None, extra: set[Path]) -> Targets:
    """The files and trees whose change reloads the running project."""
    project = service.project
    config_dir = project.path.parent
    files = {project.path, config_dir / "tsconfig.json", config_dir / "package.json"}
    if project.tsconfig is not None:
        files.add(project.tsconfig)
    bundle = service.program.bundle
    if bundle is not None:
        files.update(p.resolve() for p in bundle.files if _outside_node_modules(p))
    if project.main is not None:
        files.add(project.main)
    files.update(extra)
    trees = set(build.watch_dirs) if build is not None else set()
    return Targets(
        frozenset(files),
        frozenset({f.parent for f in files} | {config_dir}),
        frozenset(trees),
    )


class Reloader:
    """Watches a running service's project and swaps in each new version."""

    def __init__(
        self,
        service: Service,
        config_path: Path,
        load: Callable[[], ProjectConfig],
        others: Callable[[], Awaitable[dict[int, str]]] | None = None,
    ) -> None:
        self.service = service
        self.config_path = config_path.resolve()
        self.load = load
        #: a cluster's other processes, told to load again after this one did: what
        #: went wrong in which process (celld.cluster.member.Member.reload_others)
        self.others = others
        self._task: asyncio.Task[None] | None = None
        #: files a failed load named (a new file with an error): watched until it loads
        self._failed_files: set[Path] = set()

    def attach(self) -> None:
        """Start watching once the service has started; stop before it stops."""
        self.service.on_start.append(self.start)
        self.service.on_stop.append(self.stop)

    async def start(self) -> None:
        """Start watching; returns once the first watches are in place (so "ready" is
        never printed before a change would be seen)."""
        armed = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(armed), name="celld-watch")
        waiting = asyncio.ensure_future(armed.wait())
        await asyncio.wait([waiting, self._task], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if self._task.done():
            self._task.result()  # the watch could not start: say why

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # -- the watch ---------------------------------------------------------------------

    def _build(self) -> BuildStep | None:
        """The config's build step (None if it has none, or the config cannot say)."""
        try:
            return read_build(self.config_path)
        except ConfigError:
            return None  # the reload prints the config's error

    async def _run(self, armed: asyncio.Event) -> None:
        changes: asyncio.Queue[set[Path]] = asyncio.Queue()
        targets: Targets | None = None
        watchers: list[asyncio.Task[None]] = []
        try:
            while True:
                build = self._build()
                wanted = watch_targets(self.service, build, self._failed_files)
                if wanted != targets:
                    for task in watchers:
                        task.cancel()
                    await asyncio.gather(*watchers, return_exceptions=True)
                    targets = wanted
                    watchers = self._watch(targets, changes)
                    # Each watcher's first step sets up its watches (watchfiles creates its
                    # notifier before it first waits), and they run before this goes on.
                    await asyncio.sleep(0)
                    armed.set()
                    log.debug(
                        "watching %d files in %d folders, and %d trees, for changes",
                        len(targets.files),
                        len(targets.folders),
                        len(targets.trees),
                    )
                changed = await changes.get()
                while not changes.empty():
                    changed |= changes.get_nowait()
                try:
                    await self._changed(changed, targets, build)
                except Exception:  # a bug in the reload itself: said, and the watch goes on
                    log.exception("reloading failed; the previous version keeps serving")
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    def _watch(
        self, targets: Targets, changes: asyncio.Queue[set[Path]]
    ) -> list[asyncio.Task[None]]:
        loop = asyncio.get_running_loop()
        folders = sorted(p for p in targets.folders if p.is_dir())
        trees = sorted(p for p in targets.trees if p.is_dir())
        watchers = []
        if folders:
            watchers.append(loop.create_task(self._feed(folders, False, targets, changes)))
        if trees:
            watchers.append(loop.create_task(self._feed(trees, True, targets, changes)))
        for task in watchers:
            task.add_done_callback(_report_failure)
        return watchers

    @staticmethod
    async def _feed(
        paths: list[Path], recursive: bool, targets: Targets, changes: asyncio.Queue[set[Path]]
    ) -> None:
        async for batch in watchfiles.awatch(
            *paths,
            recursive=recursive,
            debounce=DEBOUNCE_MS,
            step=QUIET_MS,
            watch_filter=lambda _change, path: targets.wants(Path(path)),
        ):
            changes.put_nowait({Path(path) for _change, path in batch})

    # -- one reload --------------------------------------------------------------------

    async def _changed(self, changed: set[Path], targets: Targets, build: BuildStep | None) -> None:
        root = self.service.project.root
        names = ", ".join(sorted(_shown(p, root) for p in changed))
        log.info("Reloading local server... (%s changed)", names)
        if build is not None and any(targets.in_tree(p) for p in changed):
            try:
                await asyncio.to_thread(run_build, build)
            except BuildFailed as error:
                log.error("%s\n(the previous version keeps serving)", error)
                return
        try:
            project = await asyncio.to_thread(self.load)
        except (ConfigError, ValueError) as error:
            log.error("%s\n(the previous version keeps serving)", error)
            return
        if project.dev != self.service.project.dev:
            log.warning("[dev] settings changed: they take effect when `celld run` starts again")
        for issue in project.warnings:
            if issue not in self.service.project.warnings:
                log.warning("%s: %s: %s", project.path.name, issue.key, issue.message)
        try:
            replaced = await self.service.replace(project)
        except Exception as error:  # noqa: BLE001 - any load error keeps the old Worker
            self._failed_files = _named_file(str(error), project.root)
            log.error("%s\n(the previous version keeps serving)", error)
            return
        self._failed_files = set()
        if not replaced:
            log.info("No change to the Worker, its config or its vars")
            return
        if self.others is not None:
            for index, what in sorted((await self.others()).items()):
                log.error("process %d %s", index, what)
        log.info("Local server updated and ready")


async def reload_here(service: Service, load: Callable[[], ProjectConfig]) -> str | None:
    """Load `service`'s project again in a cluster process that does not watch: process 0
    saw the change, built and reloaded, and asks. The error, for process 0 to say (this
    process keeps its previous version); None when loaded or unchanged."""
    try:
        project = await asyncio.to_thread(load)
        replaced = await service.replace(project)
    except Exception as error:  # noqa: BLE001 - reported to the watching process, which says it
        return str(error) or repr(error)
    log.debug("reloaded on process 0's word (%s)", "new version" if replaced else "no change")
    return None


def _report_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("watching for changes failed; reload on change is off", exc_info=task.exception())


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _named_file(message: str, root: Path) -> set[Path]:
    """The file a load error names at its start (path:line:col), to watch until fixed."""
    found = _POSITION.match(message)
    if found is None:
        return set()
    path = (root / found.group("path")).resolve()
    return {path} if path.is_file() else set()
