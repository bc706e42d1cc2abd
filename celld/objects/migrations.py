"""Apply the config's Durable Object migrations to the state folder, once each, in order.

The index records every applied tag. The recorded tags must be the start of the config's
list (as on Cloudflare, where a migration list only grows); each new migration then moves
a renamed class's storage folder to its new name and deletes a deleted class's storage,
and is recorded. A crash part-way applies the unrecorded migration again, which is safe:
a rename whose target folder exists and whose source is gone was already done.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from celld.objects.index import ObjectIndex
from celld.project.objects import DurableObjectsConfig, Migration


class MigrationError(ValueError):
    """The config's migrations cannot follow the ones already applied (refused at start)."""


def class_folder(state: Path, cls: str) -> Path:
    return state / "objects" / cls


def apply_migrations(
    index: ObjectIndex, migrations: tuple[Migration, ...], state: Path, now_ms: int
) -> list[str]:
    """Apply what is new; returns the tags applied now."""
    recorded = index.applied_tags()
    tags = [m.tag for m in migrations]
    if tags[: len(recorded)] != recorded:
        raise MigrationError(
            "the Durable Object migrations already applied to "
            f"{state} ({', '.join(recorded)}) are not the start of the config's migrations "
            f"({', '.join(tags) or 'none'}); add new migrations after the old ones instead of "
            "changing or removing them"
        )
    applied = []
    for position in range(len(recorded), len(migrations)):
        migration = migrations[position]
        for old, new in migration.renamed_classes:
            source, target = class_folder(state, old), class_folder(state, new)
            if source.exists():
                if target.exists():
                    raise MigrationError(
                        f"migration {migration.tag!r} renames {old!r} to {new!r}, but "
                        f"{target} already holds objects"
                    )
                source.rename(target)
            index.rename_class(old, new)
        for cls in migration.deleted_classes:
            shutil.rmtree(class_folder(state, cls), ignore_errors=True)
            index.drop_class(cls)
        index.record_migration(position, migration.tag, now_ms)
        applied.append(migration.tag)
    return applied


def migrate_state(config: DurableObjectsConfig, state: Path, now_ms: int) -> list[str]:
    """Apply the config's new migrations to `state` before celld serves anything (a config
    whose migrations cannot apply stops `celld run` with the reason)."""
    index = ObjectIndex(state / "objects" / "index.sqlite3")
    index.open()
    try:
        return apply_migrations(index, config.migrations, state, now_ms)
    finally:
        index.close()
