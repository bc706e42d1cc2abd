"""Durable Objects and D1 databases on several nodes sharing one PostgreSQL store: each one
is owned by one node at a time, and its pages live where every node reaches them.

The decision and its reasons are in celld/objects/DECISIONS.md; in short:

* **Ownership** is a row of ``do_objects`` naming a node's fencing token. A node takes an
  object when nobody owns it or its owner's row in ``celld_nodes`` is gone (reaped once its
  lease ran out), under its own lease held for the transaction (``NodeMembership.hold``),
  exactly as workflow instances are claimed. A live owner keeps its objects until it
  leaves or dies; calls from other nodes are forwarded to it through ``celld_inbox``
  (celld/store/pgnodes.py ``forward``), and one the owner never took is withdrawn and
  placed again.
* **Storage**: the owner works on its own SQLite file (SQLite's dialect, the sqlguard
  sandbox and synchronous ``sql.exec`` stay as they are). After each commit, the pages it
  changed (celld/objects/pages.py) are written to ``do_pages`` in one transaction that
  holds the node's lease, checks the object's row still names this node and the version
  it last wrote, and bumps the version. Only then is anything the commit made possible
  released (an object's turn does not end, a D1 query does not answer, before it). A
  node whose lease was taken over cannot write: its late turn faults and sends nothing.
* **Moving**: a node that claims an object checks the version against the one its own
  file was last shipped or rebuilt at by this process (``known``); any difference, or a
  process that started since, and the file is rebuilt from ``do_pages``. Every
  acknowledged commit is in those pages, so nothing acknowledged is lost.

The PostgreSQL modules (and asyncpg) are imported where a placement talks to the store,
not when this module is: a server on SQLite imports this module and never loads them
(asyncpg is ~2.7 MB of an idle server's RSS).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from celld.isolate.host import HostError
from celld.objects.pages import CHECKPOINT_BYTES, Changes, WalReader, rebuild, remove_files
from celld.store.base import Fenced, NotDone, OutcomeUnknown, OwnedElsewhere, StoreUnavailable

if TYPE_CHECKING:
    from celld.store.lease import Fence, Lease
    from celld.store.postgres import PostgresStore

log = logging.getLogger("celld.objects")

T = TypeVar("T")
#: Seconds a page write may take before the commit counts as failed (the owner's turn
#: faults and nothing it computed is released).
SHIP_TIMEOUT_S = 30.0
#: Times a call is placed again after its owner moved or died before taking it.
PLACEMENT_TRIES = 20

_CLAIM = (
    "INSERT INTO do_objects (namespace, object, owner) VALUES ($1, $2, $3) "
    "ON CONFLICT (namespace, object) DO UPDATE SET owner = EXCLUDED.owner "
    "WHERE do_objects.owner IS NULL OR do_objects.owner = EXCLUDED.owner OR NOT EXISTS "
    "(SELECT 1 FROM celld_nodes n WHERE n.token = do_objects.owner) "
    "RETURNING owner, version, page_size, page_count"
)
_OWNER = "SELECT owner FROM do_objects WHERE namespace = $1 AND object = $2"
#: One commit's pages, in one statement (one round trip, its own transaction): only if
#: the node's lease is current (its row locked against reaping until the statement ends,
#: as `NodeMembership.hold` does) and the object's row still names this node at the
#: version it last wrote. Returns the new version, or no row (then nothing was written).
_SHIP = (
    "WITH lease AS (SELECT 1 FROM celld_nodes WHERE token = $3 "
    "AND lease_until > clock_timestamp() FOR KEY SHARE), "
    "bumped AS (UPDATE do_objects SET version = version + 1, page_size = $5, page_count = $6 "
    "WHERE namespace = $1 AND object = $2 AND owner = $3 AND version = $4 "
    "AND EXISTS (SELECT 1 FROM lease) RETURNING version), "
    "put AS (INSERT INTO do_pages (namespace, object, page_no, data) "
    "SELECT $1, $2, p.n, p.d FROM unnest($7::int[], $8::bytea[]) AS p(n, d) "
    "WHERE EXISTS (SELECT 1 FROM bumped) "
    "ON CONFLICT (namespace, object, page_no) DO UPDATE SET data = EXCLUDED.data), "
    "trimmed AS (DELETE FROM do_pages WHERE namespace = $1 AND object = $2 AND page_no > $6 "
    "AND EXISTS (SELECT 1 FROM bumped)) "
    "SELECT version FROM bumped"
)
_PAGES = (
    "SELECT page_no, data FROM do_pages WHERE namespace = $1 AND object = $2 "
    "AND page_no <= $3 ORDER BY page_no"
)

Key = tuple[str, str]  # (namespace, object)


class NotOwner(OwnedElsewhere):
    """A call forwarded here for an object this node does not own (any more): the sender
    places it again (the inbox answers ``moved``)."""

    def __init__(self, key: tuple[str, str], owner: int) -> None:
        Exception.__init__(self, f"{key[0]}/{key[1]} is owned by node {owner}")
        self.owner = owner


@dataclass
class Claim:
    owner: int
    version: int
    page_size: int
    page_count: int


class Placement:
    """This node's side of object placement on a shared store."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.nodes = store.nodes
        #: version of this node's local file of each object, as this process last shipped
        #: or rebuilt it (a file this process has not vouched for is never trusted)
        self.known: dict[Key, int] = {}
        self._known_lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        #: D1 databases of this node by id (celld/bindings/pgd1.py), kept across reloads
        self.databases: dict[str, Any] = {}
        self.ships = 0
        self.moves = 0  # files rebuilt from the store

    @property
    def lease(self) -> Lease:
        return self.nodes.lease

    @property
    def token(self) -> int:
        return self.nodes.token

    def fence(self) -> Fence | None:
        return self.nodes.lease.fence()

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()

    def _pool(self) -> Any:
        if self.store.pool is None:
            raise StoreUnavailable("the shared store is not open")
        return self.store.pool

    # -- owning -----------------------------------------------------------------------------

    async def claim(self, key: Key) -> Claim:
        """Take `key` if it is free (or already ours); the owner it has now either way."""
        from celld.store.pgnodes import UNREACHABLE

        token = self.token
        try:
            async with self._pool().acquire() as connection, connection.transaction():
                await self.nodes.hold(connection, token)
                row = await connection.fetchrow(_CLAIM, *key, token)
                if row is None:
                    owner = await connection.fetchval(_OWNER, *key)
                    return Claim(int(owner), -1, 0, 0)
        except UNREACHABLE as error:
            raise StoreUnavailable(f"the shared store could not be reached: {error}") from error
        return Claim(token, int(row["version"]), int(row["page_size"]), int(row["page_count"]))

    async def restore(self, key: Key, path: Path, claim: Claim) -> None:
        """Make the local file at `path` hold the object as of `claim` (ours): kept if this
        process shipped or rebuilt it at that version, rebuilt from the store otherwise."""
        if self.known.get(key) == claim.version and (claim.version == 0 or path.exists()):
            return
        if claim.version == 0:
            await asyncio.to_thread(remove_files, path)  # a fresh object: a fresh file
        else:
            from celld.store.pgnodes import UNREACHABLE

            try:
                async with self._pool().acquire() as connection:
                    rows = await connection.fetch(_PAGES, *key, claim.page_count)
            except UNREACHABLE as error:
                raise StoreUnavailable(f"the shared store could not be read: {error}") from error
            pages = [(int(r["page_no"]), bytes(r["data"])) for r in rows]
            await asyncio.to_thread(rebuild, path, claim.page_size, pages)
            self.moves += 1
            log.info("rebuilt %s/%s from the shared store (version %d)", *key, claim.version)
        self._set_known(key, claim.version)

    def forget(self, key: Key) -> None:
        """The local file may hold commits the store never took: never trust it again."""
        with self._known_lock:
            self.known.pop(key, None)

    def _set_known(self, key: Key, version: int) -> None:
        with self._known_lock:
            self.known[key] = version

    # -- writing pages ------------------------------------------------------------------------

    async def ship(self, key: Key, token: int, version: int, changes: Changes) -> int:
        """Write what one commit changed, as owner `token` at `version`; the new version.
        Fenced if this node no longer owns the object (or its lease is not current)."""
        from celld.store.pgnodes import UNREACHABLE

        numbers = sorted(changes.pages)
        try:
            async with self._pool().acquire() as connection:
                new = await connection.fetchval(
                    _SHIP,
                    *key,
                    token,
                    version,
                    changes.page_size,
                    changes.page_count,
                    numbers,
                    [changes.pages[n] for n in numbers],
                )
                if new is None:
                    # Say why (and let the node react to a lost lease as on any commit).
                    async with connection.transaction():
                        await self.nodes.hold(connection, token)
                    raise Fenced(
                        f"{key[0]}/{key[1]} is no longer owned by node {token} at version "
                        f"{version}: its commit is not written"
                    )
        except UNREACHABLE as error:
            raise StoreUnavailable(f"the shared store could not be written: {error}") from error
        self.ships += 1
        self._set_known(key, int(new))
        return int(new)

    def ship_blocking(self, key: Key, token: int, version: int, changes: Changes) -> int:
        """`ship` from a thread other than the event loop's (an object's JS thread, whose
        turn must not end before its pages are written)."""
        return self.blocking(self.ship(key, token, version, changes))

    def blocking(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the event loop from another thread and wait for it."""
        loop = self.loop
        if loop is None:
            work.close()
            raise StoreUnavailable("object placement is not started")
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None  # (the usual case: a thread with no loop of its own)
        if running is loop:
            work.close()
            raise RuntimeError("a blocking store call would wait on its own event loop")
        future = asyncio.run_coroutine_threadsafe(work, loop)
        return future.result(SHIP_TIMEOUT_S)

    # -- calls from any node ------------------------------------------------------------------

    async def _claim_for_call(self, key: Key) -> Claim:
        """`claim`, with the store's failure as the caller's error."""
        try:
            return await self.claim(key)
        except StoreUnavailable as error:
            raise HostError(
                f"{key[0]}/{key[1]}: the shared store is unavailable: {error}"
            ) from None

    async def claim_here(self, key: Key) -> Claim:
        """For a call forwarded to this node: claim `key`, NotOwner if another node has it."""
        claim = await self._claim_for_call(key)
        if claim.owner != self.token:
            raise NotOwner(key, claim.owner)
        return claim

    async def place(
        self,
        key: Key,
        local: Callable[[Claim], Awaitable[T]],
        message: dict[str, Any],
    ) -> T | Any:
        """Run `local(claim)` if this node owns `key` (claiming it if it is free), or have its
        owner run `message` (celld_inbox) and return the owner's answer."""
        for _ in range(PLACEMENT_TRIES):
            claim = await self._claim_for_call(key)
            if claim.owner == self.token:
                return await local(claim)
            try:
                reply = await self.nodes.forward(claim.owner, {**message, "forwarded": True})
            except TypeError as error:  # a value the database's JSON cannot carry
                raise HostError(
                    f"celld: this call to {key[0]}/{key[1]} cannot be forwarded to node "
                    f"{claim.owner}, which owns it: {error}",
                    "TypeError",
                ) from None
            except StoreUnavailable as error:
                raise HostError(
                    f"{key[0]}/{key[1]}: could not reach node {claim.owner}: {error}"
                ) from None
            except NotDone:
                continue  # the owner died before taking it, or moved it: place it again
            except OutcomeUnknown as error:
                raise HostError(str(error).replace("instance", "object")) from None
            if "error" in reply:
                raise HostError(reply["error"], reply.get("name") or "Error")
            return reply.get("ok")
        raise HostError(f"{key[0]}/{key[1]} kept moving between nodes; retry the call")


class SharedFile:
    """One object's (or D1 database's) local SQLite file under placement: the owner's token
    and version it works at, and the reader of its log."""

    def __init__(self, placement: Placement, key: Key, path: Path) -> None:
        self.placement = placement
        self.key = key
        self.path = path
        self.reader = WalReader(path)
        self.token = 0
        self.version = -1

    async def prepare(self, claim: Claim) -> None:
        """Before opening the file: bring it to `claim`'s version (ours)."""
        await self.placement.restore(self.key, self.path, claim)
        self.token, self.version = claim.owner, claim.version

    def attach(self, conn: sqlite3.Connection) -> None:
        """After opening: only celld checkpoints the log from now on."""
        self.reader.attach(conn)

    def changes(self, conn: sqlite3.Connection) -> Changes | None:
        """On the file's thread, right after a commit: what to ship (None: nothing)."""
        if self.version == 0:
            changes = self.reader.read()
            return None if changes is None else self.reader.all_pages(conn)
        return self.reader.read()

    def shipped(self, conn: sqlite3.Connection) -> None:
        """On the file's thread, after a ship: fold a long log into the file."""
        self.reader.checkpoint(conn, if_larger=CHECKPOINT_BYTES)

    def ship_blocking(self, changes: Changes) -> None:
        try:
            self.version = self.placement.ship_blocking(self.key, self.token, self.version, changes)
        except BaseException:
            self.placement.forget(self.key)
            raise

    async def ship(self, changes: Changes) -> None:
        try:
            self.version = await self.placement.ship(self.key, self.token, self.version, changes)
        except BaseException:
            self.placement.forget(self.key)
            raise
