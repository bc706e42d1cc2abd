"""The listening socket and the server loop of `celld run`, with the lines a user reads.

The port is bound before anything else starts, by celld itself: a port already taken is
a clear error naming it (and nothing has started yet), and with ``--port 0`` the port the
system chose is the one announced. "Ready on ..." is logged only once the socket listens
and celld has started (instances resumed, isolates loaded), as `wrangler dev` prints it;
SIGTERM or Ctrl-C logs a line when the stop begins and another when it is done.
"""

from __future__ import annotations

import errno
import logging
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import uvicorn

from celld.project.build import read_build, run_build
from celld.project.config import ConfigError, ProjectConfig, find_config, load_config
from celld.server import collector

log = logging.getLogger("celld")


@dataclass(frozen=True)
class WorkerArgs:
    """What `celld run` was told about its Workers: project folders, `-c` config files
    (either names the Workers, in order; the first is served on the port), `--env`, and
    the `--var` overrides (for the first Worker, the one served)."""

    projects: tuple[Path, ...] = (Path("."),)
    config_files: tuple[Path, ...] = ()
    env: str | None = None
    var_overrides: Mapping[str, str] = field(default_factory=dict)
    #: run each Worker's ``[build] command`` (a cluster's child processes do not: the
    #: parent built once)
    builds: bool = True


def config_paths(args: WorkerArgs) -> list[Path]:
    """The config file of each Worker, in order. `-c` files name the Workers when given
    (as `wrangler dev -c a -c b`); with a single PROJECT folder beside them, they are taken
    as given, as before. Several folders and `-c` files together are refused."""
    if args.config_files:
        if len(args.projects) > 1:
            raise ConfigError(
                args.projects[1],
                message="give the Workers either as PROJECT folders or as -c config files, "
                "not both",
            )
        return [find_config(args.projects[0], file) for file in args.config_files]
    return [find_config(project) for project in args.projects]


def load_workers(args: WorkerArgs) -> list[ProjectConfig]:
    """Build (``[build] command``) and load each Worker of the session from the CLI's
    arguments. Raises ConfigError or BuildFailed, naming the file."""
    return [load_worker(args, path, index) for index, path in enumerate(config_paths(args))]


def load_worker(args: WorkerArgs, path: Path, index: int) -> ProjectConfig:
    """Build and load Worker number `index` of the session (again, to reload it)."""
    build = read_build(path, args.env)
    if build is not None and args.builds:
        run_build(build)
    overrides = args.var_overrides if index == 0 else None
    return load_config(path, var_overrides=overrides, env=args.env)


class PortUnavailable(Exception):
    """The address cannot be listened on (taken, not local, not permitted)."""


def listen_address(ip: str) -> str:
    """wrangler's `--ip *` (every interface) as an address to bind."""
    return "0.0.0.0" if ip == "*" else ip


def bind(ip: str, port: int) -> socket.socket:
    """A socket bound to (ip, port), not yet listening; PortUnavailable says why not."""
    host = listen_address(ip)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise PortUnavailable(f"cannot listen on {ip!r}: {error.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6 and host in ("::", "0.0.0.0"):
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        where = f"{ip}:{port}" if ":" not in ip else f"[{ip}]:{port}"
        if error.errno == errno.EADDRINUSE:
            raise PortUnavailable(
                f"port {port} is already in use on {ip} (another celld or wrangler dev?): "
                f"stop it, or choose another port with --port or [dev] port"
            ) from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise PortUnavailable(
                f"cannot listen on {where}: {ip} is not an address of this machine"
            ) from None
        if error.errno == errno.EACCES:
            raise PortUnavailable(
                f"cannot listen on {where}: permission denied (ports below 1024 need root)"
            ) from None
        raise PortUnavailable(f"cannot listen on {where}: {error.strerror}") from None
    sock.set_inheritable(True)
    return sock


def bound_port(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


class DevServer(uvicorn.Server):
    """uvicorn's server, telling when it is ready and when it stops (at debug level in a
    `--workers N` child: its parent says it once for all)."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_ready: Callable[[], None],
        on_stopping: Callable[[], None] | None = None,
        speaks: bool = True,
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._on_stopping = on_stopping
        self._stop_said = False
        self._level = logging.INFO if speaks else logging.DEBUG

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            # start-up's objects live as long as the process: the collector's full passes
            # stop walking them (celld/server/collector.py: they stalled the event loop)
            collector.freeze_start_up_heap()
            collector.watch()
            self._on_ready()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self._stop_said:
            self._stop_said = True
            if self._on_stopping is not None:
                self._on_stopping()
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            grace = self.config.timeout_graceful_shutdown
            log.log(
                self._level,
                "stopping (%s): in-flight requests get up to %ss to finish",
                name,
                f"{grace:g}" if grace is not None else "-",
            )
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets=sockets)
        log.log(self._level, "stopped")
