"""Routes over every instance of a workflow, answered from every process's shard.

With `--workers N` each process's store holds a shard of the instances, so a listing,
a workflow's counts, "delete every instance", an introspection session (every instance
created from now on) or `latest` needs all of them. celld.cluster.http sends such a
request to every process (`Ask`: each answers it from its own shard through its own
app, unchanged) and the functions here merge the answers into what one process holding
every instance would have said:

* a listing, newest first: page P of size S is items (P-1)*S .. P*S-1 of the merged
  order, so each shard is asked for its first P*S items (in pages of at most
  `MAX_PER_PAGE`; a shard with fewer stops early) and the answers are merged by
  creation time, ties kept in shard order (the order is then the same for every page,
  so pages neither skip nor repeat an instance). A deep page costs reading P*S rows
  in every shard; counts are the sum of the shards' counts;
* a workflow's details: per-status counts summed, the rest (schedules, version) from
  process 0, which alone runs the cron schedules;
* a change (delete every instance, start/modify/end an introspection session) is
  applied in every shard; the first refusal is answered as is (a start refused in one
  shard is ended again in those that took it), otherwise process 0's answer with the
  lists of instances of every shard.

A request that a shard refuses (bad paging, an unknown workflow) gets that refusal,
the same in every shard, so it is checked by asking the shards as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson

from celld.server.operator import MAX_PER_PAGE

#: (process index, method, query string, body) -> (status, headers, body)
Answer = tuple[int, list[tuple[str, str]], bytes]
Ask = Callable[[int, str, str, bytes], Awaitable[Answer]]


def _query(query: str, **changes: Any) -> str:
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in changes]
    return urlencode([*pairs, *((k, str(v)) for k, v in changes.items())])


def _number(query: str, name: str, default: int) -> int | None:
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == name and value != "":
            try:
                return int(value)
            except ValueError:
                return None  # the shard says what is wrong
    return default


def _json(answer: Answer) -> dict[str, Any]:
    parsed = orjson.loads(answer[2])
    assert isinstance(parsed, dict)
    return parsed


def _with_body(answer: Answer, data: dict[str, Any]) -> Answer:
    return answer[0], answer[1], orjson.dumps(data)


async def _everywhere(ask: Ask, size: int, method: str, query: str, body: bytes) -> list[Answer]:
    return list(await asyncio.gather(*(ask(i, method, query, body) for i in range(size))))


async def _shard_head(
    ask: Ask, index: int, query: str, wanted: int
) -> list[dict[str, Any]] | Answer:
    """The first `wanted` items of one shard's listing (its refusal, if it refuses)."""
    items: list[dict[str, Any]] = []
    per_page = min(wanted, MAX_PER_PAGE)
    page = 1
    while len(items) < wanted:
        answer = await ask(index, "GET", _query(query, page=page, per_page=per_page), b"")
        if answer[0] != 200:
            return answer
        data = _json(answer)
        got = data["result"]
        items.extend(got)
        if len(got) < per_page or page * per_page >= data["result_info"]["total_count"]:
            break
        page += 1
    return items[:wanted]


async def list_instances(ask: Ask, size: int, query: str) -> Answer:
    """GET .../workflows/{wf}/instances: one page of the merged listing."""
    page = _number(query, "page", 1)
    per_page = _number(query, "per_page", 25)
    first = await _everywhere(ask, size, "GET", query, b"")
    for answer in first:
        if answer[0] != 200:
            return answer
    if page is None or per_page is None:  # every shard took it: cannot happen
        return first[0]
    heads: list[list[dict[str, Any]]] = []
    if page == 1:
        heads = [_json(answer)["result"] for answer in first]
    else:
        found = await asyncio.gather(
            *(_shard_head(ask, i, query, page * per_page) for i in range(size))
        )
        for head in found:
            if not isinstance(head, list):
                return head
            heads.append(head)
    ranked = [
        (item["created_on"] or "", -shard, -position, item)
        for shard, head in enumerate(heads)
        for position, item in enumerate(head)
    ]
    ranked.sort(key=lambda entry: entry[:3], reverse=True)
    start = (page - 1) * per_page
    items = [entry[3] for entry in ranked[start : start + per_page]]
    data = _json(first[0])
    total = sum(_json(answer)["result_info"]["total_count"] for answer in first)
    info = {
        **data["result_info"],
        "total_count": total,
        "total_pages": max(1, -(-total // per_page)),
    }
    return _with_body(first[0], {**data, "result": items, "result_info": info})


async def newest_id(ask: Ask, size: int, query: str) -> str | None:
    """The id of the newest instance across the shards (None: there is none)."""
    answer = await list_instances(ask, size, _query(query, page=1, per_page=1))
    if answer[0] != 200:
        return None
    items = _json(answer)["result"]
    return str(items[0]["id"]) if items else None


async def workflow_details(ask: Ask, size: int, query: str) -> Answer:
    """GET .../workflows/{wf}: per-status counts summed over the shards."""
    answers = await _everywhere(ask, size, "GET", query, b"")
    for answer in answers:
        if answer[0] != 200:
            return answer
    data = _json(answers[0])
    counts = dict(data["result"]["instances"])
    for answer in answers[1:]:
        for status, count in _json(answer)["result"]["instances"].items():
            counts[status] = counts.get(status, 0) + count
    return _with_body(answers[0], {**data, "result": {**data["result"], "instances": counts}})


#: in a change's answer, the lists that name instances: each shard names its own
_INSTANCE_LISTS = ("instances", "disposed")


async def apply_everywhere(
    ask: Ask, size: int, method: str, query: str, body: bytes, *, undo: str | None = None
) -> Answer:
    """A change applied in every shard. With `undo` (a method), a change refused by some
    shard is undone with that method in the shards that took it."""
    answers = await _everywhere(ask, size, method, query, body)
    refused = [answer for answer in answers if answer[0] != 200]
    if refused:
        if undo is not None:
            took = [i for i, answer in enumerate(answers) if answer[0] == 200]
            await asyncio.gather(*(ask(i, undo, "", b"") for i in took))
        return refused[0]
    data = _json(answers[0])
    result = data.get("result")
    if isinstance(result, dict):
        for key in _INSTANCE_LISTS:
            if isinstance(result.get(key), list):
                merged = [x for answer in answers for x in _json(answer)["result"][key]]
                result = {**result, key: merged}
        data = {**data, "result": result}
    return _with_body(answers[0], data)


async def every_queue(ask: Ask, size: int) -> Answer:
    """GET /cdn-cgi/celld/queues: each process lists the queues it owns (consumes); the
    lists joined, by queue name."""
    answers = await _everywhere(ask, size, "GET", "", b"")
    for answer in answers:
        if answer[0] != 200:
            return answer
    rows = [row for answer in answers for row in _json(answer)["result"]]
    data = _json(answers[0])
    return _with_body(answers[0], {**data, "result": sorted(rows, key=lambda r: r["queue"])})
