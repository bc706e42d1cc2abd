"""`celld run`: serve a Worker project like `wrangler dev` does, durably."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import secrets
import sys
from functools import partial
from pathlib import Path

import click
import uvicorn

from celld import __version__
from celld.cli.queues import queues
from celld.cli.storage import d1, kv, r2
from celld.cli.workflows import workflows


@click.group()
@click.version_option(__version__, prog_name="celld")
def cli() -> None:
    """celld runs Cloudflare Workers and durable Workflows on your own machines."""


@cli.command()
@click.argument(
    "projects",
    nargs=-1,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
@click.option(
    "--config",
    "-c",
    "config_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="wrangler.toml / wrangler.json(c) to use instead of the one in PROJECT; repeat it "
    "to run several Workers (the first is served on the port).",
)
@click.option(
    "--env",
    "-e",
    "env_name",
    help="Run the named environment [env.NAME] of each config (default: CLOUDFLARE_ENV, "
    "else the top level).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    help="Port to listen on (default: [dev] port, else 8787; 0 picks a free one).",
)
@click.option("--ip", help="Address to listen on (default: [dev] ip, else 127.0.0.1; * for all).")
@click.option(
    "--local-protocol",
    type=click.Choice(["http", "https"]),
    help="Serve http or https (default: [dev] local_protocol, else http); https uses a "
    "certificate celld makes under the state folder unless --https-key-path/--https-cert-path.",
)
@click.option(
    "--https-key-path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Private key (PEM) for --local-protocol https.",
)
@click.option(
    "--https-cert-path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Certificate (PEM) for --local-protocol https.",
)
@click.option(
    "--upstream-protocol",
    type=click.Choice(["http", "https"]),
    help="The scheme of the URL the Worker sees (default: [dev] upstream_protocol, else "
    "the one it was called with).",
)
@click.option(
    "--host",
    help="The host (and port) of the URL the Worker sees, and its Host header "
    "(default: [dev] host, else the one it was called with).",
)
@click.option(
    "--test-scheduled",
    is_flag=True,
    help="Serve /__scheduled?cron=... to fire the Worker's scheduled() handler, as "
    "wrangler dev --test-scheduled does.",
)
@click.option(
    "--watch/--no-watch",
    default=True,
    show_default=True,
    help="Reload when the Worker's files, its config or its vars files change (and run "
    "[build] command again when files under its watch_dir do), as wrangler dev does.",
)
@click.option(
    "--persist-to",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for durable state (default: PROJECT/.celld).",
)
@click.option(
    "--store",
    envvar="CELLD_STORE",
    help="Where workflow state lives: 'sqlite' (default, under --persist-to) or a "
    "postgresql://USER@HOST:PORT/DB URL shared by several celld nodes [env CELLD_STORE].",
)
@click.option(
    "--var",
    "var_options",
    multiple=True,
    metavar="KEY:VALUE",
    help="Set or override a var (repeatable).",
)
@click.option("--threads", type=click.IntRange(1, 256), help="JS threads (default: one per core).")
@click.option(
    "--workers",
    "worker_processes",
    type=click.IntRange(1, 256),
    help="Processes sharing the port and the work, workflow instances sharded over them "
    "(default: one per core; a state folder keeps the number it was sharded over, and one "
    "holding instances from a single-process run stays at 1; 1 with --store postgresql "
    "or while the project binds Queues).",
)
@click.option(
    "--max-connections",
    default=1024,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Requests served at once (a connection counts once its request headers are "
    "read); requests beyond get 503.",
)
@click.option(
    "--max-idle-connections",
    default=10_000,
    show_default=True,
    type=click.IntRange(1, 10_000_000),
    help="Connections kept open without a request in flight (new, sending headers, or "
    "kept alive); past it the oldest idle connection is closed.",
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.1, 3600),
    help="Seconds a client has to send all of a request's headers before it is disconnected.",
)
@click.option(
    "--grace",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0, 3600),
    help="Seconds in-flight requests get to finish after SIGTERM before celld exits.",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "warn", "error"]),
    help="info logs a line per request and each instance's lifecycle; warning (or warn) "
    "leaves them out.",
)
@click.option(
    "--log-format",
    default="pretty",
    show_default=True,
    type=click.Choice(["pretty", "json"]),
    help="pretty: wrangler dev's lines (in colour on a terminal); json: one object a line.",
)
def run(
    projects: tuple[Path, ...],
    config_files: tuple[Path, ...],
    env_name: str | None,
    port: int | None,
    ip: str | None,
    local_protocol: str | None,
    https_key_path: Path | None,
    https_cert_path: Path | None,
    upstream_protocol: str | None,
    host: str | None,
    test_scheduled: bool,
    watch: bool,
    persist_to: Path | None,
    store: str | None,
    var_options: tuple[str, ...],
    threads: int | None,
    worker_processes: int | None,
    max_connections: int,
    max_idle_connections: int,
    header_timeout: float,
    grace: float,
    log_level: str,
    log_format: str,
) -> None:
    """Serve the Worker project in PROJECT (default: the current folder).

    Several PROJECT folders (or -c files) run several Workers in one session, bound to one
    another by service bindings and `script_name`; the first is served on the port."""
    from celld.cells.clock import ManualClock
    from celld.cli import devsettings
    from celld.cli.serve import (
        DevServer,
        PortUnavailable,
        WorkerArgs,
        bind,
        bound_port,
        config_paths,
        load_worker,
        load_workers,
    )
    from celld.cluster import processes
    from celld.isolate.modules import ModuleError
    from celld.isolate.watchdog import NoCpuLimit
    from celld.isolate.websockets import MAX_MESSAGE_BYTES
    from celld.project.build import BuildFailed
    from celld.project.config import ConfigError, parse_var_option
    from celld.project.environments import requested_env
    from celld.project.files import redirected_config, state_home
    from celld.server.admission import RequestCap
    from celld.server.connections import connection_budget, raise_open_files_limit
    from celld.server.local_cert import local_certificate
    from celld.server.logformat import configure_logging
    from celld.server.service import ServiceOptions
    from celld.server.session import Session, state_folder

    try:
        from celld.server.protocol import guarded_protocol
    except ImportError as error:  # uvicorn moved the protocol celld builds on
        raise click.ClickException(
            f"celld's HTTP server needs uvicorn's httptools protocol "
            f"(uvicorn.protocols.http.httptools_impl), which this uvicorn lacks: {error}"
        ) from None

    level = "warning" if log_level == "warn" else log_level
    configure_logging(level, log_format)
    log = logging.getLogger("celld")
    try:
        member = processes.member()
        worker_args = WorkerArgs(
            projects=projects or (Path("."),),
            config_files=config_files,
            env=requested_env(env_name),
            var_overrides=dict(parse_var_option(option) for option in var_options),
            builds=member is None,  # a cluster's parent builds, once
        )
        paths = config_paths(worker_args)
        first_dir = worker_args.projects[0]
        first_file = config_files[0] if config_files else None
        if first_file is None and redirected_config(first_dir) is not None:
            log.info("using %s, the configuration the build generated", paths[0])
        workers = load_workers(worker_args)
        config = workers[0]
        for worker in workers:
            for issue in worker.warnings:
                log.warning("%s: %s: %s", worker.path.name, issue.key, issue.message)
            for used in worker.vars_files:
                log.info("%s: using secrets defined in %s", worker.name, used.name)
        dev = devsettings.resolve(
            config.dev,
            ip=ip,
            port=port,
            local_protocol=local_protocol,
            upstream_protocol=upstream_protocol,
            host=host,
            https_key_path=https_key_path,
            https_cert_path=https_cert_path,
        )
        options = ServiceOptions(
            # the served Worker's state: in its project also when a build redirected its
            # config into the build's output (celld.project.files.state_home)
            persist_to=state_folder(
                config, 0, persist_to or state_home(first_dir, first_file, config.root) / ".celld"
            ),
            js_threads=threads,
            synchronous=os.environ.get("CELLD_SQLITE_SYNC", "FULL"),
            store=store,
            test_scheduled=test_scheduled,
            url_rewrite=(dev.upstream_protocol, dev.host) if dev.rewrites_url else None,
        )
        memory_mb = os.environ.get("CELLD_ISOLATE_MEMORY_MB")
        if memory_mb:
            if not memory_mb.isdigit() or int(memory_mb) < 8:
                raise ValueError(
                    f"CELLD_ISOLATE_MEMORY_MB must be a whole number >= 8, not {memory_mb!r}"
                )
            options.memory_bytes = int(memory_mb) * 1024 * 1024
        test_clock = os.environ.get("CELLD_TEST_CLOCK", "")
        if test_clock.startswith("manual"):
            # Tests drive time over HTTP (POST /cdn-cgi/celld/clock?advance=MS);
            # "manual:<epoch ms>" starts it at a given time (a restart resuming a test).
            _, _, start = test_clock.partition(":")
            options.clock = ManualClock(processes.clock_start(member, start))
        options.operator_token, printed = operator_token(
            dev.ip, os.environ.get("CELLD_ADMIN_TOKEN")
        )
        # every process runs every Worker; each Worker's instances are sharded over them
        processes_n = processes.settle(
            member,
            options,
            worker_processes,
            [state_folder(worker, n, persist_to) for n, worker in enumerate(workers) if n],
        )
        # The port is taken before anything starts: a port in use stops celld here, with
        # nothing else begun (a cluster's children accept on their parent's socket).
        sock = bind(dev.ip, dev.port) if member is None else processes.inherited_socket(member)
        session = Session.create(workers, options, persist_to)
        if watch and (member is not None or processes_n == 1):  # (a parent serves nothing)
            from celld.server.reload import Reloader, reload_here

            # the Reloader runs the [build] command itself, before it loads again; in a
            # cluster only process 0 watches and builds, then tells the others to load
            reloads = dataclasses.replace(worker_args, builds=False)
            for index, (service, path) in enumerate(zip(session.services, paths, strict=True)):
                reload = partial(load_worker, reloads, path, index)
                if member is None or member.index == 0:
                    others = partial(member.reload_others, index) if member else None
                    Reloader(service, path, reload, others).attach()
                else:
                    member.reloads[index] = partial(reload_here, service, reload)
        tls: dict[str, str] = {}
        made_cert: Path | None = None  # a certificate celld made (clients must trust it)
        if dev.local_protocol == "https":
            if dev.https_cert_path is not None and dev.https_key_path is not None:
                cert, key = dev.https_cert_path, dev.https_key_path
            else:
                cert, key = made_cert, _ = local_certificate(options.persist_to, dev.ip)
            tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    except (
        ConfigError,
        ModuleError,
        ValueError,
        NoCpuLimit,
        BuildFailed,
        PortUnavailable,
    ) as error:
        raise click.ClickException(str(error)) from None

    shown_ip = "localhost" if dev.ip == "*" else dev.ip
    shown_host = f"[{shown_ip}]" if ":" in shown_ip else shown_ip
    url = f"{dev.local_protocol}://{shown_host}:{bound_port(sock)}"

    def ready() -> None:
        if member is not None:
            member.ready()  # the parent says it once every process listens
            return
        log.info("celld %s: serving %s on %s", __version__, config.name, url)
        for other in workers[1:]:
            log.info("also running Worker %s (reached through bindings)", other.name)
        log.info("operator page on %s/cdn-cgi/celld/", url)
        if dev.local_protocol == "https" and not tls["ssl_certfile"].startswith(
            str(dev.https_cert_path or "\0")
        ):
            log.info(
                "https with a self-signed certificate: trust %s (curl --cacert)",
                tls["ssl_certfile"],
            )
        if test_scheduled:
            log.info("fire the Worker's scheduled() handler: %s/__scheduled?cron=*+*+*+*+*", url)
        if processes_n > 1:
            log.info("%d processes share the port and the workflow instances", processes_n)
        if printed:
            log.warning(
                "listening beyond loopback; operator token (set CELLD_ADMIN_TOKEN to "
                "choose one): %s",
                options.operator_token,
            )

    sys.setswitchinterval(switch_interval_s(os.environ.get("CELLD_SWITCH_INTERVAL_MS")))
    max_open, backlog = connection_budget(raise_open_files_limit())
    if processes_n > 1 and member is None:
        sys.exit(processes.supervise(sock, processes_n, backlog, grace, ready, options))
    server_config = uvicorn.Config(
        RequestCap(processes.wrap(member, session.app()), max_connections),
        backlog=backlog,  # the pre-bound socket listens with it (uvicorn's startup)
        log_config=None,
        log_level=None,
        access_log=False,
        lifespan="on",
        http=guarded_protocol(header_timeout, max_idle_connections, max_open),
        # WebSocket upgrades (celld/server/websocket.py): the `websockets` library's sans-I/O
        # protocol, with workerd's 1 MiB limit on a received message; uvicorn's shutdown
        # closes them with 1012 (service restart).
        ws="websockets-sansio",
        ws_max_size=MAX_MESSAGE_BYTES,
        timeout_graceful_shutdown=grace,
        **tls,  # type: ignore[arg-type]
    )
    DevServer(server_config, ready, session.stopping, speaks=member is None).run(sockets=[sock])


#: How long a thread may keep the GIL while another waits for it. The event loop keeps it
#: through JS turns and Python alike; the SQLite writer (a commit just landed) and the JS
#: threads (a Worker request's turn) each need it briefly. Python's 5 ms would be added
#: to their latency whenever the loop is busy; 0.5 ms costs the loop a few more thread
#: switches under contention (bench/PROFILE.md).
DEFAULT_SWITCH_INTERVAL_MS = 0.5


def switch_interval_s(configured: str | None) -> float:
    """The interpreter's switch interval for `celld run` (CELLD_SWITCH_INTERVAL_MS)."""
    if not configured:
        return DEFAULT_SWITCH_INTERVAL_MS / 1000
    try:
        value = float(configured)
    except ValueError:
        value = -1.0
    if not 0.01 <= value <= 100:
        raise click.ClickException(
            f"CELLD_SWITCH_INTERVAL_MS must be a number of milliseconds from 0.01 to 100, "
            f"not {configured!r}"
        )
    return value / 1000


def operator_token(ip: str, configured: str | None) -> tuple[str | None, bool]:
    """The token operator routes require, and whether it was made up here (to print).

    Bound to loopback, no token is needed unless CELLD_ADMIN_TOKEN sets one; bound to
    any other address, one is always required.
    """
    from celld.server.guard import is_loopback

    if configured:
        if len(configured) < 16 or not re.fullmatch(r"[A-Za-z0-9._~-]+", configured):
            raise ValueError(
                "CELLD_ADMIN_TOKEN must be at least 16 characters of A-Z a-z 0-9 . _ ~ -"
            )
        return configured, False
    if is_loopback(ip):
        return None, False
    return secrets.token_urlsafe(24), True


cli.add_command(workflows)
cli.add_command(queues)
for _group in (d1, kv, r2):
    cli.add_command(_group)


def main() -> None:
    cli()
