"""Prometheus text exposition of celld's own state (GET /cdn-cgi/celld/metrics).

Written by hand rather than with prometheus_client: a dozen gauges rendered on demand
from live objects need none of that library's registries or background collectors.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from celld.server import collector
from celld.server.live_parts import object_socket_rows, queue_rows
from celld.store.base import StoreUnavailable

if TYPE_CHECKING:
    from celld.server.service import Service


def _quantile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return float(sorted_values[index])


class MetricsText:
    def __init__(self) -> None:
        self._lines: list[str] = []

    def add(self, name: str, kind: str, help_text: str, samples: dict[str, float] | float) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")
        if isinstance(samples, dict):
            for labels, value in samples.items():
                self._lines.append(f"{name}{{{labels}}} {value:g}")
        else:
            self._lines.append(f"{name} {samples:g}")

    def render(self) -> str:
        return "\n".join(self._lines) + "\n"


def _label(value: str) -> str:
    """A Prometheus label value (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _queues_and_sockets(text: MetricsText, service: Service) -> None:
    """The session's queues and the Durable Objects holding WebSockets (celld/server/
    live_parts.py reads them for the JSON routes too)."""
    queues = queue_rows(service.queues)
    if queues:
        by_queue = {row["queue"]: row for row in queues}

        def per_queue(key: str) -> dict[str, float]:
            return {f'queue="{_label(q)}"': row[key] for q, row in by_queue.items()}

        text.add(
            "celld_queue_depth",
            "gauge",
            "Messages waiting in a queue (ready and delayed), not in flight.",
            per_queue("depth"),
        )
        text.add("celld_queue_ready", "gauge", "Messages ready for delivery.", per_queue("ready"))
        text.add("celld_queue_delayed", "gauge", "Messages not yet visible.", per_queue("delayed"))
        text.add(
            "celld_queue_in_flight",
            "gauge",
            "Messages delivered to a consumer whose outcome is not stored yet.",
            per_queue("inFlight"),
        )
        text.add(
            "celld_queue_dead_lettered_total",
            "counter",
            "Messages moved to the dead letter queue after their last retry (since start).",
            per_queue("deadLettered"),
        )
        text.add(
            "celld_queue_dropped_total",
            "counter",
            "Messages dropped after their last retry, with no dead letter queue (since start).",
            per_queue("dropped"),
        )
    objects = object_socket_rows(service.socket_hubs())
    text.add(
        "celld_object_websockets",
        "gauge",
        "Open WebSockets a Durable Object accepted (ctx.acceptWebSocket), by object.",
        {
            f'worker="{_label(o["worker"])}",class="{_label(o["class"])}",id="{o["id"]}"': o[
                "websockets"
            ]
            for o in objects
        },
    )


def _collector(text: MetricsText) -> None:
    """The cyclic garbage collector's passes: each stops the event loop while it runs."""
    pauses = collector.pauses
    generations = range(len(pauses.count))
    text.add(
        "celld_gc_frozen_objects",
        "gauge",
        "Objects frozen once serving (start-up's): the collector's passes do not walk them.",
        gc.get_freeze_count(),
    )
    text.add(
        "celld_gc_passes_total",
        "counter",
        "Passes of the cyclic garbage collector since serving, by generation.",
        {f'generation="{g}"': pauses.count[g] for g in generations},
    )
    text.add(
        "celld_gc_pause_seconds_total",
        "counter",
        "Time the collector's passes held the interpreter, by generation.",
        {f'generation="{g}"': pauses.seconds[g] for g in generations},
    )
    text.add(
        "celld_gc_longest_pause_seconds",
        "gauge",
        "The longest single pass since serving, by generation.",
        {f'generation="{g}"': pauses.longest[g] for g in generations},
    )


async def render_metrics(service: Service) -> str:
    text = MetricsText()
    _collector(text)
    pool = service.pool
    if pool is not None:
        text.add("celld_worker_isolates", "gauge", "Isolates serving HTTP requests.", pool.size)
        here, away = pool.turns
        text.add(
            "celld_worker_turns_total",
            "counter",
            "Turns of the Worker's isolates: run on the event loop, or on a JS thread.",
            {'where="loop"': here, 'where="thread"': away},
        )
    objects = service.objects
    if objects is not None:
        stats = objects.stats()
        text.add("celld_objects_live", "gauge", "Durable Objects with an isolate.", stats["live"])
        text.add(
            "celld_objects_activations_total",
            "counter",
            "Durable Objects started (a first call, or the first after an eviction).",
            stats["activations"],
        )
        text.add(
            "celld_objects_evictions_total",
            "counter",
            "Durable Objects evicted (idle, or for the resident cap); storage kept.",
            stats["evictions"],
        )
        text.add(
            "celld_objects_alarms_pending",
            "gauge",
            "Alarms set and not yet run.",
            stats["alarms_pending"],
        )
        text.add(
            "celld_objects_alarm_runs_total",
            "counter",
            "alarm() handlers started.",
            stats["alarm_runs"],
        )
    _queues_and_sockets(text, service)
    cluster = service.options.cluster
    if cluster is not None:
        text.add(
            "celld_cluster_process",
            "gauge",
            "This process's index in `celld run --workers N` (each answers for itself).",
            {f'index="{cluster.index}"': 1},
        )
        text.add(
            "celld_cluster_relayed_websockets",
            "gauge",
            "WebSockets of Durable Objects relayed between processes: clients connected "
            "here to an object elsewhere, objects here with a client elsewhere.",
            {f'side="{side}"': n for side, n in cluster.relayed().items()},
        )
    cells = service.cells
    store = service.store
    if cells is None or store is None:
        return text.render()
    health = store.health
    text.add(
        "celld_store_healthy",
        "gauge",
        "1 while the store commits, 0 while its writes fail (workflows wait, nothing is lost).",
        1 if health.healthy else 0,
    )
    text.add(
        "celld_store_failing_since_seconds",
        "gauge",
        "Unix time of the first failed commit of the current store outage (0: none).",
        (health.failing_since or 0) / 1000,
    )
    text.add(
        "celld_store_failed_commits_total", "counter", "Commits the store refused.", health.failures
    )
    text.add("celld_store_outages_total", "counter", "Store outages so far.", health.outages)
    text.add(
        "celld_store_writer_restarts_total",
        "counter",
        "Times the store's writer thread died and was replaced.",
        store.writer_restarts,
    )
    text.add(
        "celld_cells_background_tasks",
        "gauge",
        "Background tasks owned by the cells layer.",
        len(cells.tasks),
    )
    try:
        counts = await store.counts()
    except StoreUnavailable:
        return text.render()
    text.add(
        "celld_instances",
        "gauge",
        "Workflow instances in the store, by status.",
        {f'status="{status}"': n for status, n in sorted(counts.items())},
    )
    unfinished = sum(n for s, n in counts.items() if s not in ("complete", "errored", "terminated"))
    text.add("celld_cells_resident", "gauge", "Cells holding an isolate.", cells.resident_count)
    text.add(
        "celld_cells_loaded",
        "gauge",
        "Cells loaded in memory (resident or in use).",
        len(cells.cells),
    )
    text.add(
        "celld_cells_hibernated",
        "gauge",
        "Unfinished instances with no isolate (rows in the store only).",
        max(0, unfinished - cells.resident_count),
    )
    text.add(
        "celld_cells_run_queue",
        "gauge",
        "Runs waiting for an isolate slot.",
        cells.run_queue_length,
    )
    text.add("celld_cells_max_resident", "gauge", "Cap on resident isolates.", cells.max_resident)
    starts = cells.start_counts
    text.add(
        "celld_run_start_batches_total",
        "counter",
        "Batches of runs admitted together that posted their starts together.",
        starts.batches,
    )
    text.add(
        "celld_run_start_batch_runs_total",
        "counter",
        "Runs started in those batches.",
        starts.runs,
    )
    text.add(
        "celld_run_start_batch_turns_total",
        "counter",
        "JS turns that delivered those runs' starts (one per isolate per batch).",
        starts.turns,
    )
    residency = cells.residency
    text.add(
        "celld_run_load_batches_total",
        "counter",
        "Reads that loaded several admitted runs' instances (and journals) at once.",
        residency.batch_loads,
    )
    text.add(
        "celld_run_load_batch_instances_total",
        "counter",
        "Instances loaded by those reads.",
        residency.batch_loaded,
    )
    text.add(
        "celld_alarms_pending",
        "gauge",
        "Alarms held in memory (inside the residency window).",
        len(cells.alarms),
    )
    lags = sorted(cells.alarms.lags_ms)
    text.add(
        "celld_alarm_wake_lag_ms",
        "summary",
        "How late deadlines fired, in milliseconds (recent alarms).",
        {'quantile="0.5"': _quantile(lags, 0.5), 'quantile="0.99"': _quantile(lags, 0.99)},
    )
    text.add("celld_alarm_wake_lag_ms_count", "counter", "Alarms fired.", cells.alarms.fired)
    memory = await cells.isolate_memory()
    text.add(
        "celld_isolate_memory_bytes", "gauge", "Memory used by resident workflow isolates.", memory
    )
    text.add("celld_store_commits_total", "counter", "Store transactions committed.", store.commits)
    text.add(
        "celld_store_rows_written_total",
        "counter",
        "Rows written by those commits.",
        store.rows_written,
    )
    return text.render()
