"""The explorer's /local/workers entries, from real configs (compat/projects)."""

from __future__ import annotations

from pathlib import Path

from celld.project import load_config
from celld.server.explorer_workers import persistence_scope, worker_entry

COMPAT = Path(__file__).resolve().parents[1] / "compat" / "projects"


def test_storage_bindings_and_own_workflows_as_wrangler_dev_lists_them() -> None:
    """What wrangler dev 4.164.0 answered for compat/projects/core."""
    core = load_config(COMPAT / "core" / "wrangler.jsonc")
    entry = worker_entry(core, {core.name: core})
    assert len(entry.pop("persistenceScope")) == 64
    own = "celld-compat-core"
    flows = [
        ("script-workflow", "SCRIPT", "ScriptWorkflow"),
        ("bench-workflow", "BENCH", "BenchWorkflow"),
        ("limited-workflow", "LIMITED", "ScriptWorkflow"),
        ("storage-workflow", "STORE", "StorageWorkflow"),
        ("cron-workflow", "CRON", "CronWorkflow"),
    ]
    assert entry == {
        "isSelf": True,
        "name": own,
        "bindings": {
            "kv": [{"id": "compat-kv", "bindingName": "KV"}],
            "d1": [{"id": "compat-db-id", "bindingName": "DB"}],
            "r2": [{"id": "compat-bucket", "bindingName": "BUCKET"}],
            "do": [],
            "workflows": [
                {"id": name, "bindingName": binding, "className": cls, "scriptName": own}
                for name, binding, cls in flows
            ],
            "sendEmail": [],
            "flagship": [],
        },
        "triggers": {"crons": []},
    }


def test_sql_flag_of_another_workers_class_and_crons(tmp_path: Path) -> None:
    back = load_config(COMPAT / "workers" / "back" / "wrangler.jsonc")
    front = load_config(COMPAT / "workers" / "front" / "wrangler.jsonc")
    session = {front.name: front, back.name: back}
    assert worker_entry(front, session)["bindings"]["do"][0]["useSqlite"] is True
    # without back in the session nothing says the class has SQL
    assert worker_entry(front, {front.name: front})["bindings"]["do"][0]["useSqlite"] is False
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "index.js").write_text("export default {};\n")
    (tmp_path / "wrangler.toml").write_text(
        'name = "timed"\nmain = "src/index.js"\ncompatibility_date = "2025-01-01"\n'
        '[triggers]\ncrons = ["*/5 * * * *", "0 0 * * 1"]\n'
    )
    timed = load_config(tmp_path / "wrangler.toml")
    assert worker_entry(timed, {})["triggers"] == {"crons": ["*/5 * * * *", "0 0 * * 1"]}
    # what wrangler dev 4.164.0 gave, started in this folder (any path string will do)
    assert persistence_scope("/work/wt-workers/compat/projects/workers/front").startswith(
        "8595277eb6f8"
    )
