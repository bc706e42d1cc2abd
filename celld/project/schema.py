"""Pydantic models for the Wrangler keys celld uses, and the rendering of their errors.

Models are strict (no coercion: ``"5"`` is not a step limit, ``true`` is not a number), as
wrangler's own validation is, so a config accepted here is accepted by ``wrangler dev``.
Pydantic's messages are rewritten into the ``<key path>: <message>`` shape users see.
"""

from __future__ import annotations

import datetime
import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from . import cron
from .errors import Issue
from .keys import unknown_key_message

WORKFLOW_NAME_RE = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9-_]*$")
WORKFLOW_NAME_MAX = 64
MAX_WORKFLOW_STEPS = 25_000
DEFAULT_WORKFLOW_STEPS = 10_000
MAX_CPU_MS = 300_000
# wrangler's isValidName (workers-utils validation-helpers), minus the empty string.
WORKER_NAME_RE = re.compile(r"^[a-z0-9_ ][a-z0-9-_ ]*$")
COMPAT_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# ASCII subset of a JavaScript IdentifierName; bindings become `env.X` and classes are exported.
JS_IDENTIFIER_RE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_JS_RESERVED_WORDS = (
    "break case catch class const continue debugger default delete do else enum export extends "
    "false finally for function if import in instanceof new null return super switch this throw "
    "true try typeof var void while with yield let static implements interface package private "
    "protected public await"
)
JS_RESERVED = frozenset(_JS_RESERVED_WORDS.split())


def _fail(message: str) -> PydanticCustomError:
    # Passed as context, not as the template: user values may contain braces.
    return PydanticCustomError("celld", "{message}", {"message": message})


def _positive_int(value: int, maximum: int | None) -> int:
    if value < 1 or (maximum is not None and value > maximum):
        bound = f"between 1 and {maximum:,}" if maximum is not None else "a positive integer"
        raise _fail(f"must be {bound}, got {value}")
    return value


def _class_name(value: str) -> str:
    if not JS_IDENTIFIER_RE.match(value) or value in JS_RESERVED:
        raise _fail(f"{value!r} is not a valid JavaScript class name")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class WorkflowLimitsModel(_Strict):
    steps: int | None = None

    @field_validator("steps")
    @classmethod
    def _steps(cls, value: int | None) -> int | None:
        return None if value is None else _positive_int(value, MAX_WORKFLOW_STEPS)


class WorkflowModel(_Strict):
    name: str
    binding: str
    class_name: str
    script_name: str | None = None
    limits: WorkflowLimitsModel | None = None
    schedules: Any = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > WORKFLOW_NAME_MAX:
            raise _fail(f"must be at most {WORKFLOW_NAME_MAX} characters, got {len(value)}")
        if not WORKFLOW_NAME_RE.match(value):
            raise _fail(
                f"{value!r} is not a valid workflow name: use letters, digits, '-' and '_', "
                "not starting with '-'"
            )
        return value

    @field_validator("binding")
    @classmethod
    def _binding(cls, value: str) -> str:
        if not JS_IDENTIFIER_RE.match(value):
            raise _fail(f"{value!r} is not a valid JavaScript identifier")
        return value

    _check_class_name = field_validator("class_name")(_class_name)

    @field_validator("schedules", mode="before")
    @classmethod
    def _schedules(cls, value: Any) -> tuple[str, ...] | None:
        """A cron expression or a non-empty list of them (UTC), as wrangler takes them."""
        if value is None:
            return None
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise _fail("must be a cron expression or a non-empty list of cron expressions")
        for index, item in enumerate(items):
            try:
                cron.validate(item)
            except cron.CronError as error:
                where = "" if isinstance(value, str) else f"[{index}]: "
                raise _fail(f"{where}{error}") from None
        if len(set(items)) != len(items):
            raise _fail("lists the same cron expression twice")
        return tuple(items)


class LimitsModel(_Strict):
    cpu_ms: int | None = None
    subrequests: int | None = None

    @field_validator("cpu_ms")
    @classmethod
    def _cpu_ms(cls, value: int | None) -> int | None:
        return None if value is None else _positive_int(value, MAX_CPU_MS)

    @field_validator("subrequests")
    @classmethod
    def _subrequests(cls, value: int | None) -> int | None:
        return None if value is None else _positive_int(value, None)


def _binding_name(value: str) -> str:
    if not JS_IDENTIFIER_RE.match(value):
        raise _fail(f"{value!r} is not a valid JavaScript identifier")
    return value


# Names of stored things (KV ids, database and bucket names) become file names under the state
# folder, so they are kept to a safe alphabet; wrangler's own ids and names fit it.
STORAGE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _storage_name(value: str | None) -> str | None:
    if value is not None and not STORAGE_NAME_RE.match(value):
        raise _fail(
            f"{value!r} is not a name celld can store under: use letters, digits, '.', '-' "
            "and '_' (at most 128)"
        )
    return value


class KvNamespaceModel(_Strict):
    binding: str
    id: str | None = None
    preview_id: str | None = None
    remote: bool | None = None

    _check_binding = field_validator("binding")(_binding_name)
    _check_id = field_validator("id", "preview_id")(_storage_name)


class D1DatabaseModel(_Strict):
    binding: str
    database_name: str | None = None
    database_id: str | None = None
    preview_database_id: str | None = None
    migrations_dir: str | None = None
    migrations_table: str | None = None
    database_internal_env: str | None = None
    remote: bool | None = None

    _check_binding = field_validator("binding")(_binding_name)
    _check_names = field_validator("database_name", "database_id", "preview_database_id")(
        _storage_name
    )


class R2BucketModel(_Strict):
    binding: str
    bucket_name: str | None = None
    preview_bucket_name: str | None = None
    jurisdiction: str | None = None
    remote: bool | None = None

    _check_binding = field_validator("binding")(_binding_name)
    _check_names = field_validator("bucket_name", "preview_bucket_name")(_storage_name)


HtmlHandling = typing.Literal[
    "auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none"
]
NotFoundHandling = typing.Literal["single-page-application", "404-page", "none"]


class AssetsModel(_Strict):
    directory: str | None = None
    binding: str | None = None
    html_handling: HtmlHandling = "auto-trailing-slash"
    not_found_handling: NotFoundHandling = "none"
    run_worker_first: bool | list[str] = False

    _check_binding = field_validator("binding")(
        lambda value: None if value is None else _binding_name(value)
    )


class OfflineBindingModel(BaseModel):
    """A binding that needs Cloudflare's network (Workers AI, Vectorize...): only its name
    matters here; the other keys are the service's own and are not checked."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)
    binding: str

    _check_binding = field_validator("binding")(_binding_name)


class SendEmailModel(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)
    name: str

    _check_name = field_validator("name")(_binding_name)


class DurableObjectBindingModel(_Strict):
    name: str
    class_name: str
    script_name: str | None = None
    environment: str | None = None

    _check_name = field_validator("name")(_binding_name)

    _check_class_name = field_validator("class_name")(_class_name)


class ServiceBindingModel(_Strict):
    """``[[services]]``: another Worker (or this one) as ``env.<binding>``."""

    binding: str
    service: str
    entrypoint: str | None = None
    environment: str | None = None
    props: dict[str, Any] | None = None
    remote: bool | None = None

    _check_binding = field_validator("binding")(_binding_name)


class DurableObjectsModel(_Strict):
    bindings: list[DurableObjectBindingModel] = []


# Cloudflare's bounds for a consumer's settings (Queues limits); a value past them is refused
# at start, as wrangler refuses it at deploy.
MAX_QUEUE_BATCH_SIZE = 100
MAX_QUEUE_BATCH_TIMEOUT_S = 60
MAX_QUEUE_RETRIES = 100
MAX_QUEUE_DELAY_S = 86_400
MAX_QUEUE_CONCURRENCY = 250


def _bounded(value: float | None, low: float, high: float) -> float | None:
    if value is not None and not low <= value <= high:
        raise _fail(f"must be between {low:,} and {high:,}, got {value}")
    return value


class QueueProducerModel(_Strict):
    binding: str
    queue: str
    delivery_delay: int | None = None
    remote: bool | None = None

    _check_binding = field_validator("binding")(_binding_name)
    _check_queue = field_validator("queue")(lambda value: _storage_name(value))
    _check_delay = field_validator("delivery_delay")(
        lambda value: _bounded(value, 0, MAX_QUEUE_DELAY_S)
    )


class QueueConsumerModel(_Strict):
    queue: str
    type: str | None = None
    max_batch_size: int | None = None
    max_batch_timeout: float | None = None
    max_retries: int | None = None
    dead_letter_queue: str | None = None
    max_concurrency: int | None = None
    retry_delay: int | None = None
    visibility_timeout_ms: int | None = None

    _check_queues = field_validator("queue", "dead_letter_queue")(_storage_name)
    _check_size = field_validator("max_batch_size")(
        lambda value: _bounded(value, 1, MAX_QUEUE_BATCH_SIZE)
    )
    _check_timeout = field_validator("max_batch_timeout")(
        lambda value: _bounded(value, 0, MAX_QUEUE_BATCH_TIMEOUT_S)
    )
    _check_retries = field_validator("max_retries")(
        lambda value: _bounded(value, 0, MAX_QUEUE_RETRIES)
    )
    _check_concurrency = field_validator("max_concurrency")(
        lambda value: _bounded(value, 1, MAX_QUEUE_CONCURRENCY)
    )
    _check_retry_delay = field_validator("retry_delay")(
        lambda value: _bounded(value, 0, MAX_QUEUE_DELAY_S)
    )


class QueuesModel(_Strict):
    producers: list[QueueProducerModel] = []
    consumers: list[QueueConsumerModel] = []


class RenamedClassModel(BaseModel):
    """``{from, to}``: ``from`` is a Python keyword, so it is read by alias."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)
    from_: str = Field(alias="from")
    to: str


class MigrationModel(_Strict):
    tag: str
    new_classes: list[str] = []
    new_sqlite_classes: list[str] = []
    renamed_classes: list[RenamedClassModel] = []
    deleted_classes: list[str] = []
    transferred_classes: Any = None

    @field_validator("transferred_classes", mode="before")
    @classmethod
    def _transferred(cls, value: Any) -> Any:
        if value is not None:
            raise _fail(
                "transferred_classes moves objects between Workers; celld runs one Worker and "
                "does not support it"
            )
        return value


Protocol = typing.Literal["http", "https"]


class DevModel(_Strict):
    """``[dev]``: the local server's settings, as wrangler reads them (wrangler's own
    defaults apply where a key is absent: port 8787, the local protocol http). The keys
    for wrangler's inspector and containers are accepted and warned about (keys.py)."""

    ip: str | None = None
    port: int | None = None
    local_protocol: Protocol | None = None
    upstream_protocol: Protocol | None = None
    host: str | None = None
    inspector_port: int | None = None
    inspector_ip: str | None = None
    enable_containers: bool | None = None
    container_engine: Any = None
    generate_types: bool | None = None

    @field_validator("port", "inspector_port")
    @classmethod
    def _port(cls, value: int | None) -> int | None:
        if value is not None and not 0 <= value <= 65535:
            raise _fail(f"must be a port number from 0 to 65535, got {value}")
        return value

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        if value is not None and (not value or "/" in value or " " in value):
            raise _fail(f"{value!r} is not a host name (with an optional :port)")
        return value


class BuildModel(_Strict):
    """``[build]``: a custom build command run before serving (celld/project/build.py)."""

    command: str | None = None
    cwd: str | None = None
    watch_dir: str | list[str] | None = None


class TopLevelModel(_Strict):
    name: str | None = None
    #: None: an assets-only Worker (celld/project/assets_only.py)
    main: str | None = None
    compatibility_date: str | None = None
    compatibility_flags: list[str] = []
    vars: dict[str, Any] = {}
    workflows: list[WorkflowModel] = []
    limits: LimitsModel | None = None
    kv_namespaces: list[KvNamespaceModel] = []
    d1_databases: list[D1DatabaseModel] = []
    r2_buckets: list[R2BucketModel] = []
    assets: AssetsModel | None = None
    ai: OfflineBindingModel | None = None
    browser: OfflineBindingModel | None = None
    vectorize: list[OfflineBindingModel] = []
    analytics_engine_datasets: list[OfflineBindingModel] = []
    send_email: list[SendEmailModel] = []
    durable_objects: DurableObjectsModel | None = None
    services: list[ServiceBindingModel] = []
    queues: QueuesModel | None = None
    migrations: list[MigrationModel] = []
    tsconfig: str | None = None
    jsx_factory: str | None = None
    jsx_fragment: str | None = None
    dev: DevModel | None = None
    build: BuildModel | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value and not WORKER_NAME_RE.match(value):
            raise _fail(
                f"{value!r} is not a valid Worker name: use lowercase letters, digits, '-' and '_'"
            )
        return value

    @field_validator("compatibility_date", mode="before")
    @classmethod
    def _compat_date(cls, value: Any) -> Any:
        if isinstance(value, datetime.date):
            raise _fail('must be a quoted string "YYYY-MM-DD" (TOML reads a bare date as a date)')
        if isinstance(value, str):
            try:
                if not COMPAT_DATE_RE.match(value):
                    raise ValueError
                datetime.date.fromisoformat(value)
            except ValueError:
                raise _fail(f'must be a date "YYYY-MM-DD", got {value!r}') from None
        return value


def _kind(value: Any) -> str:
    match value:
        case bool():
            return "boolean"
        case int():
            return "integer"
        case float():
            return "number"
        case str():
            return "string"
        case list():
            return "array"
        case dict():
            return "table"
        case datetime.datetime() | datetime.date() | datetime.time():
            return "date/time"
        case None:
            return "null"
    return type(value).__name__


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "bool_type": "a boolean",
}


def key_path(loc: tuple[int | str, ...]) -> str:
    """``("workflows", 0, "class_name")`` -> ``workflows[0].class_name``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model that holds the key at ``loc`` (for did-you-mean suggestions)."""
    model: type[BaseModel] = TopLevelModel
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        found = _find_model(field.annotation) if field else None
        if found is None:
            return None
        model = found
    return model


def _find_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for arg in typing.get_args(annotation):
            found = _find_model(arg)
            if found is not None:
                return found
    return None


def render_errors(error: ValidationError) -> list[Issue]:
    issues: list[Issue] = []
    for err in error.errors():
        loc = tuple(err["loc"])
        kind = err["type"]
        if kind == "missing":
            message = "field required"
        elif kind == "extra_forbidden":
            holder = _model_at(loc[:-1])
            message = unknown_key_message(str(loc[-1]), holder.model_fields if holder else ())
        elif kind in _EXPECTED:
            message = f"expected {_EXPECTED[kind]}, got {_kind(err['input'])}"
        else:
            message = err["msg"]
        issues.append(Issue(key_path(loc), message))
    return issues
