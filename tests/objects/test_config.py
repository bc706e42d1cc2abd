"""Config of Durable Object bindings and migrations: real files, every error class."""

from __future__ import annotations

from pathlib import Path

import pytest

from celld.project import load_config
from celld.project.objects import DurableObjectBinding, Migration
from tests.test_config import error_of, json_project, toml_project

TOML = """
[[durable_objects.bindings]]
name = "COUNTER"
class_name = "Counter"

[[durable_objects.bindings]]
name = "CHAT"
class_name = "Room"
script_name = "w"

[[migrations]]
tag = "v1"
new_classes = ["Counter", "Old"]

[[migrations]]
tag = "v2"
new_sqlite_classes = ["Lobby"]
renamed_classes = [{ from = "Old", to = "Older" }]

[[migrations]]
tag = "v3"
renamed_classes = [{ from = "Lobby", to = "Room" }]
deleted_classes = ["Older"]
"""


def test_bindings_and_migrations_are_read_and_applied_in_order(tmp_path: Path) -> None:
    objects = load_config(toml_project(tmp_path, TOML)).bindings.objects
    assert objects.bindings == (
        DurableObjectBinding("COUNTER", "Counter"),
        DurableObjectBinding("CHAT", "Room"),
    )
    assert [m.tag for m in objects.migrations] == ["v1", "v2", "v3"]
    assert objects.migrations[1] == Migration(
        "v2", new_sqlite_classes=("Lobby",), renamed_classes=(("Old", "Older"),)
    )
    # Lobby was SQLite-backed and keeps its storage kind under its new name.
    assert dict(objects.classes) == {"Counter": False, "Room": True}
    assert objects.sqlite("Room") and not objects.sqlite("Counter")


def test_a_bound_class_without_migrations_gets_key_value_storage(tmp_path: Path) -> None:
    path = json_project(
        tmp_path, {"durable_objects": {"bindings": [{"name": "A", "class_name": "C"}]}}
    )
    objects = load_config(path).bindings.objects
    assert objects.classes == (("C", False),) and objects.migrations == ()


def test_a_class_of_another_worker_is_not_connected(tmp_path: Path) -> None:
    """As under wrangler dev, a binding to a Worker that is not running is kept (and fails
    only when called); its class is not one of this Worker's."""
    path = json_project(tmp_path, one({"script_name": "other"}))
    objects = load_config(path).bindings.objects
    assert objects.bindings == ()
    assert objects.unconnected == (DurableObjectBinding("A", "C", "other"),)
    assert objects.classes == ()


def one(extra: dict) -> dict:
    return {"durable_objects": {"bindings": [{"name": "A", "class_name": "C", **extra}]}}


@pytest.mark.parametrize(
    ("extra", "where", "message"),
    [
        (one({"environment": "prod"}), "durable_objects.bindings[0].environment", "not supported"),
        (one({"class_name": "class"}), "durable_objects.bindings[0].class_name",
         "not a valid JavaScript class name"),
        ({"durable_objects": {"bindings": [{"class_name": "C"}]}},
         "durable_objects.bindings[0].name", "field required"),
        ({"vars": {"A": 1}, **one({})}, "durable_objects.bindings[0].name",
         "binding name 'A' is already used by vars.A"),
        ({"migrations": [{"tag": "v1", "new_classes": ["C"]}, {"tag": "v1"}]}, "migrations[1].tag",
         "tag 'v1' is already used by migrations[0]"),
        ({"migrations": [{"tag": "v1", "new_classes": ["C"], "new_sqlite_classes": ["C"]}]},
         "migrations[0].new_sqlite_classes[0]", "class 'C' already exists"),
        ({"migrations": [{"tag": "v1", "renamed_classes": [{"from": "X", "to": "Y"}]}]},
         "migrations[0].renamed_classes[0]", "cannot rename 'X': no such class"),
        ({"migrations": [{"tag": "v1", "deleted_classes": ["X"]}]},
         "migrations[0].deleted_classes[0]", "cannot delete 'X': no such class"),
        ({"migrations": [{"tag": "v1", "new_classes": ["C"]},
                         {"tag": "v2", "deleted_classes": ["C"]}], **one({})},
         "durable_objects.bindings[0].class_name", "class 'C' was deleted by a migration"),
        ({"migrations": [{"tag": "v1", "transferred_classes": [{"from": "A"}]}]},
         "migrations[0].transferred_classes", "does not support it"),
        ({"migrations": [{"new_classes": ["C"]}]}, "migrations[0].tag", "field required"),
    ],
)  # fmt: skip
def test_errors(tmp_path: Path, extra: dict, where: str, message: str) -> None:
    text = str(error_of(json_project(tmp_path, extra)))
    assert f"{where}: " in text and message in text, text
