"""`celld queues list`: the queues of a running celld (every Worker of its session), with
their depth, messages in flight and dead-lettered; `--json` for scripts. Reads GET
/cdn-cgi/celld/queues (celld/server/live_parts.py)."""

from __future__ import annotations

from typing import Any

import click

from celld.cli.workflows import _run, connection, table
from celld.client import Client


@click.group()
def queues() -> None:
    """Inspect the Queues of a running celld."""


@queues.command("list")
@connection
def list_queues(**opts: Any) -> None:
    """List the queues: depth (ready + delayed), in flight, dead-lettered, consumer."""

    def body(client: Client) -> tuple[Any, str]:
        found = list(client.request("GET", "/cdn-cgi/celld/queues")["result"])
        rows = [
            {
                "Queue": q["queue"],
                "Consumer": q["consumer"] or "—",
                "Depth": q["depth"],
                "Ready": q["ready"],
                "Delayed": q["delayed"],
                "In flight": q["inFlight"],
                "Dead-lettered": q["deadLettered"],
                "Dropped": q["dropped"],
            }
            for q in found
        ]
        return found, table(rows) if rows else "There are no queues in this session."

    _run(body, opts)
