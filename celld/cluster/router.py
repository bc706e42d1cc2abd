"""Workflow binding calls in a cluster: each goes to the process that owns its instance.

The `wf.binding` host operation of every process is wrapped: a call naming one instance
runs here when this process owns it and is forwarded to its owner otherwise; a create
without an id gets its id here first, so that it has an owner. createBatch and
deleteBatch are split by owner and their answers put back in the caller's order; a
batch the local binding would refuse whole (empty, too large, a bad id) is refused here
before any part of it is sent anywhere.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from celld.cells.binding import MAX_BATCH
from celld.cluster.placement import owner_of
from celld.engine import WorkflowError, validate_instance_id

Local = Callable[[dict[str, Any]], Awaitable[Any]]
Forward = Callable[[int, dict[str, Any]], Awaitable[Any]]


class WorkflowRouter:
    def __init__(self, index: int, size: int, local: Local, forward: Forward) -> None:
        self.index = index
        self.size = size
        self.local = local
        self.forward = forward

    def handle(self, message: dict[str, Any]) -> Awaitable[Any]:
        method = message.get("method")
        if method == "createBatch":
            return self._create_batch(message)
        if method == "deleteBatch":
            return self._delete_batch(message)
        if method == "create" and message.get("id") is None:
            message = {**message, "id": str(uuid.uuid4())}
        return self._send(self._owner(message, message.get("id")), message)

    def _owner(self, message: dict[str, Any], instance_id: Any) -> int:
        workflow = message.get("workflow")
        if not isinstance(workflow, str) or not isinstance(instance_id, str):
            return self.index  # the local binding gives the error
        return owner_of(workflow, instance_id, self.size)

    def _send(self, owner: int, message: dict[str, Any]) -> Awaitable[Any]:
        return self.local(message) if owner == self.index else self.forward(owner, message)

    @staticmethod
    def _whole_refused(items: Any) -> bool:
        """True when the local binding refuses this batch as a whole."""
        return not isinstance(items, list) or not items or len(items) > MAX_BATCH

    async def _create_batch(self, message: dict[str, Any]) -> Any:
        items = message.get("instances")
        if self._whole_refused(items) or not all(isinstance(i, dict) for i in items):
            return await self.local(message)
        try:
            for item in items:
                if item.get("id") is not None:
                    validate_instance_id(item["id"])
        except WorkflowError:
            return await self.local(message)  # refuses the whole batch, as alone
        items = [item if item.get("id") is not None else {**item, "id": str(uuid.uuid4())}
                 for item in items]  # fmt: skip
        groups: dict[int, list[int]] = {}
        for position, item in enumerate(items):
            groups.setdefault(self._owner(message, item["id"]), []).append(position)
        owners = list(groups)
        answers = await asyncio.gather(
            *(
                self._send(
                    owner,
                    {**message, "instances": [items[p] for p in groups[owner]], "report": True},
                )
                for owner in owners
            )
        )
        created: set[str] = set()
        errors: list[dict[str, Any]] = []
        for owner, answer in zip(owners, answers, strict=True):
            created.update(answer["created"])
            for error in answer["errors"]:
                errors.append({**error, "index": groups[owner][error["index"]]})
        errors.sort(key=lambda e: e["index"])
        ids: list[str] = []
        for item in items:
            if item["id"] in created and item["id"] not in ids:
                ids.append(item["id"])
        return {"created": ids, "errors": errors} if message.get("report") else {"ids": ids}

    async def _delete_batch(self, message: dict[str, Any]) -> Any:
        ids = message.get("ids")
        if self._whole_refused(ids):
            return await self.local(message)
        groups: dict[int, list[Any]] = {}
        for instance_id in ids:
            groups.setdefault(self._owner(message, instance_id), []).append(instance_id)
        owners = list(groups)
        answers = await asyncio.gather(
            *(self._send(owner, {**message, "ids": groups[owner]}) for owner in owners)
        )
        deleted_keys = {_key(entry["id"]) for answer in answers for entry in answer["deleted"]}
        deleted: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        failure = {answer_error["id"] if isinstance(answer_error["id"], str) else
                   repr(answer_error["id"]): answer_error
                   for answer in answers for answer_error in answer["errors"]}  # fmt: skip
        for instance_id in ids:
            if _key(instance_id) in deleted_keys:
                deleted.append({"id": instance_id})
            else:
                errors.append({**failure[_key(instance_id)], "id": instance_id})
        return {"deleted": deleted, "errors": errors}


def _key(instance_id: Any) -> str:
    return instance_id if isinstance(instance_id, str) else repr(instance_id)
