"""A Workflow whose steps write D1, R2 and KV, read back by the fetch handler."""

from __future__ import annotations

from compat.differences import R2_STORAGE_CLASS, difference
from compat.scenario import Scenario


@difference(wrangler=R2_STORAGE_CLASS)
def test_workflow_steps_write_every_store(sc: Scenario) -> None:
    """Each step's write is visible to the Worker once the instance completes, with its
    metadata: KV list and getWithMetadata, R2 custom metadata, D1 rows and meta."""
    tag = sc.new_id()
    t = "w_" + tag.replace("-", "_")
    ops = [
        {"b": "DB", "m": "exec", "args": [f"CREATE TABLE {t} (id INTEGER PRIMARY KEY, note TEXT)"]},
        {"b": "DB", "prepare": f"INSERT INTO {t} (note) VALUES (?)", "bind": ["from a step"],
         "m": "run"},
        {"b": "BUCKET", "m": "put", "args": [
            f"{tag}/report.json", '{"ok":true}',
            {"customMetadata": {"step": "r2"}, "httpMetadata": {"contentType": "application/json"}},
        ]},
        {"b": "KV", "m": "put", "args": [f"{tag}:done", "yes", {"metadata": {"step": "kv"}}]},
    ]  # fmt: skip
    instance = sc.create(ops, wf="STORE")
    results = sc.output(instance, wf="STORE")["results"]
    assert results[0]["count"] == 1
    assert results[1]["meta"]["changes"] == 1 and results[1]["meta"]["last_row_id"] == 1
    assert results[2]["customMetadata"] == {"step": "r2"}
    assert results[3] == {"undefined": True}

    rows, obj, listed, kv = sc.storage(
        {"b": "DB", "prepare": f"SELECT id, note FROM {t}", "m": "all"},
        {"b": "BUCKET", "m": "get", "args": [f"{tag}/report.json"], "read": "json"},
        {"b": "KV", "m": "list", "args": [{"prefix": tag}]},
        {"b": "KV", "m": "getWithMetadata", "args": [f"{tag}:done"]},
    )
    assert rows["results"] == [{"id": 1, "note": "from a step"}]
    assert rows["meta"]["rows_read"] == 1 and rows["meta"]["changed_db"] is False
    assert obj["body"] == {"ok": True}
    assert obj["customMetadata"] == {"step": "r2"}
    assert obj["httpMetadata"]["contentType"] == "application/json"
    assert obj["storageClass"] == sc.pick(celld="Standard", wrangler="")
    assert listed == {
        "keys": [{"name": f"{tag}:done", "metadata": {"step": "kv"}}],
        "list_complete": True,
        "cacheStatus": None,
    }
    assert kv == {"value": "yes", "metadata": {"step": "kv"}, "cacheStatus": None}
