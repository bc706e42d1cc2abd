"""Migrations on a real state folder: applied once, in order, recorded; renames keep data."""

from __future__ import annotations

from pathlib import Path

import pytest

from celld.objects.ids import ObjectRef
from celld.objects.index import ObjectIndex
from celld.objects.migrations import MigrationError, apply_migrations, class_folder
from celld.project.objects import Migration

V1 = Migration("v1", new_classes=("A", "B"))
V2 = Migration("v2", renamed_classes=(("A", "Renamed"),), deleted_classes=("B",))
OBJ = "0" * 64


def index_at(state: Path) -> ObjectIndex:
    index = ObjectIndex(state / "objects" / "index.sqlite3")
    index.open()
    return index


def test_renames_move_storage_and_alarms_and_deletes_remove_them(tmp_path: Path) -> None:
    index = index_at(tmp_path)
    assert apply_migrations(index, (V1,), tmp_path, 1) == ["v1"]
    for cls in ("A", "B"):
        class_folder(tmp_path, cls).mkdir(parents=True)
        (class_folder(tmp_path, cls) / f"{OBJ}.sqlite3").write_bytes(b"data of " + cls.encode())
        index.set_alarm(ObjectRef(cls, OBJ), None, 100)
    assert apply_migrations(index, (V1, V2), tmp_path, 2) == ["v2"]
    assert (class_folder(tmp_path, "Renamed") / f"{OBJ}.sqlite3").read_bytes() == b"data of A"
    assert not class_folder(tmp_path, "A").exists() and not class_folder(tmp_path, "B").exists()
    assert [a.ref for a in index.alarms()] == [ObjectRef("Renamed", OBJ)]
    assert index.applied_tags() == ["v1", "v2"]
    # Applied once: a restart with the same list does nothing.
    assert apply_migrations(index, (V1, V2), tmp_path, 3) == []


def test_changing_applied_migrations_is_refused(tmp_path: Path) -> None:
    index = index_at(tmp_path)
    apply_migrations(index, (V1, V2), tmp_path, 1)
    with pytest.raises(MigrationError, match=r"\(v1, v2\) are not the start of .* \(v1\)"):
        apply_migrations(index, (V1,), tmp_path, 2)
    with pytest.raises(MigrationError, match="not the start"):
        apply_migrations(index, (Migration("v0"), V1, V2), tmp_path, 2)
