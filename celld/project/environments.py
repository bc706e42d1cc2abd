"""Named environments: the config `--env NAME` (or CLOUDFLARE_ENV) selects from `[env.NAME]`.

wrangler builds an environment's config key by key, from three kinds of keys:

* inheritable keys (`main`, `compatibility_date`, `migrations`, `build`...) take the
  environment's value, else the top level's; `name` without a value of its own becomes
  ``<top-level name>-<env>``, the Worker name wrangler deploys the environment as;
* non-inheritable keys (`vars` and every binding: `kv_namespaces`, `durable_objects`,
  `workflows`, `services`...) come from the environment only. One the top level sets and
  the environment does not is dropped, with wrangler's warning that it is not inherited;
* every other key (`dev`, `keep_vars`, `send_metrics`...) is read from the top level only;
  one inside an environment is not acted on, and said so.

An environment name the config does not define is an error listing the names it does;
a config with no `env` at all runs its top level under the environment's name, with a
warning, as wrangler does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError, Issue

#: The variable wrangler reads the environment name from when `--env` is not given.
ENV_VARIABLE = "CLOUDFLARE_ENV"

INHERITABLE: frozenset[str] = frozenset(
    {
        "name",
        "main",
        "account_id",
        "compatibility_date",
        "compatibility_flags",
        "jsx_factory",
        "jsx_fragment",
        "tsconfig",
        "rules",
        "find_additional_modules",
        "preserve_file_names",
        "base_dir",
        "route",
        "routes",
        "workers_dev",
        "preview_urls",
        "triggers",
        "assets",
        "limits",
        "placement",
        "build",
        "migrations",
        "exports",
        "logfwdr",
        "no_bundle",
        "minify",
        "keep_names",
        "first_party_worker",
        "logpush",
        "upload_source_maps",
        "observability",
        "access",
        "cache",
        "compliance_region",
        "python_modules",
        "previews",
    }
)

NOT_INHERITABLE: frozenset[str] = frozenset(
    {
        "vars",
        "secrets",
        "define",
        "durable_objects",
        "workflows",
        "kv_namespaces",
        "d1_databases",
        "r2_buckets",
        "services",
        "queues",
        "cloudchamber",
        "containers",
        "send_email",
        "connect",
        "vectorize",
        "ai_search_namespaces",
        "ai_search",
        "agent_memory",
        "hyperdrive",
        "analytics_engine_datasets",
        "dispatch_namespaces",
        "mtls_certificates",
        "tail_consumers",
        "streaming_tail_consumers",
        "unsafe",
        "browser",
        "analytics",
        "ai",
        "images",
        "stream",
        "media",
        "pipelines",
        "secrets_store_secrets",
        "artifacts",
        "unsafe_hello_world",
        "flagship",
        "worker_loaders",
        "ratelimits",
        "vpc_services",
        "vpc_networks",
        "version_metadata",
    }
)


@dataclass(frozen=True)
class Selected:
    """The raw config an environment gives (no `env` key left), and what to warn about."""

    raw: dict[str, Any]
    warnings: tuple[Issue, ...] = ()
    #: the environment's name, None for the top level
    env: str | None = None


def requested_env(option: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """`--env NAME`, else CLOUDFLARE_ENV, else None (the top level); "" counts as unset."""
    if option:
        return option
    value = (os.environ if environ is None else environ).get(ENV_VARIABLE, "")
    return value or None


def select_environment(path: Path, raw: Mapping[str, Any], env: str | None) -> Selected:
    """The raw config of environment `env` of the config at `path` (None: the top level).

    Raises :class:`ConfigError` when the config defines environments but not `env`.
    """
    top = {key: value for key, value in raw.items() if key != "env"}
    envs = raw.get("env")
    if envs is not None and not isinstance(envs, dict):
        raise ConfigError(path, issues=[Issue("env", "expected a table of named environments")])
    if env is None:
        return Selected(top)
    if not envs:
        message = (
            f'no environment named "{env}" in the config: [env.{env}] is not defined, so '
            f"the top level runs as Worker {_suffixed(top.get('name'), env)!r}"
        )
        named = dict(top)
        if isinstance(top.get("name"), str):
            named["name"] = _suffixed(top["name"], env)
        return Selected(named, (Issue("env", message),), env)
    if env not in envs:
        names = ", ".join(f'"{name}"' for name in envs)
        raise ConfigError(
            path,
            message=f'no environment named "{env}" (--env {env}): the config defines {names}; '
            f"add an [env.{env}] section or choose one of these",
        )
    section = envs[env]
    if not isinstance(section, dict):
        raise ConfigError(path, issues=[Issue(f"env.{env}", "expected a table")])
    return _resolve(top, section, env)


def _suffixed(name: Any, env: str) -> str | None:
    return f"{name}-{env}" if isinstance(name, str) and name else None


def _resolve(top: dict[str, Any], section: Mapping[str, Any], env: str) -> Selected:
    warnings: list[Issue] = []
    resolved: dict[str, Any] = {}
    for key, value in top.items():
        if key in NOT_INHERITABLE:
            if key not in section:
                warnings.append(
                    Issue(
                        key,
                        f'exists at the top level, but not on "env.{env}": it is not inherited '
                        f'by environments, so env.{env} has none; add "{key}" to "env.{env}"',
                    )
                )
            continue
        resolved[key] = value
    if "name" not in section and isinstance(top.get("name"), str):
        resolved["name"] = _suffixed(top["name"], env)
    for key, value in section.items():
        if key in INHERITABLE or key in NOT_INHERITABLE:
            resolved[key] = value
        else:
            warnings.append(
                Issue(
                    f"env.{env}.{key}",
                    "is read from the top level only, not from an environment; celld does "
                    "not act on it here",
                )
            )
    return Selected(resolved, tuple(warnings), env)
