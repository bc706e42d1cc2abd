"""Durable Object bindings and migrations, resolved from the config.

Rules:

* ``durable_objects.bindings[]`` gives ``env.<name>`` a namespace of ``class_name``, a class
  the Worker exports. A ``script_name`` naming another Worker binds a class of that Worker;
  celld runs one Worker, so, as ``wrangler dev`` does when that Worker is not running, the
  binding is kept "not connected": the Worker starts with a warning naming it, ids are made
  as usual, and a call through a stub fails (js/objects/namespace.js).
* ``migrations[]`` are applied in order, as wrangler applies them: ``new_classes`` (storage
  with the key-value API), ``new_sqlite_classes`` (storage with the SQL API as well),
  ``renamed_classes`` (``{from, to}``: the objects and their storage keep going under the new
  name) and ``deleted_classes`` (their storage is deleted). Each step is checked against the
  classes the earlier ones left: a class added twice, renamed or deleted before it exists,
  or bound after it was deleted is refused. Tags must be unique.
* A bound class no migration mentions gets key-value storage, as under ``wrangler dev``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from .errors import Issue
from .schema import TopLevelModel


class DurableObjectBinding(NamedTuple):
    binding: str
    class_name: str
    #: the Worker the class lives in, when it is another one (a not connected binding)
    script_name: str | None = None


@dataclass(frozen=True)
class Migration:
    tag: str
    new_classes: tuple[str, ...] = ()
    new_sqlite_classes: tuple[str, ...] = ()
    renamed_classes: tuple[tuple[str, str], ...] = ()
    deleted_classes: tuple[str, ...] = ()


@dataclass(frozen=True)
class DurableObjectsConfig:
    bindings: tuple[DurableObjectBinding, ...] = ()
    #: bindings to classes of other Workers, which are not running here
    unconnected: tuple[DurableObjectBinding, ...] = ()
    migrations: tuple[Migration, ...] = ()
    #: class name -> True when its storage has the SQL API, after every migration.
    classes: tuple[tuple[str, bool], ...] = ()

    def sqlite(self, class_name: str) -> bool:
        return dict(self.classes).get(class_name, False)


def resolve_objects(
    model: TopLevelModel, worker_name: str, claim: Callable[[str, str], None]
) -> tuple[DurableObjectsConfig, list[Issue]]:
    issues: list[Issue] = []
    migrations: list[Migration] = []
    classes: dict[str, bool] = {}
    deleted: set[str] = set()
    first_with_tag: dict[str, int] = {}
    for index, spec in enumerate(model.migrations):
        where = f"migrations[{index}]"
        first = first_with_tag.setdefault(spec.tag, index)
        if first != index:
            message = f"tag {spec.tag!r} is already used by migrations[{first}]"
            issues.append(Issue(f"{where}.tag", message))
        for field, sqlite in (("new_classes", False), ("new_sqlite_classes", True)):
            for position, name in enumerate(getattr(spec, field)):
                if name in classes:
                    issues.append(
                        Issue(f"{where}.{field}[{position}]", f"class {name!r} already exists")
                    )
                classes[name] = sqlite
                deleted.discard(name)
        for position, renamed in enumerate(spec.renamed_classes):
            at = f"{where}.renamed_classes[{position}]"
            if renamed.from_ not in classes:
                issues.append(Issue(at, f"cannot rename {renamed.from_!r}: no such class"))
                continue
            if renamed.to in classes:
                issues.append(Issue(at, f"cannot rename to {renamed.to!r}: that class exists"))
                continue
            classes[renamed.to] = classes.pop(renamed.from_)
        for position, name in enumerate(spec.deleted_classes):
            if classes.pop(name, None) is None:
                issues.append(
                    Issue(
                        f"{where}.deleted_classes[{position}]",
                        f"cannot delete {name!r}: no such class",
                    )
                )
            deleted.add(name)
        migrations.append(
            Migration(
                tag=spec.tag,
                new_classes=tuple(spec.new_classes),
                new_sqlite_classes=tuple(spec.new_sqlite_classes),
                renamed_classes=tuple((r.from_, r.to) for r in spec.renamed_classes),
                deleted_classes=tuple(spec.deleted_classes),
            )
        )
    bindings: list[DurableObjectBinding] = []
    unconnected: list[DurableObjectBinding] = []
    specs = model.durable_objects.bindings if model.durable_objects else []
    for index, spec in enumerate(specs):
        where = f"durable_objects.bindings[{index}]"
        claim(spec.name, f"{where}.name")
        if spec.script_name is not None and spec.script_name != worker_name:
            if spec.environment is not None:
                issues.append(
                    Issue(
                        f"{where}.environment",
                        "Durable Objects of other environments are not supported by celld",
                    )
                )
            unconnected.append(DurableObjectBinding(spec.name, spec.class_name, spec.script_name))
            continue
        if spec.environment is not None:
            issues.append(
                Issue(
                    f"{where}.environment",
                    "Durable Objects of other environments are not supported by celld",
                )
            )
        if spec.class_name in deleted and spec.class_name not in classes:
            issues.append(
                Issue(
                    f"{where}.class_name", f"class {spec.class_name!r} was deleted by a migration"
                )
            )
        bindings.append(DurableObjectBinding(spec.name, spec.class_name))
    for binding in bindings:
        classes.setdefault(binding.class_name, False)
    config = DurableObjectsConfig(
        bindings=tuple(bindings),
        unconnected=tuple(unconnected),
        migrations=tuple(migrations),
        classes=tuple(sorted(classes.items())),
    )
    return config, issues
