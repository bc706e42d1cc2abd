"""Named environments (`--env`), `.dev.vars.<env>` and `.env` files: real files in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from celld.project import ConfigError, load_config
from celld.project.environments import requested_env
from celld.project.expand import expand_values

TOML = """
name = "shop"
main = "src/index.js"
compatibility_date = "2025-01-01"
compatibility_flags = ["nodejs_compat"]

[vars]
LEVEL = "top"

[[kv_namespaces]]
binding = "CACHE"
id = "top-cache"

[env.staging]
compatibility_date = "2025-06-01"
vars = { LEVEL = "staging" }
kv_namespaces = [{ binding = "CACHE", id = "staging-cache" }]

[env.bare]

[env.named]
name = "shop-preview"
main = "src/other.js"
dev = { port = 9999 }
"""


def project(tmp_path: Path, text: str = TOML) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "index.js").write_text("export default {};\n")
    (tmp_path / "src" / "other.js").write_text("export default {};\n")
    path = tmp_path / "wrangler.toml"
    path.write_text(text)
    return path


def keys(config) -> list[str]:  # type: ignore[no-untyped-def]
    return [issue.key for issue in config.warnings]


def test_top_level_without_env_and_env_is_not_reported_unused(tmp_path: Path) -> None:
    config = load_config(project(tmp_path), environ={})
    assert (config.name, config.env, config.vars) == ("shop", None, {"LEVEL": "top"})
    assert [kv.id for kv in config.bindings.kv] == ["top-cache"]
    assert "env" not in keys(config)


def test_environment_overrides_and_inherits(tmp_path: Path) -> None:
    config = load_config(project(tmp_path), env="staging", environ={})
    assert config.name == "shop-staging"  # <name>-<env>
    assert config.env == "staging"
    assert config.compatibility_date == "2025-06-01"  # its own
    assert config.compatibility_flags == ("nodejs_compat",)  # inherited
    assert config.vars == {"LEVEL": "staging"}
    assert [kv.id for kv in config.bindings.kv] == ["staging-cache"]
    assert config.warnings == ()


def test_bindings_and_vars_are_not_inherited(tmp_path: Path) -> None:
    config = load_config(project(tmp_path), env="bare", environ={})
    assert config.name == "shop-bare"
    assert config.vars == {}
    assert config.bindings.kv == ()
    warned = {issue.key: issue.message for issue in config.warnings}
    assert set(warned) == {"vars", "kv_namespaces"}
    assert 'not on "env.bare"' in warned["kv_namespaces"]


def test_own_name_and_main_and_top_level_only_keys(tmp_path: Path) -> None:
    config = load_config(project(tmp_path), env="named", environ={})
    assert config.name == "shop-preview"
    assert config.main == (tmp_path / "src" / "other.js").resolve()
    assert "env.named.dev" in keys(config)
    assert config.dev.port is None  # [dev] is read from the top level only


def test_unknown_environment_lists_the_defined_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(project(tmp_path), env="prod", environ={})
    message = str(info.value)
    assert 'no environment named "prod"' in message
    assert '"staging", "bare", "named"' in message


def test_environment_without_any_env_section_runs_the_top_level(tmp_path: Path) -> None:
    path = tmp_path / "wrangler.json"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "index.js").write_text("export default {};\n")
    path.write_text(json.dumps({"name": "w", "main": "src/index.js", "vars": {"A": "1"}}))
    config = load_config(path, env="dev", environ={})
    assert (config.name, config.vars) == ("w-dev", {"A": "1"})
    assert keys(config) == ["env"]


def test_cloudflare_env_variable_selects_when_no_option() -> None:
    assert requested_env(None, {"CLOUDFLARE_ENV": "staging"}) == "staging"
    assert requested_env("prod", {"CLOUDFLARE_ENV": "staging"}) == "prod"
    assert requested_env(None, {"CLOUDFLARE_ENV": ""}) is None


def test_dev_vars_of_the_environment_win_over_dev_vars(tmp_path: Path) -> None:
    path = project(tmp_path)
    (tmp_path / ".dev.vars").write_text("SECRET=plain\n")
    (tmp_path / ".dev.vars.staging").write_text("SECRET=staged\n")
    (tmp_path / ".env").write_text("IGNORED=yes\n")
    assert load_config(path, env="staging", environ={}).vars["SECRET"] == "staged"
    bare = load_config(path, env="bare", environ={})
    assert bare.vars == {"SECRET": "plain"}  # no .dev.vars.bare: .dev.vars; .env unread
    assert bare.vars_files == (tmp_path / ".dev.vars",)


def test_dot_env_files_when_there_is_no_dev_vars(tmp_path: Path) -> None:
    path = project(tmp_path)
    (tmp_path / ".env").write_text("A=env\nB=env\nC=env\nURL=http://${HOST}:${PORT:-80}/\n")
    (tmp_path / ".env.local").write_text("B=local\nHOST=example.com\n")
    (tmp_path / ".env.staging").write_text("C=staging\n")
    (tmp_path / ".env.staging.local").write_text("D=staging-local\n")
    staged = load_config(path, env="staging", environ={}).vars
    assert {k: staged[k] for k in "ABCD"} == {
        "A": "env",
        "B": "local",
        "C": "staging",
        "D": "staging-local",
    }
    assert staged["URL"] == "http://example.com:80/"
    top = load_config(path, environ={}).vars
    assert (top["C"], "D" in top) == ("env", False)
    off = load_config(path, environ={"CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV": "false"})
    assert "A" not in off.vars


def test_process_environment_only_when_asked(tmp_path: Path) -> None:
    path = project(tmp_path)
    (tmp_path / ".env").write_text("A=file\nB=${FROM_PROCESS}\n")
    environ = {"FROM_PROCESS": "p", "A": "process"}
    assert load_config(path, environ=environ).vars["B"] == ""
    included = load_config(path, environ={**environ, "CLOUDFLARE_INCLUDE_PROCESS_ENV": "true"})
    assert (included.vars["A"], included.vars["B"], included.vars["FROM_PROCESS"]) == (
        "process",
        "p",
        "p",
    )


def test_expansion_forms() -> None:
    parsed = {"A": "1", "B": "$A-${A}", "C": "${MISSING:-d}", "D": "${EMPTY-x}", "E": "\\$A"}
    assert expand_values(parsed | {"EMPTY": ""}, {}) == {
        "A": "1",
        "B": "1-1",
        "C": "d",
        "D": "",
        "E": "$A",
        "EMPTY": "",
    }


def test_build_of_the_environment_replaces_the_top_level_one(tmp_path: Path) -> None:
    """wrangler reads `rawEnv.build ?? topLevel.build`: whole, not merged."""
    from celld.cli.serve import WorkerArgs, load_workers
    from celld.project.build import read_build

    (tmp_path / "src").mkdir()
    (tmp_path / "wrangler.toml").write_text(
        'name = "built"\nmain = "src/index.js"\ncompatibility_date = "2025-01-01"\n'
        '[build]\ncommand = "echo top > which.txt"\ncwd = "src"\n'
        '[env.staging.build]\ncommand = "echo staging > which.txt"\n'
        "[env.plain]\n"
    )
    (tmp_path / "src" / "index.js").write_text("export default { fetch() {} };\n")
    config = tmp_path / "wrangler.toml"
    top, staging, plain = (read_build(config, env) for env in (None, "staging", "plain"))
    assert top is not None and staging is not None and plain is not None
    assert (top.command, top.cwd) == ("echo top > which.txt", tmp_path / "src")
    # the environment's own build has no cwd: the top level's is not merged into it
    assert (staging.command, staging.cwd) == ("echo staging > which.txt", tmp_path)
    assert (plain.command, plain.cwd) == (top.command, top.cwd)
    with pytest.raises(ConfigError, match='no environment named "nope"'):
        read_build(config, "nope")

    loaded = load_workers(WorkerArgs(projects=(tmp_path,), env="staging"))
    assert loaded[0].name == "built-staging"
    assert (tmp_path / "which.txt").read_text().strip() == "staging"
