"""The local explorer's answers in `wrangler dev`'s exact shape, field for field.

`wrangler workflows ... --local` prints what the explorer answers (`--json` prints it
raw), so celld answers it with the fields `wrangler dev` gives, in its order and naming:
a step is named by its cache key, ``<name>-<count>`` (as the local explorer renders it),
and nothing of celld's own is added. celld's tools (its CLI, the Python client and the
page) ask for celld's details with the request header ``X-Celld-Details: 1`` and get the
fuller answer instead: steps by name with their ``count``, kind and state, deadlines,
events, rollback progress, the version an instance started on.

What still differs under wrangler's CLI is declared (compat/differences.py): the
``waiting`` status, production's default retry delay in a step's config, and a
``trigger`` for instances a cron schedule started (`wrangler dev` starts none).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

DETAILS_HEADER = "x-celld-details"


def wants_details(request: Request) -> bool:
    """Whether the caller is one of celld's tools, asking for celld's fuller answers."""
    return request.headers.get(DETAILS_HEADER) == "1"


def workflow(details: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": details["name"],
        "class_name": details["class_name"],
        "script_name": details["script_name"],
        "instances": details["instances"],
    }


def instance_item(item: dict[str, Any]) -> dict[str, Any]:
    return {"id": item["id"], "status": item["status"], "created_on": item["created_on"]}


def result_info(info: dict[str, Any]) -> dict[str, Any]:
    """A listing's paging facts, without celld's `now`."""
    return {key: info[key] for key in ("page", "per_page", "total_count", "total_pages")}


def status_change(result: dict[str, Any]) -> dict[str, Any]:
    """`PATCH .../status`'s answer, `{status, timestamp}` (celld's tools also get
    `applied`: whether the lifecycle let the action change anything)."""
    return {"status": result["status"], "timestamp": result["timestamp"]}


def instance(details: dict[str, Any]) -> dict[str, Any]:
    shaped: dict[str, Any] = {"status": details["status"], "params": details["params"]}
    trigger = details.get("trigger")
    if trigger is not None and trigger.get("source") == "cron":
        shaped["trigger"] = trigger
    steps = [step(s) for s in details["steps"]]
    error = details["error"]
    if error is not None:  # wrangler dev's order for an instance's error
        error = {"message": error.get("message"), "name": error.get("name")}
    shaped.update(
        queued=details["queued"],
        start=details["start"],
        end=details["end"],
        output=details["output"],
        error=error,
        steps=steps,
        step_count=len(steps),
    )
    return shaped


def step(row: dict[str, Any]) -> dict[str, Any]:
    name = f"{row['name']}-{row['count']}"
    kind = row["type"]
    if kind == "step":
        shaped: dict[str, Any] = {
            "name": name,
            "start": row["start"],
            "end": row["end"],
            "success": row["success"],
            "type": "step",
        }
        if "output" in row:
            shaped["output"] = row["output"]
        shaped["config"] = row["config"]
        shaped["attempts"] = [
            {"start": a["start"], "end": a["end"], "success": a["success"], "error": a["error"]}
            for a in row["attempts"]
        ]
        return shaped
    if kind == "sleep":
        return {
            "name": name,
            "start": row["start"],
            "end": row["end"],
            "finished": row["finished"],
            "type": "sleep",
            "error": row["error"],
        }
    return {
        "name": name,
        "start": row["start"],
        "end": row["end"],
        "finished": row["finished"],
        "type": kind,
        "error": row["error"],
        "output": row.get("output"),
    }
