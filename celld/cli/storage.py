"""Operator commands for the local state of KV, D1 and R2, named as wrangler names them:

    celld d1 execute DB --command SQL | --file F      celld d1 migrations list|apply DB
    celld kv key get|put|list|delete ...              celld r2 object get|put|delete BUCKET/KEY

They work on the same files `celld run` uses (``--persist-to``, default ``PROJECT/.celld``),
and may run while it serves: SQLite serialises the writers.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from celld.isolate.host import HostError

T = TypeVar("T")


class Context:
    def __init__(self, project: Path, config_file: Path | None, persist_to: Path | None) -> None:
        from celld.project.config import ConfigError, find_config, load_config
        from celld.project.files import state_home

        try:
            self.config = load_config(find_config(project, config_file))
        except ConfigError as error:
            raise click.ClickException(str(error)) from None
        home = state_home(project, config_file, self.config.root)
        self.state = (persist_to or home / ".celld").resolve()

    def d1(self, name: str) -> Any:
        for db in self.config.bindings.d1:
            if name in (db.binding, db.database_name, db.id):
                return db
        known = ", ".join(db.binding for db in self.config.bindings.d1) or "none"
        raise click.ClickException(f"no D1 database {name!r} in {self.config.path} ({known})")

    def kv(self, binding: str | None, namespace_id: str | None) -> Any:
        for ns in self.config.bindings.kv:
            if (binding and ns.binding == binding) or (namespace_id and ns.id == namespace_id):
                return ns
        known = ", ".join(ns.binding for ns in self.config.bindings.kv) or "none"
        raise click.ClickException(f"no KV namespace {binding or namespace_id!r} ({known})")

    def r2(self, bucket: str) -> Any:
        for b in self.config.bindings.r2:
            if bucket in (b.bucket_name, b.binding):
                return b
        known = ", ".join(b.bucket_name for b in self.config.bindings.r2) or "none"
        raise click.ClickException(f"no R2 bucket {bucket!r} ({known})")


def _run(work: Callable[[], Awaitable[T]]) -> T:
    try:
        return asyncio.run(work())  # type: ignore[arg-type]
    except HostError as error:
        raise click.ClickException(str(error)) from None


def _options(function: Callable[..., Any]) -> Callable[..., Any]:
    function = click.option(
        "--persist-to",
        type=click.Path(file_okay=False, path_type=Path),
        help="State folder (default: PROJECT/.celld).",
    )(function)
    function = click.option(
        "--config",
        "-c",
        "config_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="wrangler.toml / wrangler.json(c) to use.",
    )(function)
    return click.option(
        "--project",
        default=".",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        show_default=True,
        help="Project folder.",
    )(function)


# -- d1 ----------------------------------------------------------------------------------------


@click.group()
def d1() -> None:
    """Local D1 databases."""


@d1.command("execute")
@click.argument("database")
@click.option("--command", "sql", help="SQL to run.")
@click.option("--file", "sql_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@_options
def d1_execute(
    database: str,
    sql: str | None,
    sql_file: Path | None,
    as_json: bool,
    project: Path,
    config_file: Path | None,
    persist_to: Path | None,
) -> None:
    """Run SQL against DATABASE (binding, database_name or database_id), in one transaction."""
    from celld.bindings.d1 import D1Database, split_statements
    from celld.bindings.registry import d1_path

    if (sql is None) == (sql_file is None):
        raise click.UsageError("give exactly one of --command and --file")
    text = sql if sql is not None else sql_file.read_text(encoding="utf-8")  # type: ignore[union-attr]
    statements = [{"sql": s, "params": []} for s in split_statements(text)]
    if not statements:
        raise click.ClickException("No SQL statements detected.")
    ctx = Context(project, config_file, persist_to)
    db_config = ctx.d1(database)

    async def work() -> list[Any]:
        db = await D1Database(d1_path(ctx.state, db_config.id)).open()
        try:
            return await db.query(statements, batch=True)
        finally:
            await db.close()

    results = _run(work)
    if as_json:
        shaped = [
            {
                "results": [dict(zip(r["columns"], row, strict=True)) for row in r["rows"]],
                "success": True,
                "meta": r["meta"],
            }
            for r in results
        ]
        click.echo(json.dumps(shaped, indent=2))
        return
    for result in results:
        if result["columns"]:
            click.echo("\t".join(result["columns"]))
            for row in result["rows"]:
                click.echo("\t".join("NULL" if v is None else str(v) for v in row))
        else:
            click.echo(f"changes: {result['meta']['changes']}")


@d1.group("migrations")
def d1_migrations() -> None:
    """D1 migrations from migrations_dir."""


@d1_migrations.command("list")
@click.argument("database")
@_options
def d1_migrations_list(
    database: str, project: Path, config_file: Path | None, persist_to: Path | None
) -> None:
    """List the migrations not yet applied to DATABASE."""
    from celld.bindings import migrations
    from celld.bindings.d1 import open_file
    from celld.bindings.registry import d1_path

    ctx = Context(project, config_file, persist_to)
    db = ctx.d1(database)
    conn = open_file(d1_path(ctx.state, db.id)).open_sync()
    try:
        todo = migrations.pending(conn, db.migrations_dir, db.migrations_table)
    finally:
        conn.close()
    if not todo:
        click.echo("No migrations to apply.")
    for migration in todo:
        click.echo(migration.name)


@d1_migrations.command("apply")
@click.argument("database")
@_options
def d1_migrations_apply(
    database: str, project: Path, config_file: Path | None, persist_to: Path | None
) -> None:
    """Apply DATABASE's pending migrations in order, each in its own transaction."""
    from celld.bindings import migrations
    from celld.bindings.d1 import open_file
    from celld.bindings.registry import d1_path

    ctx = Context(project, config_file, persist_to)
    db = ctx.d1(database)
    if not db.migrations_dir.is_dir():
        raise click.ClickException(f"no migrations folder at {db.migrations_dir}")
    conn = open_file(d1_path(ctx.state, db.id)).open_sync()
    try:
        todo = migrations.pending(conn, db.migrations_dir, db.migrations_table)
        if not todo:
            click.echo("No migrations to apply.")
        for migration in todo:
            try:
                migrations.apply(conn, migration, db.migrations_table)
            except migrations.MigrationError as error:
                raise click.ClickException(f"migration failed: {error}") from None
            click.echo(f"applied {migration.name}")
    finally:
        conn.close()


# -- kv ----------------------------------------------------------------------------------------


def _kv_options(function: Callable[..., Any]) -> Callable[..., Any]:
    function = click.option("--namespace-id", help="The namespace's id.")(function)
    function = click.option("--binding", help="The namespace's binding name.")(function)
    return _options(function)


def _namespace(ctx: Context, binding: str | None, namespace_id: str | None) -> Any:
    from celld.bindings.kv import KvNamespace
    from celld.bindings.registry import kv_path
    from celld.cells.clock import SystemClock

    if not binding and not namespace_id:
        raise click.UsageError("give --binding or --namespace-id")
    ns = ctx.kv(binding, namespace_id)
    return KvNamespace(kv_path(ctx.state, ns.id), SystemClock().now)


@click.group()
def kv() -> None:
    """Local KV namespaces."""


@kv.group("key")
def kv_key() -> None:
    """Keys of a KV namespace."""


@kv_key.command("get")
@click.argument("key")
@_kv_options
def kv_key_get(key: str, binding: str | None, namespace_id: str | None, **options: Any) -> None:
    """Print KEY's value (raw bytes to stdout)."""
    ns = _namespace(Context(**options), binding, namespace_id)

    async def work() -> Any:
        await ns.open()
        try:
            return (await ns.get([key], bulk=False))[key]
        finally:
            await ns.close()

    from celld.bindings.wire import from_wire

    entry = _run(work)
    if entry is None:
        raise click.ClickException(f"Value not found for key {key!r}")
    sys.stdout.buffer.write(from_wire(entry["value"]))
    sys.stdout.buffer.flush()


@kv_key.command("put")
@click.argument("key")
@click.argument("value", required=False)
@click.option("--path", "value_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--ttl", type=int, help="Expire after this many seconds (at least 60).")
@click.option("--expiration", type=int, help="Expire at this epoch second.")
@click.option("--metadata", help="JSON metadata.")
@_kv_options
def kv_key_put(
    key: str,
    value: str | None,
    value_file: Path | None,
    ttl: int | None,
    expiration: int | None,
    metadata: str | None,
    binding: str | None,
    namespace_id: str | None,
    **options: Any,
) -> None:
    """Write VALUE (or the file at --path) under KEY."""
    if (value is None) == (value_file is None):
        raise click.UsageError("give exactly one of VALUE and --path")
    data = value.encode() if value is not None else value_file.read_bytes()  # type: ignore[union-attr]
    if metadata is not None:
        try:
            metadata = json.dumps(json.loads(metadata), separators=(",", ":"))
        except ValueError:
            raise click.UsageError("--metadata must be JSON") from None
    ns = _namespace(Context(**options), binding, namespace_id)

    async def work() -> None:
        await ns.open()
        try:
            await ns.put(key, data, expiration=expiration, expiration_ttl=ttl, metadata=metadata)
        finally:
            await ns.close()

    _run(work)
    click.echo(f"Wrote {len(data)} bytes to {key!r}.")


@kv_key.command("list")
@click.option("--prefix", default="")
@_kv_options
def kv_key_list(prefix: str, binding: str | None, namespace_id: str | None, **options: Any) -> None:
    """List keys as JSON (name, expiration, metadata)."""
    ns = _namespace(Context(**options), binding, namespace_id)

    async def work() -> list[Any]:
        await ns.open()
        try:
            keys: list[Any] = []
            cursor = None
            while True:
                page = await ns.list(prefix=prefix, cursor=cursor)
                keys.extend(page["keys"])
                if page["list_complete"]:
                    return keys
                cursor = page["cursor"]
        finally:
            await ns.close()

    keys = _run(work)
    for entry in keys:
        if "metadata" in entry:
            entry["metadata"] = json.loads(entry["metadata"])
    click.echo(json.dumps(keys, indent=2))


@kv_key.command("delete")
@click.argument("key")
@_kv_options
def kv_key_delete(key: str, binding: str | None, namespace_id: str | None, **options: Any) -> None:
    """Delete KEY."""
    ns = _namespace(Context(**options), binding, namespace_id)

    async def work() -> None:
        await ns.open()
        try:
            await ns.delete(key)
        finally:
            await ns.close()

    _run(work)
    click.echo(f"Deleted {key!r}.")


# -- r2 ----------------------------------------------------------------------------------------


def _object_path(ctx: Context, path: str) -> tuple[Any, str]:
    from celld.bindings.r2 import R2Bucket
    from celld.bindings.registry import r2_folder
    from celld.cells.clock import SystemClock

    bucket, sep, key = path.partition("/")
    if not sep or not key:
        raise click.UsageError("name the object as BUCKET/KEY")
    config = ctx.r2(bucket)
    return R2Bucket(r2_folder(ctx.state, config.bucket_name), SystemClock().now), key


@click.group()
def r2() -> None:
    """Local R2 buckets."""


@r2.group("object")
def r2_object() -> None:
    """Objects of an R2 bucket."""


@r2_object.command("get")
@click.argument("object_path", metavar="BUCKET/KEY")
@click.option("--file", "out_file", type=click.Path(dir_okay=False, path_type=Path))
@_options
def r2_object_get(object_path: str, out_file: Path | None, **options: Any) -> None:
    """Write the object's bytes to --file, or to stdout."""
    from celld.bindings.wire import from_wire

    bucket, key = _object_path(Context(**options), object_path)

    async def work() -> Any:
        await bucket.open()
        try:
            return await bucket.get(key, {}, body=True)
        finally:
            await bucket.close()

    found = _run(work)
    if found is None:
        raise click.ClickException(f"The specified key does not exist: {key!r}")
    data = from_wire(found["body"])
    if out_file is not None:
        out_file.write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


@r2_object.command("put")
@click.argument("object_path", metavar="BUCKET/KEY")
@click.option("--file", "in_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--pipe", is_flag=True, help="Read the bytes from stdin.")
@click.option("--content-type")
@_options
def r2_object_put(
    object_path: str, in_file: Path | None, pipe: bool, content_type: str | None, **options: Any
) -> None:
    """Store --file (or stdin with --pipe) as the object."""
    if (in_file is None) == (not pipe):
        raise click.UsageError("give exactly one of --file and --pipe")
    data = in_file.read_bytes() if in_file is not None else sys.stdin.buffer.read()
    bucket, key = _object_path(Context(**options), object_path)
    http = {"contentType": content_type} if content_type else {}

    async def work() -> Any:
        await bucket.open()
        try:
            return await bucket.put(key, data, {"httpMetadata": http})
        finally:
            await bucket.close()

    stored = _run(work)
    click.echo(f"Uploaded {key!r} ({stored['size']} bytes, etag {stored['etag']}).")


@r2_object.command("delete")
@click.argument("object_path", metavar="BUCKET/KEY")
@_options
def r2_object_delete(object_path: str, **options: Any) -> None:
    """Delete the object."""
    bucket, key = _object_path(Context(**options), object_path)

    async def work() -> None:
        await bucket.open()
        try:
            await bucket.delete([key])
        finally:
            await bucket.close()

    _run(work)
    click.echo(f"Deleted {key!r}.")
