"""`celld workflows ...`: wrangler's `workflows` commands, in Python, against a running celld.

Same commands, arguments and flags as `wrangler workflows ... --local` (`--local` is
accepted and changes nothing: celld is always local), tables in a terminal and
`--json` for scripts. `latest` as an instance id means the newest instance. Talks
to celld through celld.client (the local explorer API).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from celld.client import CelldError, Client, Instance

ICONS = {
    "queued": "🔁 Queued", "running": "▶ Running", "paused": "⏸️ Paused",
    "errored": "❌ Errored", "terminated": "🚫 Terminated", "complete": "✅ Completed",
    "waiting": "⏰ Waiting", "waitingForPause": "⏱️ Waiting for pause", "unknown": "❓ Unknown",
}  # fmt: skip
STATUS_CHOICES = [
    "queued", "running", "paused", "errored", "terminated", "complete", "waiting",
    "waitingForPause",
]  # fmt: skip


def connection(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every command shares: where celld is and how to print."""
    options = [
        click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables."),
        click.option("--local", is_flag=True, hidden=False, help="Accepted for wrangler parity."),
        click.option("--port", default=8787, show_default=True, type=click.IntRange(1, 65535)),
        click.option("--ip", default="127.0.0.1", show_default=True, help="celld's address."),
        click.option("--url", help="celld's base URL (instead of --ip/--port)."),
        click.option(
            "--token", envvar="CELLD_ADMIN_TOKEN", help="Operator token [env CELLD_ADMIN_TOKEN]."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _client(opts: dict[str, Any]) -> Client:
    url = opts.pop("url") or f"http://{opts.pop('ip')}:{opts.pop('port')}"
    opts.pop("ip", None)
    opts.pop("port", None)
    opts.pop("local", None)
    return Client(url, token=opts.pop("token") or None)


def _run(body: Callable[[Client], Any], opts: dict[str, Any]) -> None:
    as_json = opts.pop("as_json")
    client = _client(opts)
    try:
        result = body(client)
    except CelldError as error:
        raise click.ClickException(error.message) from None
    finally:
        client.close()
    if as_json:
        click.echo(json.dumps(result[0], indent=2, ensure_ascii=False))
    else:
        click.echo(result[1])


def table(rows: list[dict[str, Any]]) -> str:
    """Rows as an aligned text table (column order from the first row)."""
    if not rows:
        return ""
    columns = list(rows[0])
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    rule = "  ".join("─" * w for w in widths)
    return "\n".join([line(columns), rule, *(line(r) for r in cells)])


def labelled(values: dict[str, Any], indent: int = 0) -> str:
    pad = " " * indent
    width = max((len(k) for k in values), default=0)
    return "\n".join(f"{pad}{k + ':':<{width + 1}} {v}" for k, v in values.items())


def _when(iso: str | None) -> str:
    return iso.replace("T", " ").replace("Z", " UTC") if iso else "—"


@click.group()
def workflows() -> None:
    """Manage Workflows on a running celld (as `wrangler workflows ... --local`)."""


@workflows.command("list")
@connection
def list_workflows(**opts: Any) -> None:
    """List the project's Workflows."""

    def body(client: Client) -> tuple[Any, str]:
        found = client.workflows()
        rows = [
            {"Name": w["name"], "Script name": w.get("script_name"), "Class name": w["class_name"]}
            for w in found
        ]
        text = table(rows) if rows else "There are no Workflows in this project."
        return found, text

    _run(body, opts)


@workflows.command()
@click.argument("name")
@connection
def describe(name: str, **opts: Any) -> None:
    """Describe a Workflow: its class and its instances by status."""

    def body(client: Client) -> tuple[Any, str]:
        details = client.workflow(name).details()
        head = labelled(
            {
                "Name": details["name"],
                "Script Name": details["script_name"],
                "Class Name": details["class_name"],
            }
        )
        counts = labelled({k: str(v) for k, v in details["instances"].items()}, 2)
        text = f"{head}\nInstance Status Counts:\n{counts}"
        for schedule in details.get("schedules") or []:
            rows = {"Last Tick": str(schedule["lastTick"]), "Next Tick": str(schedule["nextTick"])}
            if schedule.get("lastInstanceId"):
                rows["Last Instance"] = schedule["lastInstanceId"]
            text += f"\nSchedule {schedule['cron']} (UTC):\n{labelled(rows, 2)}"
        return details, text

    _run(body, opts)


@workflows.command()
@click.argument("name")
@click.argument("params", default="")
@click.option("--id", "instance_id", help="Instance id (default: a random UUID).")
@connection
def trigger(name: str, params: str, instance_id: str | None, **opts: Any) -> None:
    """Create an instance of a Workflow, with PARAMS as JSON."""
    try:
        parsed = json.loads(params) if params else None
    except ValueError as error:
        raise click.ClickException(f"PARAMS is not valid JSON: {error}") from None

    def body(client: Client) -> tuple[Any, str]:
        instance = client.workflow(name).create(id=instance_id, params=parsed)
        return {"id": instance.id}, f'🚀 Workflow instance "{instance.id}" has been triggered'

    _run(body, opts)


@workflows.command("delete")
@click.argument("name")
@connection
def delete_workflow(name: str, **opts: Any) -> None:
    """Delete every instance of a Workflow."""

    def body(client: Client) -> tuple[Any, str]:
        result = client.request("DELETE", client.workflow(name).path)["result"]
        return result, f'Workflow "{name}" instances removed.'

    _run(body, opts)


@workflows.group()
def instances() -> None:
    """Instances of a Workflow: list, describe, pause, resume, restart, terminate, ..."""


@instances.command("list")
@click.argument("name")
@click.option("--status", type=click.Choice(STATUS_CHOICES), help="Only instances with it.")
@click.option("--page", default=1, show_default=True, type=click.IntRange(1))
@click.option("--per-page", type=click.IntRange(1, 100), help="Instances per page (25).")
@click.option("--reverse", is_flag=True, help="Oldest first.")
@click.option("--date-start", help="Created at or after (ISO 8601).")
@click.option("--date-end", help="Created at or before (ISO 8601; a bare date is a whole day).")
@connection
def list_instances(
    name: str,
    status: str | None,
    page: int,
    per_page: int | None,
    reverse: bool,
    date_start: str | None,
    date_end: str | None,
    **opts: Any,
) -> None:
    """List a Workflow's instances, newest first."""

    def body(client: Client) -> tuple[Any, str]:
        found, info = client.workflow(name).instances_page(
            status=status,
            page=page,
            per_page=per_page or 25,
            date_start=date_start,
            date_end=date_end,
        )
        if reverse:
            found.reverse()
        if not found:
            return found, (
                f"No instances found on page {page}."
                if page > 1
                else f'There are no instances in workflow "{name}".'
            )
        rows = [
            {
                "Instance ID": i["id"],
                "Created": _when(i.get("created_on")),
                "Status": ICONS.get(i["status"], i["status"]),
            }
            for i in found
        ]
        head = (
            f"Showing {len(found)} of {info.get('total_count')} instances "
            f"(page {page} of {info.get('total_pages')}):"
        )
        return found, f"{head}\n{table(rows)}"

    _run(body, opts)


def _instance(client: Client, name: str, instance_id: str) -> Instance:
    return client.workflow(name).get(instance_id)


def _step_text(step: dict[str, Any], show_output: bool, limit: int) -> str:
    values: dict[str, Any] = {
        "Name": step["name"] + (f" #{step['count']}" if step.get("count", 1) > 1 else ""),
        "Type": {
            "step": "🎯 Step",
            "sleep": "💤 Sleeping",
            "waitForEvent": "👀 Waiting for event",
        }.get(step["type"], step["type"]),
        "State": step.get("state"),
        "Start": _when(step.get("start")),
    }
    if step.get("end"):
        values["End"] = _when(step["end"])
    if step.get("retry_at"):
        values["Retries At"] = _when(step["retry_at"])
    if step["type"] == "sleep" and not step.get("finished"):
        values["Sleeps Until"] = _when(step.get("until"))
    if step["type"] == "waitForEvent":
        values["Event Type"] = step.get("event_type")
        if step.get("timeout_at"):
            values["Times Out At"] = _when(step["timeout_at"])
    if show_output and step.get("output") is not None:
        text = json.dumps(step["output"], ensure_ascii=False)
        values["Output"] = text if len(text) <= limit else text[:limit] + "[...output truncated]"
    if step.get("error"):
        values["Error"] = f"{step['error'].get('name')}: {step['error'].get('message')}"
    text = labelled(values, 2)
    attempts = step.get("attempts")
    if attempts:
        rows = [
            {
                "Attempt": a["attempt"],
                "Start": _when(a.get("start")),
                "End": _when(a.get("end")),
                "State": "🔄 Working"
                if a["success"] is None
                else "✅ Success"
                if a["success"]
                else "❌ Error",
                "Error": f"{a['error']['name']}: {a['error']['message']}" if a.get("error") else "",
            }
            for a in attempts
        ]
        text += "\n" + "\n".join("  " + line for line in table(rows).splitlines())
    return text


@instances.command("describe")
@click.argument("name")
@click.argument("instance_id", metavar="ID", default="latest")
@click.option("--step-output/--no-step-output", default=True, help="Show step outputs.")
@click.option("--truncate-output-limit", default=5000, show_default=True, type=click.IntRange(1))
@connection
def describe_instance(
    name: str, instance_id: str, step_output: bool, truncate_output_limit: int, **opts: Any
) -> None:
    """Describe an instance: status, steps with attempts, deadlines, outputs and errors."""

    def body(client: Client) -> tuple[Any, str]:
        details = _instance(client, name, instance_id).describe()
        values = {
            "Workflow Name": name,
            "Instance Id": details["id"],
            "Version": details.get("versionId") or "-",
            "Status": ICONS.get(details["status"], details["status"]),
            "Queued": _when(details.get("queued")),
            "Start": _when(details.get("start")),
            "End": _when(details.get("end")),
        }
        if details.get("next_wake"):
            values["Next Deadline"] = _when(details["next_wake"])
        if details["status"] == "complete":
            values["Output"] = json.dumps(details.get("output"), ensure_ascii=False)
        if details.get("error"):
            values["Error"] = f"{details['error']['name']}: {details['error']['message']}"
        rollback = details.get("rollback")
        if rollback:
            values["Rollback"] = _rollback_summary(rollback)
        parts = [labelled(values), "Steps:"]
        parts += [_step_text(s, step_output, truncate_output_limit) for s in details["steps"]]
        if rollback and rollback["steps"]:
            rows = [
                {
                    "Step": f"{s['name']} ({s['count']})",
                    "State": s["state"],
                    "Failed Attempts": s["failed_attempts"],
                    "Retries At": _when(s.get("retry_at")),
                    "Error": f"{s['error']['name']}: {s['error']['message']}" if s["error"] else "",
                }
                for s in rollback["steps"]
            ]
            parts += ["Rollback (newest step first):", table(rows)]
        if details.get("events"):
            rows = [
                {
                    "Type": e["type"],
                    "Received": _when(e["timestamp"]),
                    "Consumed": "yes" if e["consumed"] else "buffered",
                }
                for e in details["events"]
            ]
            parts += ["Events:", table(rows)]
        return {"id": details["id"], **details}, "\n\n".join(parts)

    _run(body, opts)


def _rollback_summary(rollback: dict[str, Any]) -> str:
    reason = "terminate(rollback)" if rollback["reason"] == "terminate" else "the instance failed"
    text = f"{rollback['state']} (after {reason})"
    if rollback.get("error"):
        text += f": {rollback['error']['name']}: {rollback['error']['message']}"
    return text


def _lifecycle(verb: str, done: str) -> Callable[..., None]:
    def command(name: str, instance_id: str, **opts: Any) -> None:
        def body(client: Client) -> tuple[Any, str]:
            instance = _instance(client, name, instance_id)
            status = getattr(instance, verb)()
            return (
                {"status": status},
                f'The instance "{instance.id}" from {name} was {done} (now {status})',
            )

        _run(body, opts)

    command.__doc__ = f"{verb.capitalize()} an instance (ID may be `latest`)."
    return command


for _verb, _done in (("pause", "paused"), ("resume", "resumed")):
    instances.command(_verb)(
        click.argument("name")(
            click.argument("instance_id", metavar="ID")(connection(_lifecycle(_verb, _done)))
        )
    )


@instances.command("terminate")
@click.argument("name")
@click.argument("instance_id", metavar="ID")
@click.option(
    "--rollback", is_flag=True, help="Run registered rollback handlers before terminating."
)
@connection
def terminate(name: str, instance_id: str, rollback: bool, **opts: Any) -> None:
    """Terminate an instance (ID may be `latest`)."""

    def body(client: Client) -> tuple[Any, str]:
        instance = _instance(client, name, instance_id)
        status = instance.terminate(rollback=rollback)
        done = "is rolling back, then terminates" if status == "running" else "was terminated"
        return (
            {"status": status},
            f'The instance "{instance.id}" from {name} {done} (now {status})',
        )

    _run(body, opts)


@instances.command("restart")
@click.argument("name")
@click.argument("instance_id", metavar="ID")
@click.option("--from-step-name", help="Restart from this step (its result is redone).")
@click.option("--from-step-count", type=click.IntRange(1), help="Its 1-based occurrence.")
@click.option("--from-step-type", type=click.Choice(["do", "sleep", "waitForEvent"]))
@connection
def restart(
    name: str,
    instance_id: str,
    from_step_name: str | None,
    from_step_count: int | None,
    from_step_type: str | None,
    **opts: Any,
) -> None:
    """Restart an instance from the start or from a step (ID may be `latest`)."""
    if from_step_name is None and (from_step_count or from_step_type):
        raise click.ClickException("--from-step-count/--from-step-type need --from-step-name")

    def body(client: Client) -> tuple[Any, str]:
        instance = _instance(client, name, instance_id)
        status = instance.restart(from_step_name, count=from_step_count, type=from_step_type)
        return {"status": status}, f'The instance "{instance.id}" from {name} was restarted'

    _run(body, opts)


@instances.command("send-event")
@click.argument("name")
@click.argument("instance_id", metavar="ID")
@click.option("--type", "event_type", required=True, help="The event's type.")
@click.option("--payload", default="{}", show_default=True, help="The payload as JSON.")
@connection
def send_event(name: str, instance_id: str, event_type: str, payload: str, **opts: Any) -> None:
    """Send an event to an instance (ID may be `latest`)."""
    try:
        parsed = json.loads(payload)
    except ValueError as error:
        raise click.ClickException(f"--payload is not valid JSON: {error}") from None

    def body(client: Client) -> tuple[Any, str]:
        instance = _instance(client, name, instance_id)
        instance.send_event(event_type, parsed)
        return (
            {"success": True},
            f'The event "{event_type}" was sent to the instance "{instance.id}" from {name}',
        )

    _run(body, opts)


@instances.command("delete")
@click.argument("name")
@click.argument("instance_ids", metavar="ID...", nargs=-1, required=True)
@connection
def delete_instances(name: str, instance_ids: tuple[str, ...], **opts: Any) -> None:
    """Delete instances (at most 100)."""

    def body(client: Client) -> tuple[Any, str]:
        path = f"{client.workflow(name).path}/instances/batch/delete"
        result = client.request("POST", path, json={"instances": list(instance_ids)})["result"]
        failed = result.get("errors") or []
        if failed:
            lines = "\n".join(f"  - {e['id']}: {e['message']}" for e in failed)
            raise click.ClickException(f"could not delete {len(failed)} instance(s):\n{lines}")
        return result, f"Deleted {len(result.get('deleted', []))} instance(s)"

    _run(body, opts)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(workflows())
