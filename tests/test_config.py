"""Project configuration: real files in tmp_path, every error class, no mocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from celld.project import (
    ConfigError,
    ProjectConfig,
    WorkflowConfig,
    find_config,
    load_config,
    parse_var_option,
)
from celld.project.jsonc import JSONCError
from celld.project.jsonc import loads as jsonc_loads

WORKFLOW_TOML = """
name = "my-worker"
main = "src/index.js"
compatibility_date = "2024-10-22"
compatibility_flags = ["nodejs_compat"]

[vars]
GREETING = "hi"
COUNT = 3
FLAG = true
NESTED = { a = [1, 2], b = "x" }

[limits]
cpu_ms = 50_000
subrequests = 1000

[[workflows]]
name = "workflows-starter"
binding = "MY_WORKFLOW"
class_name = "MyWorkflow"

[[workflows]]
name = "big_one"
binding = "BIG"
class_name = "BigWorkflow"
script_name = "my-worker"
[workflows.limits]
steps = 25_000
"""


def make_project(tmp_path: Path, filename: str, text: str, main: str = "src/index.js") -> Path:
    """Write a config file (and its entry module) and return the config path."""
    (tmp_path / main).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / main).write_text("export default {}\n")
    path = tmp_path / filename
    path.write_text(text)
    return path


def toml_project(tmp_path: Path, body: str) -> Path:
    return make_project(tmp_path, "wrangler.toml", 'name = "w"\nmain = "src/index.js"\n' + body)


def json_project(tmp_path: Path, extra: dict, name: str = "wrangler.json") -> Path:
    data = {"name": "w", "main": "src/index.js", **extra}
    return make_project(tmp_path, name, json.dumps(data))


def error_of(path: Path, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, **kwargs)
    return info.value


# --- formats ---------------------------------------------------------------------------------


def test_toml_full(tmp_path: Path) -> None:
    cfg = load_config(make_project(tmp_path, "wrangler.toml", WORKFLOW_TOML))
    assert isinstance(cfg, ProjectConfig)
    assert cfg.path == (tmp_path / "wrangler.toml").resolve()
    assert cfg.root == tmp_path.resolve()
    assert cfg.name == "my-worker"
    assert cfg.main == (tmp_path / "src/index.js").resolve()
    assert cfg.main.is_absolute()
    assert cfg.compatibility_date == "2024-10-22"
    assert cfg.compatibility_flags == ("nodejs_compat",)
    assert cfg.vars == {
        "GREETING": "hi",
        "COUNT": 3,
        "FLAG": True,
        "NESTED": {"a": [1, 2], "b": "x"},
    }
    assert cfg.cpu_ms == 50_000
    assert cfg.workflows == (
        WorkflowConfig("workflows-starter", "MY_WORKFLOW", "MyWorkflow", None, 10_000),
        WorkflowConfig("big_one", "BIG", "BigWorkflow", "my-worker", 25_000),
    )


def test_json_minimal_defaults(tmp_path: Path) -> None:
    cfg = load_config(json_project(tmp_path, {}))
    assert cfg.compatibility_date is None
    assert cfg.compatibility_flags == ()
    assert cfg.vars == {}
    assert cfg.workflows == ()
    assert cfg.cpu_ms is None


def test_jsonc_comments_and_trailing_commas(tmp_path: Path) -> None:
    text = """\ufeff{
  // line comment with "quotes" and a trailing comma,
  "name": "w", /* block
  comment */ "main": "src/index.js",
  "vars": {"URL": "http://x//y", "STAR": "/* not a comment */", "Q": "a\\"b,]",},
  "workflows": [
    {"name": "wf", "binding": "WF", "class_name": "Wf", /* x */ },
  ],
}
"""
    cfg = load_config(make_project(tmp_path, "wrangler.jsonc", text))
    assert cfg.vars == {"URL": "http://x//y", "STAR": "/* not a comment */", "Q": 'a"b,]'}
    assert cfg.workflows[0].binding == "WF"


def test_json_file_accepts_comments_like_wrangler(tmp_path: Path) -> None:
    text = '{\n // c\n "name": "w", "main": "src/index.js",\n}'
    assert load_config(make_project(tmp_path, "wrangler.json", text)).name == "w"


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('{\n  "name": "w",\n  "main": ,\n}', 3, 11),
        ('{"a": 1 /* open', 1, 9),
        ('{\n "a": NaN}', 2, 7),
        ("[1,,]", 1, 4),
    ],
)
def test_jsonc_errors_have_positions(text: str, line: int, column: int) -> None:
    with pytest.raises(JSONCError) as info:
        jsonc_loads(text)
    assert (info.value.line, info.value.column) == (line, column)


def test_json_parse_error_names_file_line_col(tmp_path: Path) -> None:
    path = make_project(tmp_path, "wrangler.jsonc", '{\n  "name": "w",\n  "main" "x"\n}')
    assert str(error_of(path)).startswith(f"{path}:3:10: ")


def test_toml_parse_error_names_file_line_col(tmp_path: Path) -> None:
    path = make_project(tmp_path, "wrangler.toml", 'name = "w"\nmain = \n')
    err = error_of(path)
    assert str(err) == f"{path}:2:8: Invalid value"
    assert (err.issues[0].line, err.issues[0].column) == (2, 8)


def test_top_level_must_be_object(tmp_path: Path) -> None:
    path = make_project(tmp_path, "wrangler.json", "[1, 2]")
    assert "must be an object" in str(error_of(path))


# --- finding the file ------------------------------------------------------------------------


def test_precedence_json_then_jsonc_then_toml(tmp_path: Path) -> None:
    for name in ("wrangler.toml", "wrangler.jsonc", "wrangler.json"):
        (tmp_path / name).write_text("{}")
        assert find_config(tmp_path) == tmp_path / name


def test_no_config_names_folder_and_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        find_config(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{tmp_path}: ")
    for name in ("wrangler.json", "wrangler.jsonc", "wrangler.toml"):
        assert name in message


def test_does_not_search_parent_folders(tmp_path: Path) -> None:
    (tmp_path / "wrangler.toml").write_text("")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError):
        find_config(tmp_path / "sub")


def test_explicit_config(tmp_path: Path) -> None:
    other = tmp_path / "conf" / "custom.jsonc"
    other.parent.mkdir()
    other.write_text("{}")
    (tmp_path / "wrangler.toml").write_text("")
    assert find_config(tmp_path, other) == other
    with pytest.raises(ConfigError, match="not found"):
        find_config(tmp_path, tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="unsupported configuration file type"):
        find_config(tmp_path, tmp_path / "wrangler.yaml")


def test_a_build_redirect_points_to_the_generated_config(tmp_path: Path) -> None:
    """The Cloudflare Vite plugin's `.wrangler/deploy/config.json`, as wrangler dev reads it:
    the generated config wins over the project's own; --config wins over both; state stays
    in the project."""
    from celld.project.files import state_home

    (tmp_path / "wrangler.jsonc").write_text("{}")
    generated = tmp_path / "dist" / "app" / "wrangler.json"
    generated.parent.mkdir(parents=True)
    generated.write_text("{}")
    marker = tmp_path / ".wrangler" / "deploy" / "config.json"
    marker.parent.mkdir(parents=True)
    marker.write_text('{"configPath": "../../dist/app/wrangler.json", "auxiliaryWorkers": []}')
    assert find_config(tmp_path) == generated
    assert state_home(tmp_path, None, generated.parent) == tmp_path
    own = tmp_path / "wrangler.jsonc"
    assert find_config(tmp_path, own) == own
    assert state_home(tmp_path, own, tmp_path) == tmp_path
    generated.unlink()
    with pytest.raises(ConfigError, match="names no file .* run the build again"):
        find_config(tmp_path)
    marker.write_text("{}")
    with pytest.raises(ConfigError, match="configPath must name the generated configuration"):
        find_config(tmp_path)


def test_a_generated_config_loads_with_its_empty_binding_lists(tmp_path: Path) -> None:
    """wrangler writes every binding kind, empty, into the config it generates: empty ones ask
    for nothing; a non-empty one is still refused."""
    generated = {
        "configPath": "/p/wrangler.jsonc",
        "userConfigPath": "/p/wrangler.jsonc",
        "topLevelName": "w",
        "definedEnvironments": [],
        "queues": {"producers": [], "consumers": []},
        "services": [],
        "hyperdrive": [],
        "logfwdr": {"bindings": []},
        "cloudchamber": {},
        "exports": {},
        "python_modules": {"exclude": ["**/*.pyc"]},
    }
    config = load_config(json_project(tmp_path, generated))
    assert config.warnings == ()
    asks = {**generated, "hyperdrive": [{"binding": "H", "id": "x"}]}
    assert "Hyperdrive bindings are not supported" in str(error_of(json_project(tmp_path, asks)))
    # outside a generated config, the key itself is refused even when empty
    assert "Hyperdrive bindings" in str(error_of(json_project(tmp_path, {"hyperdrive": []})))


def test_missing_project_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="project folder not found"):
        find_config(tmp_path / "nope")


# --- validation ------------------------------------------------------------------------------


def test_missing_class_name_message(tmp_path: Path) -> None:
    path = toml_project(tmp_path, '[[workflows]]\nname = "a"\nbinding = "A"\n')
    assert str(error_of(path)) == f"{path}: workflows[0].class_name: field required"


def test_main_or_assets_required(tmp_path: Path) -> None:
    path = make_project(tmp_path, "wrangler.toml", 'name = "w"\n')
    expected = "main: Missing entry-point to Worker script or to assets directory"
    assert str(error_of(path)) == f"{path}: {expected}"


def test_main_must_exist(tmp_path: Path) -> None:
    path = make_project(tmp_path, "wrangler.toml", 'main = "src/missing.js"\n')
    err = error_of(path)
    assert err.key == "main"
    assert "src/missing.js" in str(err) and str(tmp_path) in str(err)


def test_main_relative_to_config_folder_not_cwd(tmp_path: Path, monkeypatch) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    path = make_project(project, "wrangler.toml", 'main = "./src/index.js"\n')
    monkeypatch.chdir(tmp_path)
    assert load_config(Path("proj/wrangler.toml")).main == (project / "src/index.js").resolve()
    assert load_config(path).main == (project / "src/index.js").resolve()


def test_name_defaults_to_folder(tmp_path: Path) -> None:
    project = tmp_path / "my-proj"
    project.mkdir()
    cfg = load_config(make_project(project, "wrangler.toml", 'main = "src/index.js"\n'))
    assert cfg.name == "my-proj"


def test_invalid_worker_name(tmp_path: Path) -> None:
    path = json_project(tmp_path, {"name": "My.Worker"})
    assert "name: 'My.Worker' is not a valid Worker name" in str(error_of(path))


@pytest.mark.parametrize(
    ("body", "key", "fragment"),
    [
        ('compatibility_date = "2024-13-01"\n', "compatibility_date", "YYYY-MM-DD"),
        ('compatibility_date = "24-10-22"\n', "compatibility_date", "YYYY-MM-DD"),
        ("compatibility_date = 2024-10-22\n", "compatibility_date", "quoted string"),
        ('compatibility_flags = "nodejs_compat"\n', "compatibility_flags", "expected an array"),
        ("compatibility_flags = [1]\n", "compatibility_flags[0]", "expected a string, got integer"),
        ('vars = "x"\n', "vars", "expected a table"),
        ("[vars]\nWHEN = 2024-01-01\n", "vars.WHEN", "not a JSON value"),
        ("[vars]\nX = nan\n", "vars.X", "not a JSON number"),
        ("[vars]\nX = [1, { y = inf }]\n", "vars.X[1].y", "not a JSON number"),
        ("[limits]\ncpu_ms = 0\n", "limits.cpu_ms", "between 1 and 300,000"),
        ("[limits]\ncpu_ms = 300001\n", "limits.cpu_ms", "between 1 and 300,000"),
        ('[limits]\ncpu_ms = "100"\n', "limits.cpu_ms", "expected an integer, got string"),
        ("[limits]\ncpu_ms = true\n", "limits.cpu_ms", "expected an integer, got boolean"),
        ("[limits]\nsubrequests = -1\n", "limits.subrequests", "positive"),
        ("[limits]\ncpu = 5\n", "limits.cpu", 'unknown key (did you mean "cpu_ms"?)'),
    ],
)
def test_field_errors(tmp_path: Path, body: str, key: str, fragment: str) -> None:
    path = toml_project(tmp_path, body)
    message = str(error_of(path))
    assert message.startswith(f"{path}: {key}: "), message
    assert fragment in message


def test_cpu_ms_bounds_accepted(tmp_path: Path) -> None:
    for value in (1, 300_000):
        path = json_project(tmp_path, {"limits": {"cpu_ms": value}})
        assert load_config(path).cpu_ms == value


WF = {"name": "wf", "binding": "WF", "class_name": "Wf"}


def test_workflow_schedules(tmp_path: Path) -> None:
    """One expression or a list; kept in order, validated."""
    one = json_project(tmp_path, {"workflows": [{**WF, "schedules": "*/5 * * * *"}]})
    assert load_config(one).workflows[0].schedules == ("*/5 * * * *",)
    many = json_project(
        tmp_path, {"workflows": [{**WF, "schedules": ["0 0 L * *", "0 9 * * MON"]}]}
    )
    assert load_config(many).workflows[0].schedules == ("0 0 L * *", "0 9 * * MON")
    plain = json_project(tmp_path, {"workflows": [WF]})
    assert load_config(plain).workflows[0].schedules == ()


@pytest.mark.parametrize(
    ("override", "key", "fragment"),
    [
        ({"name": "x" * 65}, "workflows[0].name", "at most 64 characters"),
        ({"name": "-bad"}, "workflows[0].name", "not a valid workflow name"),
        ({"name": "has space"}, "workflows[0].name", "not a valid workflow name"),
        ({"binding": "MY-WF"}, "workflows[0].binding", "not a valid JavaScript identifier"),
        ({"binding": "1WF"}, "workflows[0].binding", "not a valid JavaScript identifier"),
        ({"class_name": "class"}, "workflows[0].class_name", "not a valid JavaScript class name"),
        ({"class_name": "My.Wf"}, "workflows[0].class_name", "not a valid JavaScript class"),
        ({"limits": {"steps": 0}}, "workflows[0].limits.steps", "between 1 and 25,000"),
        ({"limits": {"steps": 25_001}}, "workflows[0].limits.steps", "between 1 and 25,000"),
        ({"limits": {"step": 5}}, "workflows[0].limits.step", 'did you mean "steps"'),
        (
            {"schedules": ["0 * * * *", "61 * * * *"]},
            "workflows[0].schedules",
            "[1]: '61 * * * *' is not a valid cron expression: Bad minute",
        ),
        ({"schedules": "0 * *"}, "workflows[0].schedules", "it needs five fields"),
        ({"schedules": []}, "workflows[0].schedules", "a non-empty list of cron expressions"),
        ({"schedules": [5]}, "workflows[0].schedules", "must be a string, not int"),
        ({"schedules": ["0 * * * *", "0 * * * *"]}, "workflows[0].schedules", "twice"),
        (
            {"schedules": "0 " + "1," * 200 + "1 * * *"},
            "workflows[0].schedules",
            "at most 256 characters",
        ),
        ({"clas_name": "X"}, "workflows[0].clas_name", 'did you mean "class_name"'),
        ({"name": 5}, "workflows[0].name", "expected a string, got integer"),
    ],
)
def test_workflow_errors(tmp_path: Path, override: dict, key: str, fragment: str) -> None:
    path = json_project(tmp_path, {"workflows": [{**WF, **override}]})
    message = str(error_of(path))
    assert f"{path}: {key}: " in message, message
    assert fragment in message


def test_workflow_name_limits_accepted(tmp_path: Path) -> None:
    path = json_project(tmp_path, {"workflows": [{**WF, "name": "_" + "a-" * 31 + "z"}]})
    assert len(load_config(path).workflows[0].name) == 64


def test_workflows_must_be_array(tmp_path: Path) -> None:
    path = json_project(tmp_path, {"workflows": WF})
    assert "workflows: expected an array, got table" in str(error_of(path))


def test_duplicate_workflow_names_and_bindings(tmp_path: Path) -> None:
    wfs = [WF, {**WF, "binding": "OTHER"}, {**WF, "name": "wf2"}]
    err = error_of(json_project(tmp_path, {"workflows": wfs}))
    text = str(err)
    assert "workflows[1].name: workflow name 'wf' is already used by workflows[0].name" in text
    assert "workflows[2].binding: binding name 'WF' is already used by workflows[0].binding" in text


def test_binding_clashes_with_var(tmp_path: Path) -> None:
    err = error_of(json_project(tmp_path, {"vars": {"WF": "x"}, "workflows": [WF]}))
    assert "workflows[0].binding: binding name 'WF' is already used by vars.WF" in str(err)


def test_script_name_of_this_worker_is_fine(tmp_path: Path) -> None:
    path = json_project(tmp_path, {"workflows": [{**WF, "script_name": "w"}]})
    assert load_config(path).workflows[0].script_name == "w"
    assert load_config(path).workflows[0].unconnected is None


def test_script_name_of_another_worker_is_not_connected(tmp_path: Path) -> None:
    """As under wrangler dev, the binding is kept and only fails when used."""
    path = json_project(tmp_path, {"workflows": [{**WF, "script_name": "billing-worker"}]})
    assert load_config(path).workflows[0].unconnected == "billing-worker"


def test_several_errors_reported_together(tmp_path: Path) -> None:
    path = json_project(tmp_path, {"hyperdrive": [], "compatibility_date": "soon"})
    err = error_of(path)
    assert [issue.key for issue in err.issues] == ["hyperdrive", "compatibility_date"]
    assert len(str(err).splitlines()) == 2


# --- key categories --------------------------------------------------------------------------


def test_deploy_only_keys_are_ignored(tmp_path: Path) -> None:
    extra = {
        "$schema": "node_modules/wrangler/config-schema.json",
        "account_id": "abc",
        "workers_dev": True,
        "route": "example.com/*",
        "routes": [{"pattern": "x.com/*", "zone_name": "x.com"}],
        "preview_urls": False,
        "observability": {"enabled": True},
        "logpush": True,
        "upload_source_maps": True,
        "minify": True,
        "keep_vars": True,
        "send_metrics": False,
        "placement": {"mode": "smart"},
        "tail_consumers": [{"service": "t"}],
        "dev": {"port": 9000},
        "build": {"command": "make"},
        "no_bundle": True,
        "find_additional_modules": True,
        "base_dir": "src",
        "rules": [{"type": "ESModule", "globs": ["**/*.js"]}],
        "env": {"staging": {"kv_namespaces": [{"binding": "KV"}], "workflows": []}},
        "triggers": {"crons": ["* * * * *"]},
        "usage_model": "standard",
        "keep_names": False,
        "compliance_region": "public",
        "migrations": [{"tag": "v1", "new_classes": ["X"]}],
    }
    assert load_config(json_project(tmp_path, extra)).name == "w"


def test_env_must_be_table(tmp_path: Path) -> None:
    assert "env: expected a table" in str(error_of(json_project(tmp_path, {"env": "prod"})))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hyperdrive", [{"binding": "H", "id": "h"}]),
        ("version_metadata", {"binding": "V"}),
        ("unsafe", {"bindings": []}),
        ("containers", []),
    ],
)
def test_unsupported_bindings_are_refused(tmp_path: Path, key: str, value: object) -> None:
    path = json_project(tmp_path, {key: value})
    message = str(error_of(path))
    assert message.startswith(f"{path}: {key}: ")
    assert "bindings are not supported by celld yet" in message


@pytest.mark.parametrize("key", ["define", "alias", "exports", "node_compat", "site"])
def test_behaviour_changing_keys_are_refused(tmp_path: Path, key: str) -> None:
    path = json_project(tmp_path, {key: {}})
    assert f"{path}: {key}: " in str(error_of(path))
    assert "not supported" in str(error_of(path)) or "removed" in str(error_of(path))


@pytest.mark.parametrize(
    ("key", "hint"),
    [("workflow", "workflows"), ("compatability_date", "compatibility_date"), ("zzz", None)],
)
def test_unknown_keys(tmp_path: Path, key: str, hint: str | None) -> None:
    path = json_project(tmp_path, {key: 1})
    message = str(error_of(path))
    assert message.startswith(f"{path}: {key}: unknown key")
    if hint:
        assert message.endswith(f'(did you mean "{hint}"?)')
    else:
        assert message.endswith("unknown key")


# --- vars ------------------------------------------------------------------------------------


def test_dev_vars_and_overrides(tmp_path: Path) -> None:
    path = json_project(tmp_path, {"vars": {"A": "config", "B": 2, "C": "config"}})
    (tmp_path / ".dev.vars").write_text(
        "# secrets\nB=from-dev-vars\nexport D='single ${A}'\nE=\"multi\\nline\"\nBARE\n"
    )
    cfg = load_config(path, var_overrides={"C": "cli", "F": "cli:with:colons"})
    assert cfg.vars == {
        "A": "config",
        "B": "from-dev-vars",
        "C": "cli",
        "D": "single ${A}",
        "E": "multi\nline",
        "F": "cli:with:colons",
    }


def test_var_overrides_beat_dev_vars(tmp_path: Path) -> None:
    path = toml_project(tmp_path, "")
    (tmp_path / ".dev.vars").write_text("K=dev\n")
    assert load_config(path).vars == {"K": "dev"}
    assert load_config(path, var_overrides={"K": "cli"}).vars == {"K": "cli"}


def test_no_dev_vars_file(tmp_path: Path) -> None:
    assert load_config(toml_project(tmp_path, '[vars]\nX = "1"\n')).vars == {"X": "1"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("KEY:VALUE", ("KEY", "VALUE")),
        ("URL:http://localhost:8787", ("URL", "http://localhost:8787")),
        ("EMPTY:", ("EMPTY", "")),
    ],
)
def test_parse_var_option(text: str, expected: tuple[str, str]) -> None:
    assert parse_var_option(text) == expected


@pytest.mark.parametrize("text", ["KEY=VALUE", ":value", " KEY:v", ""])
def test_parse_var_option_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="KEY:VALUE"):
        parse_var_option(text)
