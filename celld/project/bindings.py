"""The storage, assets and offline-only bindings of a project, resolved from the config.

Rules (see also celld/bindings/RULES.md):

* Every binding name (vars, workflows, KV, D1, R2, assets, queues, offline bindings) is one
  name in ``env``; a name used twice is refused, naming both places.
* Local storage is keyed as ``wrangler dev`` keys it: a KV namespace by ``id`` (else its
  binding), a D1 database by ``database_id`` (else ``database_name``, else its binding), an R2
  bucket by ``bucket_name`` (else its binding). Two bindings with the same key share the data,
  as they do under ``wrangler dev``.
* D1 ``migrations_dir`` defaults to ``migrations`` beside the config, ``migrations_table`` to
  ``d1_migrations``, as in wrangler.
* ``assets.directory`` is required and must exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .compat import behaviours
from .errors import Issue
from .keys import OFFLINE_BINDINGS
from .objects import DurableObjectsConfig, resolve_objects
from .queues import QueuesConfig, resolve_queues
from .schema import TopLevelModel

DEFAULT_MIGRATIONS_DIR = "migrations"
DEFAULT_MIGRATIONS_TABLE = "d1_migrations"


@dataclass(frozen=True)
class KvNamespaceConfig:
    binding: str
    id: str


@dataclass(frozen=True)
class D1DatabaseConfig:
    binding: str
    #: The name wrangler's `d1` commands accept besides the binding.
    database_name: str | None
    id: str
    migrations_dir: Path
    migrations_table: str


@dataclass(frozen=True)
class R2BucketConfig:
    binding: str
    bucket_name: str


@dataclass(frozen=True)
class AssetsConfig:
    directory: Path
    binding: str | None
    html_handling: str
    not_found_handling: str
    #: True/False, or route patterns (a leading "!" excludes) that go to the Worker first.
    run_worker_first: bool | tuple[str, ...]
    #: A single-page app's index.html answers only navigation requests when no asset
    #: matches; the rest go to the Worker (celld.project.compat: from 2025-04-01).
    navigation_only_spa: bool = False
    #: No Worker script (`main`): a request no asset answers gets 404, never a Worker.
    assets_only: bool = False


@dataclass(frozen=True)
class OfflineBindingConfig:
    """A binding that needs Cloudflare's network; `kind` is its config key (``ai``...)."""

    kind: str
    binding: str

    @property
    def service(self) -> str:
        return OFFLINE_BINDINGS[self.kind]


@dataclass(frozen=True)
class ServiceBindingConfig:
    """``env.<binding>``: Worker `service`'s `entrypoint` (None: its default export)."""

    binding: str
    service: str
    entrypoint: str | None = None


@dataclass(frozen=True)
class BindingsConfig:
    kv: tuple[KvNamespaceConfig, ...] = ()
    d1: tuple[D1DatabaseConfig, ...] = ()
    r2: tuple[R2BucketConfig, ...] = ()
    assets: AssetsConfig | None = None
    offline: tuple[OfflineBindingConfig, ...] = ()
    objects: DurableObjectsConfig = DurableObjectsConfig()
    services: tuple[ServiceBindingConfig, ...] = ()
    queues: QueuesConfig = QueuesConfig()

    @property
    def empty(self) -> bool:
        return not (
            self.kv
            or self.d1
            or self.r2
            or self.assets
            or self.offline
            or self.objects.bindings
            or self.services
            or not self.queues.empty
        )


def resolve_bindings(
    model: TopLevelModel, root: Path, worker_name: str = ""
) -> tuple[BindingsConfig, list[Issue]]:
    """Build the bindings and list every problem (duplicates, a missing assets folder)."""
    issues: list[Issue] = []
    taken: dict[str, str] = {key: f"vars.{key}" for key in model.vars}
    for index, wf in enumerate(model.workflows):
        taken.setdefault(wf.binding, f"workflows[{index}].binding")

    def claim(name: str, where: str) -> None:
        if name in taken:
            issues.append(Issue(where, f"binding name {name!r} is already used by {taken[name]}"))
        else:
            taken[name] = where

    kv = []
    for index, ns in enumerate(model.kv_namespaces):
        claim(ns.binding, f"kv_namespaces[{index}].binding")
        kv.append(KvNamespaceConfig(ns.binding, ns.id or ns.binding))
    d1 = []
    for index, db in enumerate(model.d1_databases):
        claim(db.binding, f"d1_databases[{index}].binding")
        d1.append(
            D1DatabaseConfig(
                binding=db.binding,
                database_name=db.database_name,
                id=db.database_id or db.database_name or db.binding,
                migrations_dir=(root / (db.migrations_dir or DEFAULT_MIGRATIONS_DIR)).resolve(),
                migrations_table=db.migrations_table or DEFAULT_MIGRATIONS_TABLE,
            )
        )
    r2 = []
    for index, bucket in enumerate(model.r2_buckets):
        claim(bucket.binding, f"r2_buckets[{index}].binding")
        r2.append(R2BucketConfig(bucket.binding, bucket.bucket_name or bucket.binding))
    assets = None
    if model.assets is not None:
        spec = model.assets
        if spec.binding is not None:
            claim(spec.binding, "assets.binding")
        if spec.directory is None:
            issues.append(Issue("assets.directory", "field required"))
        else:
            directory = (root / spec.directory).resolve()
            if not directory.is_dir():
                issues.append(
                    Issue("assets.directory", f"folder not found: {spec.directory!r} ({directory})")
                )
            run_first = spec.run_worker_first
            assets = AssetsConfig(
                directory=directory,
                binding=spec.binding,
                html_handling=spec.html_handling,
                not_found_handling=spec.not_found_handling,
                run_worker_first=run_first if isinstance(run_first, bool) else tuple(run_first),
                # with no Worker, every request no asset matches gets the app
                navigation_only_spa=model.main is not None
                and behaviours(model.compatibility_date, model.compatibility_flags)[
                    "assetsNavigationPrefersAssetServing"
                ],
                assets_only=model.main is None,
            )
    offline = []
    for kind, value in (("ai", model.ai), ("browser", model.browser)):
        if value is not None:
            claim(value.binding, f"{kind}.binding")
            offline.append(OfflineBindingConfig(kind, value.binding))
    for kind, values in (
        ("vectorize", model.vectorize),
        ("analytics_engine_datasets", model.analytics_engine_datasets),
    ):
        for index, item in enumerate(values):
            claim(item.binding, f"{kind}[{index}].binding")
            offline.append(OfflineBindingConfig(kind, item.binding))
    for index, email in enumerate(model.send_email):
        claim(email.name, f"send_email[{index}].name")
        offline.append(OfflineBindingConfig("send_email", email.name))
    services = []
    for index, spec in enumerate(model.services):
        where = f"services[{index}]"
        claim(spec.binding, f"{where}.binding")
        if spec.environment is not None:
            issues.append(
                Issue(
                    f"{where}.environment",
                    "service environments were removed from wrangler; name the Worker "
                    "(<name>-<env>) in `service`",
                )
            )
        if spec.props:
            issues.append(Issue(f"{where}.props", "`props` are not supported by celld yet"))
        services.append(ServiceBindingConfig(spec.binding, spec.service, spec.entrypoint))
    objects, object_issues = resolve_objects(model, worker_name, claim)
    issues.extend(object_issues)
    queues, queue_issues = resolve_queues(model, claim)
    issues.extend(queue_issues)
    config = BindingsConfig(
        kv=tuple(kv),
        d1=tuple(d1),
        r2=tuple(r2),
        assets=assets,
        offline=tuple(offline),
        objects=objects,
        services=tuple(services),
        queues=queues,
    )
    return config, issues
