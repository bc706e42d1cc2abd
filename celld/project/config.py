"""Load a Worker project's Wrangler configuration into the values celld runs it with.

Choices that differ from, or go beyond, wrangler:

* ``name`` is optional, as it is for ``wrangler dev``; without it the config folder's name is
  used, so logs and ``script_name`` checks still have a Worker name to refer to.
* ``--env NAME`` selects ``[env.NAME]`` with wrangler's inheritance rules
  (celld.project.environments); without it the top level runs and ``env`` is not read.
* A workflow whose ``script_name`` names another Worker is bound as ``wrangler dev`` binds it
  when that Worker is not running: instances are created, and each errors at its start with
  wrangler's message that the Worker was not found (js/workflows/step.js); celld warns at
  start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .assets_only import assets_only_issues
from .bindings import BindingsConfig, resolve_bindings
from .devvars import parse_var_option, read_local_vars
from .environments import select_environment
from .errors import ConfigError, Issue
from .files import CONFIG_FILE_NAMES, find_config, read_raw
from .keys import classify_top_level
from .schema import DEFAULT_WORKFLOW_STEPS, TopLevelModel, WorkflowModel, render_errors
from .unused import unused_keys

__all__ = [
    "CONFIG_FILE_NAMES",
    "BindingsConfig",
    "ConfigError",
    "DevConfig",
    "Issue",
    "ProjectConfig",
    "WorkflowConfig",
    "find_config",
    "load_config",
    "parse_var_option",
]


@dataclass(frozen=True)
class WorkflowConfig:
    """One ``[[workflows]]`` entry; ``step_limit`` is ``limits.steps`` (default 10,000);
    ``schedules`` its cron expressions (UTC), validated."""

    name: str
    binding: str
    class_name: str
    script_name: str | None
    step_limit: int
    schedules: tuple[str, ...] = ()
    #: the other Worker `script_name` names, which is not running here (instances fail)
    unconnected: str | None = None


@dataclass(frozen=True)
class DevConfig:
    """``[dev]``: the local server's settings as the config gives them (None: not set;
    `celld run`'s flags win over them, then wrangler's defaults apply)."""

    ip: str | None = None
    port: int | None = None
    local_protocol: str | None = None
    upstream_protocol: str | None = None
    host: str | None = None


@dataclass(frozen=True)
class ProjectConfig:
    """A validated project: paths are absolute, ``main`` exists (None: an assets-only
    Worker, celld.project.assets_only). ``warnings`` name the
    keys celld accepts but does not act on (`celld run` prints each once)."""

    path: Path
    root: Path
    name: str
    main: Path | None
    compatibility_date: str | None
    compatibility_flags: tuple[str, ...]
    vars: dict[str, Any]
    workflows: tuple[WorkflowConfig, ...]
    cpu_ms: int | None
    bindings: BindingsConfig = BindingsConfig()
    #: wrangler's `tsconfig` (absolute), `jsx_factory` and `jsx_fragment`: how the code is
    #: compiled (celld.isolate.tsconfig)
    tsconfig: Path | None = None
    jsx_factory: str | None = None
    jsx_fragment: str | None = None
    dev: DevConfig = DevConfig()
    warnings: tuple[Issue, ...] = ()
    #: the environment `--env` selected (None: the top level)
    env: str | None = None
    #: the files local variables were read from (.dev.vars, .env...), to name at start
    vars_files: tuple[Path, ...] = ()


def load_config(
    path: Path,
    *,
    var_overrides: Mapping[str, str] | None = None,
    env: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ProjectConfig:
    """Read, validate and resolve ``path``; raises :class:`ConfigError` listing every problem.

    `env` selects a named environment (`--env`). Variables are layered as in ``wrangler
    dev``: config ``vars``, then ``.dev.vars[.<env>]`` (or the ``.env`` files) beside the
    config file, then ``var_overrides`` (from ``--var KEY:VALUE``). `environ` stands for the
    process environment (CLOUDFLARE_INCLUDE_PROCESS_ENV...).
    """
    selected = select_environment(path, read_raw(path), env)
    supported, issues, warnings = classify_top_level(selected.raw)
    warnings = [*selected.warnings, *warnings]
    try:
        model = TopLevelModel.model_validate(supported)
    except ValidationError as exc:
        raise ConfigError(path, issues=[*issues, *render_errors(exc)]) from None
    if issues:
        raise ConfigError(path, issues=issues)

    root = path.resolve().parent
    name = model.name or root.name
    main = (root / model.main).resolve() if model.main is not None else None
    tsconfig = (root / model.tsconfig).resolve() if model.tsconfig else None
    issues = [
        *_check_main(model.main, main),
        *assets_only_issues(model),
        *_check_tsconfig(model.tsconfig, tsconfig),
        *_check_vars(model.vars),
        *_check_workflows(model, name),
    ]
    bindings, binding_issues = resolve_bindings(model, root, name)
    issues.extend(binding_issues)
    if issues:
        raise ConfigError(path, issues=issues)

    warnings.extend(unused_keys(model))
    dev = model.dev
    variables: dict[str, Any] = dict(model.vars)
    local, vars_files = read_local_vars(root, env, environ)
    variables.update(local)
    variables.update(var_overrides or {})
    return ProjectConfig(
        path=path.resolve(),
        root=root,
        name=name,
        main=main,
        compatibility_date=model.compatibility_date,
        compatibility_flags=tuple(model.compatibility_flags),
        vars=variables,
        workflows=tuple(
            WorkflowConfig(
                name=wf.name,
                binding=wf.binding,
                class_name=wf.class_name,
                script_name=wf.script_name,
                step_limit=_step_limit(wf),
                schedules=tuple(wf.schedules or ()),
                unconnected=wf.script_name if wf.script_name not in (None, name) else None,
            )
            for wf in model.workflows
        ),
        cpu_ms=model.limits.cpu_ms if model.limits else None,
        bindings=bindings,
        tsconfig=tsconfig,
        jsx_factory=model.jsx_factory,
        jsx_fragment=model.jsx_fragment,
        dev=DevConfig(
            ip=dev.ip,
            port=dev.port,
            local_protocol=dev.local_protocol,
            upstream_protocol=dev.upstream_protocol,
            host=dev.host,
        )
        if dev is not None
        else DevConfig(),
        warnings=tuple(warnings),
        env=env,
        vars_files=vars_files,
    )


def _step_limit(wf: WorkflowModel) -> int:
    if wf.limits is None or wf.limits.steps is None:
        return DEFAULT_WORKFLOW_STEPS
    return wf.limits.steps


def _check_main(given: str | None, resolved: Path | None) -> list[Issue]:
    if given is None or resolved is None:
        return []  # an assets-only Worker (celld.project.assets_only)
    if not given:
        return [Issue("main", "must name the Worker's entry module")]
    if not resolved.is_file():
        return [Issue("main", f"entry module not found: {given!r} (resolved to {resolved})")]
    return []


def _check_tsconfig(given: str | None, resolved: Path | None) -> list[Issue]:
    if given is not None and resolved is not None and not resolved.is_file():
        return [Issue("tsconfig", f"file not found: {given!r} (resolved to {resolved})")]
    return []


def _check_vars(variables: Mapping[str, Any]) -> list[Issue]:
    """Vars reach JavaScript as JSON, so TOML dates and non-finite floats cannot pass."""
    issues: list[Issue] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{where}[{index}]")
        elif isinstance(value, float) and not math.isfinite(value):
            issues.append(Issue(where, f"{value} is not a JSON number"))
        elif not isinstance(value, str | int | float | bool) and value is not None:
            issues.append(
                Issue(where, f"a {type(value).__name__} is not a JSON value; quote it as a string")
            )

    for key, value in variables.items():
        walk(value, f"vars.{key}")
    return issues


def _check_workflows(model: TopLevelModel, worker_name: str) -> list[Issue]:
    issues: list[Issue] = []
    bindings: dict[str, str] = {key: f"vars.{key}" for key in model.vars}
    names: dict[str, str] = {}
    for index, wf in enumerate(model.workflows):
        where = f"workflows[{index}]"
        if wf.binding in bindings:
            issues.append(
                Issue(
                    f"{where}.binding",
                    f"binding name {wf.binding!r} is already used by {bindings[wf.binding]}",
                )
            )
        else:
            bindings[wf.binding] = f"{where}.binding"
        if wf.name in names:
            issues.append(
                Issue(
                    f"{where}.name",
                    f"workflow name {wf.name!r} is already used by {names[wf.name]}",
                )
            )
        else:
            names[wf.name] = f"{where}.name"
    return issues
