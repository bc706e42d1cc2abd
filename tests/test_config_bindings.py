"""Config of the storage, assets and offline-only bindings: real files, every error class."""

from __future__ import annotations

from pathlib import Path

import pytest

from celld.project import load_config
from celld.project.bindings import (
    AssetsConfig,
    D1DatabaseConfig,
    KvNamespaceConfig,
    OfflineBindingConfig,
    R2BucketConfig,
)
from tests.test_config import error_of, json_project, make_project

TOML = """
name = "w"
main = "src/index.js"

[[kv_namespaces]]
binding = "CACHE"
id = "abc123"

[[kv_namespaces]]
binding = "NOID"

[[d1_databases]]
binding = "DB"
database_name = "prod-db"
database_id = "0000-1111"
migrations_dir = "db/migrations"

[[r2_buckets]]
binding = "FILES"
bucket_name = "files"

[assets]
directory = "public"
binding = "ASSETS"
not_found_handling = "404-page"
run_worker_first = ["/api/*"]

[ai]
binding = "AI"

[[send_email]]
name = "MAIL"
destination_address = "a@example.com"

[[vectorize]]
binding = "VEC"
index_name = "idx"
"""


def test_every_binding_kind(tmp_path: Path) -> None:
    (tmp_path / "public").mkdir()
    config = load_config(make_project(tmp_path, "wrangler.toml", TOML))
    b = config.bindings
    assert b.kv == (KvNamespaceConfig("CACHE", "abc123"), KvNamespaceConfig("NOID", "NOID"))
    assert b.d1 == (
        D1DatabaseConfig(
            binding="DB",
            database_name="prod-db",
            id="0000-1111",
            migrations_dir=tmp_path.resolve() / "db" / "migrations",
            migrations_table="d1_migrations",
        ),
    )
    assert b.r2 == (R2BucketConfig("FILES", "files"),)
    assert b.assets == AssetsConfig(
        directory=(tmp_path / "public").resolve(),
        binding="ASSETS",
        html_handling="auto-trailing-slash",
        not_found_handling="404-page",
        run_worker_first=("/api/*",),
    )
    assert b.offline == (
        OfflineBindingConfig("ai", "AI"),
        OfflineBindingConfig("vectorize", "VEC"),
        OfflineBindingConfig("send_email", "MAIL"),
    )


@pytest.mark.parametrize(
    ("extra", "where", "message"),
    [
        ({"kv_namespaces": [{"id": "x"}]}, "kv_namespaces[0].binding", "field required"),
        ({"kv_namespaces": [{"binding": "1bad"}]}, "kv_namespaces[0].binding",
         "'1bad' is not a valid JavaScript identifier"),
        ({"kv_namespaces": [{"binding": "K", "idd": "x"}]}, "kv_namespaces[0].idd",
         'unknown key (did you mean "id"?)'),
        ({"d1_databases": [{"binding": "DB", "database_id": "../../etc"}]},
         "d1_databases[0].database_id", "is not a name celld can store under"),
        ({"r2_buckets": {"binding": "B"}}, "r2_buckets", "expected an array, got table"),
        ({"assets": {"directory": "missing"}}, "assets.directory", "folder not found"),
        ({"assets": {"binding": "A"}}, "assets.directory", "field required"),
        ({"assets": {"directory": ".", "html_handling": "sometimes"}}, "assets.html_handling",
         "Input should be"),
        ({"vars": {"X": 1}, "kv_namespaces": [{"binding": "X"}]}, "kv_namespaces[0].binding",
         "binding name 'X' is already used by vars.X"),
        ({"r2_buckets": [{"binding": "B"}], "ai": {"binding": "B"}}, "ai.binding",
         "binding name 'B' is already used by r2_buckets[0].binding"),
    ],
)  # fmt: skip
def test_binding_errors(tmp_path: Path, extra: dict, where: str, message: str) -> None:
    path = json_project(tmp_path, extra)
    text = str(error_of(path))
    assert f"{where}: " in text and message in text, text
