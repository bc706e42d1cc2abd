"""The bindings of one running project: opened at start, served as host operations.

Each kind has one host operation (``kv``, ``d1``, ``r2``, ``assets``) whose message names the
binding's local id and the method; js/bindings/ sends them. Stores live under the state
folder, one per namespace, database or bucket, so one project never sees another's data:

    <state>/kv/<id>.sqlite3    <state>/d1/<id>.sqlite3    <state>/r2/<bucket>/

With a shared store (`store` a postgresql:// URL: several nodes on one database), KV
namespaces and R2 buckets are rows in that database instead (celld/bindings/pgkv.py,
pgr2.py), keyed the same way, so every node sees the same data. Those modules (and
asyncpg) are imported only then: a server on SQLite never loads them (asyncpg is ~2.7 MB
of an idle server's RSS).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from celld.bindings.assets import AssetServer
from celld.bindings.d1 import D1Database
from celld.bindings.errors import type_error
from celld.bindings.kv import KvNamespace
from celld.bindings.offline import warn_offline
from celld.bindings.r2 import R2Bucket
from celld.bindings.wire import from_wire
from celld.isolate.host import HostError, OpHandler
from celld.isolate.streams import STREAMS, StreamAborted
from celld.project.bindings import BindingsConfig

if TYPE_CHECKING:
    from celld.bindings.pgd1 import SharedD1Database
    from celld.bindings.pgkv import PgKvNamespace
    from celld.bindings.pgr2 import PgR2Bucket
    from celld.bindings.pgshared import SharedPool
    from celld.objects.placement import Placement

log = logging.getLogger("celld.bindings")


def kv_path(state: Path, ns_id: str) -> Path:
    return state / "kv" / f"{ns_id}.sqlite3"


def d1_path(state: Path, db_id: str) -> Path:
    return state / "d1" / f"{db_id}.sqlite3"


def r2_folder(state: Path, bucket: str) -> Path:
    return state / "r2" / bucket


#: R2 bodies larger than this reach JS as a stream, not in the answer itself.
STREAM_OVER_BYTES = 64 * 1024


def _bytes(message: dict[str, Any], field: str = "value") -> bytes:
    return from_wire(message.get(field))


class Bindings:
    """Every storage binding of a project, keyed by local id."""

    def __init__(
        self,
        config: BindingsConfig,
        state: Path,
        now_ms: Callable[[], int],
        *,
        synchronous: str = "FULL",
        shared: str | None = None,
    ) -> None:
        """`shared`: the DSN of a PostgreSQL store shared by several nodes, where KV and R2
        live then (None: files under `state`)."""
        self.config = config
        self.shared: SharedPool | None = None
        if shared:
            from celld.bindings.pgkv import PgKvNamespace
            from celld.bindings.pgr2 import PgR2Bucket
            from celld.bindings.pgshared import SharedPool

            self.shared = SharedPool(shared)
        self.kv: dict[str, KvNamespace | PgKvNamespace] = {}
        self.r2: dict[str, R2Bucket | PgR2Bucket] = {}
        for ns in config.kv:
            self.kv[ns.id] = (
                PgKvNamespace(self.shared, ns.id, now_ms)
                if self.shared
                else KvNamespace(kv_path(state, ns.id), now_ms, synchronous=synchronous)
            )
        for b in config.r2:
            self.r2[b.bucket_name] = (
                PgR2Bucket(self.shared, b.bucket_name, now_ms)
                if self.shared
                else R2Bucket(r2_folder(state, b.bucket_name), now_ms, synchronous=synchronous)
            )
        self.state = state
        self.synchronous = synchronous
        self.d1: dict[str, D1Database | SharedD1Database] = {
            db.id: D1Database(d1_path(state, db.id), synchronous=synchronous) for db in config.d1
        }
        self.assets = AssetServer(config.assets) if config.assets else None

    def place_d1(self, placement: Placement) -> None:
        """D1 databases on a store shared by several nodes: each owned by one node at a
        time, its pages in the store (celld/bindings/pgd1.py). Called before `open`."""
        # One per database for the node's lifetime: bindings of a reloaded Worker share it
        # with the ones still finishing requests (one lock, one connection to the file).
        from celld.bindings.pgd1 import SharedD1Database

        self.d1 = {
            db.id: placement.databases.setdefault(
                db.id,
                SharedD1Database(
                    placement, db.id, d1_path(self.state, db.id), synchronous=self.synchronous
                ),
            )
            for db in self.config.d1
        }
        if self.d1:
            placement.start()
            placement.nodes.route("d1", self.op_d1)
            placement.nodes.route("d1admin", self._op_d1_admin)

    async def _op_d1_admin(self, message: dict[str, Any]) -> Any:
        """`celld d1 migrations` of an operator on another node (the inbox: never a Worker)."""
        db = self._pick(self.d1, message, "D1")
        return await db.call(message, route="d1admin")

    async def open(self) -> None:
        for store in [*self.kv.values(), *self.d1.values(), *self.r2.values()]:
            await store.open()
        warn_offline(self.config.offline)

    async def close(self) -> None:
        for store in [*self.kv.values(), *self.d1.values(), *self.r2.values()]:
            await store.close()
        if self.shared is not None:
            await self.shared.close()

    def env_message(self) -> dict[str, Any]:
        """What js/bindings/ needs to build `env`: binding name -> local id."""
        c = self.config
        return {
            "kv": [{"binding": ns.binding, "id": ns.id} for ns in c.kv],
            "d1": [{"binding": db.binding, "id": db.id} for db in c.d1],
            "r2": [{"binding": b.binding, "id": b.bucket_name} for b in c.r2],
            "assets": c.assets.binding if c.assets and c.assets.binding else None,
            "offline": [
                {"binding": o.binding, "kind": o.kind, "service": o.service} for o in c.offline
            ],
            "queues": [
                {
                    "binding": p.binding,
                    "queue": p.queue,
                    "deliveryDelay": p.delivery_delay,
                    "defaultType": c.queues.default_content_type,
                }
                for p in c.queues.producers
            ],
        }

    def ops(self) -> dict[str, OpHandler]:
        ops: dict[str, OpHandler] = {"kv": self.op_kv, "d1": self.op_d1, "r2": self.op_r2}
        if self.assets is not None:
            ops["assets"] = self.assets.op_fetch
        return ops

    @staticmethod
    def _pick(stores: dict[str, Any], message: dict[str, Any], kind: str) -> Any:
        store = stores.get(str(message.get("id")))
        if store is None:
            raise HostError(f"celld: no {kind} binding with id {message.get('id')!r}")
        return store

    @staticmethod
    async def _put_stream(
        bucket: R2Bucket | PgR2Bucket, key: Any, value: dict[str, Any], options: dict[str, Any]
    ) -> Any:
        """A put whose body streams in from JS (a pipe) or from the host (a request body)."""
        chunks, _, stop = STREAMS.body_of(value)
        try:
            return await bucket.put_stream(key, chunks, options)
        except StreamAborted as error:  # the Worker's stream failed: put fails with its error
            raise error.as_host_error("") from None
        except BaseException as error:
            stop(f"put: the upload stopped ({error})")  # JS's writes fail from here on
            raise

    async def op_kv(self, message: dict[str, Any]) -> Any:
        ns: KvNamespace | PgKvNamespace = self._pick(self.kv, message, "KV")
        method = message.get("method")
        if method == "get":
            keys = message.get("keys")
            if not isinstance(keys, list):
                raise type_error("KV get() takes a key or an array of keys")
            return await ns.get(keys, bulk=bool(message.get("bulk")))
        if method == "put":
            await ns.put(
                message.get("key"),  # type: ignore[arg-type]
                _bytes(message),
                expiration=message.get("expiration"),
                expiration_ttl=message.get("expirationTtl"),
                metadata=message.get("metadata"),
            )
            return None
        if method == "delete":
            await ns.delete(message.get("key"))  # type: ignore[arg-type]
            return None
        if method == "list":
            return await ns.list(
                prefix=str(message.get("prefix") or ""),
                limit=message.get("limit"),
                cursor=message.get("cursor"),
            )
        raise HostError(f"celld: KV has no method {method!r}")

    async def op_d1(self, message: dict[str, Any]) -> Any:
        db: D1Database | SharedD1Database = self._pick(self.d1, message, "D1")
        method = message.get("method")
        if method == "query":
            statements = message.get("statements")
            if not isinstance(statements, list) or not statements:
                raise type_error("D1: no statements to run")
        elif method != "exec":
            raise HostError(f"celld: D1 has no method {method!r}")
        if not isinstance(db, D1Database):  # a SharedD1Database (`place_d1`)
            return await db.call(message)
        if method == "query":
            return await db.query(statements, batch=bool(message.get("batch")))
        return await db.exec(message.get("sql"))  # type: ignore[arg-type]

    async def op_r2(self, message: dict[str, Any]) -> Any:
        bucket: R2Bucket | PgR2Bucket = self._pick(self.r2, message, "R2")
        method = message.get("method")
        key = message.get("key")
        options = message.get("options") or {}
        if method == "put":
            value = message.get("value")
            if isinstance(value, dict) and ("pipe" in value or "source" in value):
                return await self._put_stream(bucket, key, value, options)
            return await bucket.put(key, _bytes(message), options)  # type: ignore[arg-type]
        if method in ("get", "head"):
            wire = await bucket.get(
                key,  # type: ignore[arg-type]
                options,
                body=method == "get",
                stream_over=STREAM_OVER_BYTES,
            )
            body = wire.pop("file", None) if wire is not None else None
            if body is not None:
                # Read by JS piece by piece as the Worker reads (celld/isolate/streams.py).
                sid = STREAMS.add_source(body.chunks(), close=body.aclose, length=body.length)
                wire["stream"] = {"id": sid, "length": body.length}  # type: ignore[index]
            return wire
        if method == "delete":
            return await bucket.delete(list(message.get("keys") or []))
        if method == "list":
            return await bucket.list(options)
        upload = str(message.get("uploadId"))
        if method == "createMultipartUpload":
            return await bucket.create_upload(key, options)  # type: ignore[arg-type]
        if method == "uploadPart":
            return await bucket.upload_part(
                key,  # type: ignore[arg-type]
                upload,
                message.get("partNumber"),
                _bytes(message),
            )
        if method == "abort":
            return await bucket.abort_upload(key, upload)  # type: ignore[arg-type]
        if method == "complete":
            return await bucket.complete_upload(key, upload, list(message.get("parts") or []))  # type: ignore[arg-type]
        raise HostError(f"celld: R2 has no method {method!r}")
