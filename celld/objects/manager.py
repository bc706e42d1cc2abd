"""Durable Objects of one project: activation, routing, idle eviction, the cap and alarms.

Every isolate reaches objects through one host operation, ``do`` (a stub's RPC call or
fetch), answered with the callee's result. An object is activated on its first call
(isolate loaded, storage opened) and stays live while it is used; once it has had no
call and no host work for ``idle_ms`` it is evicted: its isolate is freed and its
storage stays on disk, so the next call brings it back. At most ``max_resident`` objects
are live (by default as many as the cells' cap allows resident workflow isolates, one per
32 MiB of memory: a live object costs about 1.5 MiB); past that the least recently used
idle ones are evicted first.

Alarms are rows of the index (see index.py), held in the cells' ``AlarmQueue`` on the
service clock (manual in tests, like workflow sleeps). An alarm whose ``alarm()`` throws
is retried with exponential backoff from 2 s, up to 6 retries, as Cloudflare documents;
its row is deleted only after the handler succeeded (or retries ran out), so a crash
fires it again after a restart: at least once.

On a store shared by several nodes (``placement``, celld/objects/placement.py) each object
is owned by one node at a time: a call for an object another node owns is forwarded to it,
each turn's commit reaches PostgreSQL before the turn ends, and the object's isolate obeys
the node's lease (its fence). Alarms are columns of the object's row there
(celld/objects/pgalarms.py): an alarm whose node died fires on the node that claims it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from celld.cells.alarms import AlarmQueue
from celld.cells.clock import Clock
from celld.cells.manager import default_max_resident
from celld.cells.tasks import TaskOwner
from celld.isolate.host import HostError, OpHandler
from celld.isolate.isolate import Limits
from celld.isolate.program import Program
from celld.isolate.threads import JsThreadPool
from celld.isolate.websockets import End, Event, SocketHub
from celld.objects.ids import ObjectRef, check_id
from celld.objects.index import Alarm, ObjectIndex
from celld.objects.live import LiveObject
from celld.objects.migrations import class_folder
from celld.objects.placement import Claim, NotOwner, Placement, SharedFile
from celld.objects.storage import ObjectStorage, StorageError
from celld.project.objects import DurableObjectsConfig
from celld.store.base import StoreUnavailable

if TYPE_CHECKING:
    from celld.objects.pgalarms import PgAlarms

log = logging.getLogger("celld.objects")

DEFAULT_IDLE_MS = 60_000
ALARM_RETRIES = 6
ALARM_FIRST_BACKOFF_MS = 2_000


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


class ObjectManager:
    def __init__(
        self,
        config: DurableObjectsConfig,
        state: Path,
        clock: Clock,
        threads: JsThreadPool,
        program: Program,
        env_message: dict[str, Any],
        *,
        limits: Limits | None = None,
        synchronous: str = "FULL",
        idle_ms: int | None = None,
        max_resident: int | None = None,
        sockets: SocketHub | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.config = config
        self.placement = placement
        self.state = state
        self.clock = clock
        self.threads = threads
        self.program = program
        self.env_message = env_message
        self.limits = limits or Limits()
        self.synchronous = synchronous
        self.idle_ms = (
            idle_ms if idle_ms is not None else _env_int("CELLD_OBJECT_IDLE_MS", DEFAULT_IDLE_MS)
        )
        self.max_resident = max_resident or _env_int(
            "CELLD_OBJECT_RESIDENT_MAX", default_max_resident()
        )
        self.classes = dict(config.classes)
        #: Host operations object isolates get (the service fills them in at start).
        self.ops: Mapping[str, OpHandler] = {}
        #: Whether this process runs an object (class, id): with `celld run --workers N`
        #: each object has one owning process (celld.cluster), whose alarms only it fires.
        self.owns: Callable[[str, str], bool] = lambda cls, object_id: True
        self.index = ObjectIndex(state / "objects" / "index.sqlite3", synchronous=synchronous)
        #: where alarms live: the index, or the shared store's object rows
        self.alarm_rows: ObjectIndex | PgAlarms = self.index
        if placement is not None:
            from celld.objects.pgalarms import PgAlarms  # asyncpg: only with PostgreSQL

            self.alarm_rows = PgAlarms(placement, sorted(self.classes))
        self.live: dict[ObjectRef, LiveObject] = {}
        self._starting: dict[ObjectRef, asyncio.Future[LiveObject]] = {}
        self.alarms = AlarmQueue(clock, self._fire_alarm)
        self.tasks = TaskOwner("objects")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.activations = 0
        self.evictions = 0
        self.alarm_runs = 0
        #: objects whose alarm() runs now (not armed again meanwhile)
        self._alarm_running: set[ObjectRef] = set()
        #: WebSockets: hibernatable ones wake their object (`_socket_event`)
        self.sockets = sockets
        self._socket_queues: dict[ObjectRef, list[tuple[End, Event]]] = {}
        self.socket_wakes = 0
        if sockets is not None:
            sockets.object_event = self._socket_event
            sockets.auto_seen = self._auto_seen

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        # Migrations were applied before the service started (Service, migrate_state).
        await asyncio.to_thread(self.index.open)
        if self.placement is not None:
            self.placement.start()
            self.placement.lease.on_epoch(self._rejoined)
            self.placement.nodes.route("do", self.op_do)
            self.placement.nodes.tickers.append(self._claim_alarms)
        for alarm in await asyncio.to_thread(self.index.alarms):
            if self.placement is None and self.owns(alarm.ref.cls, alarm.ref.id):
                self.alarms.schedule(alarm.ref, alarm.at)
        self.alarms.start()

    async def stop(self) -> None:
        if self.placement is not None and self._claim_alarms in self.placement.nodes.tickers:
            self.placement.nodes.tickers.remove(self._claim_alarms)
        await self.alarms.stop()
        await self.tasks.close()  # running alarms and evictions stop here
        for obj in list(self.live.values()):
            await self._close(obj)
        self.live.clear()
        await asyncio.to_thread(self.index.close)

    # -- the host operation ----------------------------------------------------------

    async def op_do(self, message: dict[str, Any]) -> dict[str, Any]:
        """``{cls, id, name?, kind: call|fetch, ...}`` from a stub in any isolate."""
        cls = message.get("cls")
        if not isinstance(cls, str) or cls not in self.classes:
            raise HostError(f"celld: no Durable Object class {cls!r} is bound", "TypeError")
        try:
            ref = ObjectRef(cls, check_id(message.get("id")))
        except ValueError as error:
            raise HostError(str(error), "TypeError") from None
        if message.get("kind") not in ("call", "fetch"):
            raise HostError(f"celld: unknown Durable Object call {message.get('kind')!r}")
        name = message.get("name")
        name = name if isinstance(name, str) else None
        call = {
            k: v for k, v in message.items() if k not in ("op", "t", "cls", "id", "to", "forwarded")
        }
        if self.placement is None:
            return await self._call(await self.activate(ref, name), call)
        return await self._placed_call(ref, name, call, message)

    async def _placed_call(
        self, ref: ObjectRef, name: str | None, call: dict[str, Any], message: dict[str, Any]
    ) -> dict[str, Any]:
        """On a shared store: run the call here if this node owns the object (claiming it if
        it is free), or have its owner run it."""
        assert self.placement is not None
        obj = self.live.get(ref)
        if obj is not None and obj.broken is None and obj.fence is not None and not obj.fence.stale:
            return await self._call(obj, call)  # live here: this node owns it

        async def here(claim: Claim) -> dict[str, Any]:
            return await self._call(await self.activate(ref, name, claim), call)

        key = (ref.cls, ref.id)
        try:
            if message.get("forwarded"):  # the sender found this node the owner: no onward hop
                return await here(await self.placement.claim_here(key))
            return await self.placement.place(key, here, {**message, "to": "do"})  # type: ignore[no-any-return]
        except StoreUnavailable as error:  # (its file could not be rebuilt from the store)
            raise HostError(f"Durable Object {ref.cls}/{ref.id}: {error}") from None

    async def _claim_alarms(self) -> None:
        """Each maintenance tick: objects with an alarm whose node died are taken over here,
        and their alarms armed."""
        assert not isinstance(self.alarm_rows, ObjectIndex)  # PgAlarms
        claimed = await self.alarm_rows.claim_orphans()
        for alarm in claimed:
            self._arm(alarm)
        if claimed:
            log.warning("took over %d Durable Objects with alarms from a dead node", len(claimed))

    def _arm(self, alarm: Alarm) -> None:
        """Arm an alarm read from the shared store (unless it is the one running now)."""
        if alarm.ref not in self._alarm_running and alarm.ref.cls in self.classes:
            self.alarms.schedule(alarm.ref, alarm.at)

    def _rejoined(self, old: int, new: int) -> None:
        """The node was taken over and joined again under a new token: another node may own
        its objects now. Drop every live one (nothing of theirs may act again); a later
        call places the object again, from the store."""
        for obj in list(self.live.values()):
            del self.live[obj.ref]
            self.tasks.spawn(self._close(obj), f"dropping {obj.ref} (node {old} taken over)")

    async def _call(self, obj: LiveObject, message: dict[str, Any]) -> dict[str, Any]:
        if obj.idle_timer is not None:
            obj.idle_timer.cancel()
            obj.idle_timer = None
        return await obj.call(message)

    # -- activation and eviction -----------------------------------------------------

    async def activate(
        self, ref: ObjectRef, name: str | None, claim: Claim | None = None
    ) -> LiveObject:
        obj = self.live.get(ref)
        if obj is not None and obj.broken is None:
            if name is not None and obj.name is None:
                obj.name = name
            return obj
        starting = self._starting.get(ref)
        if starting is not None:
            return await asyncio.shield(starting)
        future: asyncio.Future[LiveObject] = asyncio.get_running_loop().create_future()
        self._starting[ref] = future
        try:
            obj = await self._start(ref, name, claim)
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: waiters re-raise it
            raise
        finally:
            self._starting.pop(ref, None)
        future.set_result(obj)
        return obj

    async def _start(self, ref: ObjectRef, name: str | None, claim: Claim | None) -> LiveObject:
        await self._make_room()
        path = class_folder(self.state, ref.cls) / f"{ref.id}.sqlite3"
        shared: SharedFile | None = None
        fence = None
        if self.placement is not None:
            if claim is None:  # (alarms and WebSocket events start objects too)
                claim = await self.placement.claim_here((ref.cls, ref.id))
            fence = self.placement.fence()
            shared = SharedFile(self.placement, (ref.cls, ref.id), path)
            await shared.prepare(claim)
            # Its alarm fires here now (it may have been set on the node that owned it).
            alarm = await asyncio.to_thread(self.alarm_rows.get_alarm, ref)
            if alarm is not None:
                self._arm(alarm)
        storage = ObjectStorage(
            path,
            sqlite=self.classes[ref.cls],
            alarms=lambda op, message: self._alarm_op(ref, op, message),
            synchronous=self.synchronous,
            shared=shared,
        )
        await asyncio.to_thread(storage.open)
        obj = LiveObject(ref, name, storage, self._gone)
        obj.fence = fence
        obj.call_later = lambda ms, callback: self.clock.call_at(self.clock.now() + ms, callback)
        try:
            await obj.start(
                self.threads.pick(),
                self.program,
                self.limits,
                self.ops,
                self.env_message,
                self.sockets,
            )
        except BaseException:
            await obj.close()
            raise
        obj.host.idle_callback = lambda: self._maybe_idle(obj)  # type: ignore[union-attr]
        self.live[ref] = obj
        self.activations += 1
        return obj

    async def _make_room(self) -> None:
        while len(self.live) >= self.max_resident:
            idle = [o for o in self.live.values() if o.idle]
            if not idle:
                return  # every live object is busy: go over the cap rather than wait
            await self._evict(min(idle, key=lambda o: o.last_used))

    def _maybe_idle(self, obj: LiveObject) -> None:
        if self.live.get(obj.ref) is not obj or not obj.idle or obj.idle_timer is not None:
            return
        obj.idle_timer = self.clock.call_at(
            self.clock.now() + self.idle_ms, lambda: self._idle_due(obj)
        )

    def _idle_due(self, obj: LiveObject) -> None:
        obj.idle_timer = None
        if self.live.get(obj.ref) is obj and obj.idle:
            self.tasks.spawn(self._evict(obj), f"evicting {obj.ref}")

    async def _evict(self, obj: LiveObject) -> None:
        if self.live.get(obj.ref) is obj:
            del self.live[obj.ref]
            self.evictions += 1
        await self._close(obj)

    async def _close(self, obj: LiveObject) -> None:
        if obj.idle_timer is not None:
            obj.idle_timer.cancel()
            obj.idle_timer = None
        await obj.close()

    def _gone(self, obj: LiveObject) -> None:
        """The object's isolate faulted: drop it (the next call starts it afresh)."""
        if self.live.get(obj.ref) is obj:
            del self.live[obj.ref]
        self.tasks.spawn(self._close(obj), f"closing the broken object {obj.ref}")

    async def evict_idle(self) -> int:
        """Evict every idle object now (tests and the operator); returns how many."""
        idle = [o for o in self.live.values() if o.idle]
        for obj in idle:
            await self._evict(obj)
        return len(idle)

    # -- hibernatable WebSockets ---------------------------------------------------------

    def _socket_event(self, ref: Any, end: End, event: Event) -> None:
        """An event for a socket the object accepted to hibernate: delivered in order, the
        object activated first if it was evicted (its constructor runs again)."""
        queue = self._socket_queues.get(ref)
        if queue is not None:
            queue.append((end, event))
            return
        self._socket_queues[ref] = [(end, event)]
        self.tasks.spawn(self._deliver_socket_events(ref), f"WebSocket events of {ref}")

    async def _deliver_socket_events(self, ref: ObjectRef) -> None:
        queue = self._socket_queues[ref]
        try:
            while queue:
                end, event = queue.pop(0)
                if ref.cls not in self.classes:
                    continue
                if ref not in self.live:
                    self.socket_wakes += 1
                try:
                    obj = await self.activate(ref, end.owner_name)
                except HostError as error:
                    log.warning("a WebSocket event of %s was dropped: %s", ref, error)
                    continue
                if obj.idle_timer is not None:
                    obj.idle_timer.cancel()
                    obj.idle_timer = None
                obj.submit({"kind": "ws", "ws": end.id, **event}).add_done_callback(_retrieved)
        finally:
            self._socket_queues.pop(ref, None)

    def _auto_seen(self, end: End) -> None:
        obj = self.live.get(end.owner)
        if obj is not None and obj.host is not None:
            obj.host.post({"k": "ws.ts", "ws": end.id, "ts": end.auto_ts})

    # -- alarms ----------------------------------------------------------------------

    def _alarm_op(self, ref: ObjectRef, op: str, message: dict[str, Any]) -> Any:
        """``alarm.get|set|delete`` from the object's JS thread (synchronous)."""
        try:
            return self._alarm_call(ref, op, message)
        except StoreUnavailable as error:
            raise StorageError(f"{op.replace('alarm.', '')}Alarm(): {error}") from None

    def _alarm_call(self, ref: ObjectRef, op: str, message: dict[str, Any]) -> Any:
        obj = self.live.get(ref)
        if op == "alarm.get":
            alarm = self.alarm_rows.get_alarm(ref)
            if alarm is None or (obj is not None and obj.running_alarm == alarm.at):
                return None
            return alarm.at
        if op == "alarm.set":
            at = message.get("at")
            if not isinstance(at, int | float) or at != at:
                raise StorageError(
                    "setAlarm() takes a Date or a number of milliseconds", "TypeError"
                )
            at = int(at)
            self.alarm_rows.set_alarm(ref, obj.name if obj else None, at)
            self._schedule_threadsafe(ref, at)
            return None
        if op == "alarm.delete":
            self.alarm_rows.delete_alarm(ref)
            self._schedule_threadsafe(ref, None)
            return None
        raise StorageError(f"celld: no alarm operation {op!r}")

    def _schedule_threadsafe(self, ref: ObjectRef, at: int | None) -> None:
        assert self.loop is not None
        if at is None:
            self.loop.call_soon_threadsafe(self.alarms.cancel, ref)
        else:
            self.loop.call_soon_threadsafe(self.alarms.schedule, ref, at)

    def _fire_alarm(self, ref: Any, when: int) -> None:
        self.tasks.spawn(self._run_alarm(ref, when), f"the alarm of {ref}")

    async def _run_alarm(self, ref: ObjectRef, when: int) -> None:
        alarm = await asyncio.to_thread(self.alarm_rows.get_alarm, ref)
        if alarm is None or alarm.at != when:
            return  # deleted or moved since it was scheduled
        if ref.cls not in self.classes:
            await asyncio.to_thread(self.alarm_rows.delete_alarm, ref, when)
            return
        ok = False
        obj: LiveObject | None = None
        self._alarm_running.add(ref)
        try:
            obj = await self.activate(ref, alarm.name)
            obj.running_alarm = when
            self.alarm_runs += 1
            result = await self._call(
                obj, {"kind": "alarm", "retryCount": alarm.retries, "isRetry": alarm.retries > 0}
            )
            ok = "e" not in result
            if ok:
                # Deleted while getAlarm() still reads null for it: no call in between
                # sees the alarm that has just run.
                await asyncio.to_thread(self.alarm_rows.delete_alarm, ref, when)
                return
            log.warning("alarm() of Durable Object %s threw; it will be retried", ref)
        except NotOwner:
            return  # another node took the object (and its alarm) over
        except (HostError, StoreUnavailable) as error:
            log.warning("alarm() of Durable Object %s failed: %s", ref, error)
        finally:
            self._alarm_running.discard(ref)
            if obj is not None:
                obj.running_alarm = None
        retries = alarm.retries + 1
        if retries > ALARM_RETRIES:
            log.error("alarm() of Durable Object %s failed %d times; giving up", ref, retries)
            await asyncio.to_thread(self.alarm_rows.delete_alarm, ref, when)
            return
        at = self.clock.now() + ALARM_FIRST_BACKOFF_MS * 2 ** (retries - 1)
        current = await asyncio.to_thread(self.alarm_rows.get_alarm, ref)
        if current is not None and current.at == when:  # not moved by the handler
            await asyncio.to_thread(self.alarm_rows.set_alarm, ref, alarm.name, at, retries)
            self.alarms.schedule(ref, at)

    # -- figures ---------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        return {
            "live": len(self.live),
            "activations": self.activations,
            "evictions": self.evictions,
            "alarms_pending": len(self.alarms),
            "alarm_runs": self.alarm_runs,
            **(
                {"pages_shipped": self.placement.ships, "rebuilt": self.placement.moves}
                if self.placement is not None
                else {}
            ),
        }


def _retrieved(future: asyncio.Future[Any]) -> None:
    """A socket event's outcome: the handler's errors were logged in the object."""
    if not future.cancelled():
        future.exception()
