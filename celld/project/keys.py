"""Which top-level Wrangler keys celld uses, runs without, or refuses.

A key that only matters when deploying (routes, account, observability...) means nothing to a
local runtime; celld runs without it, as ``wrangler dev`` does, and says so once at start
(a warning naming the key), so nothing in a config is ignored silently. A key that gives the Worker
something at run time (a binding) or changes how its code behaves must never be ignored
silently: the Worker would start and then fail far from the cause, so it is refused with a
message that names it. Anything else is most likely a typo and gets a did-you-mean hint.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import Issue

# Bindings that only work on Cloudflare's network. As under `wrangler dev`, they do not stop the
# Worker from starting: celld warns once at start, and each call throws an error saying so
# (see celld/bindings/offline.py). Values are the names used in that warning.
OFFLINE_BINDINGS: Mapping[str, str] = {
    "ai": "Workers AI",
    "vectorize": "Vectorize",
    "browser": "Browser Rendering",
    "analytics_engine_datasets": "Analytics Engine",
    "send_email": "Email sending",
}

SUPPORTED: frozenset[str] = frozenset(
    {
        "name",
        "main",
        "compatibility_date",
        "compatibility_flags",
        "vars",
        "workflows",
        "limits",
        "kv_namespaces",
        "d1_databases",
        "r2_buckets",
        "assets",
        "durable_objects",
        "services",
        "migrations",
        "queues",
        # How wrangler's esbuild compiles the code (celld.isolate.tsconfig)
        "tsconfig",
        "jsx_factory",
        "jsx_fragment",
        "dev",
        "build",
        *OFFLINE_BINDINGS,
    }
)

_DEPLOY = "is used when deploying to Cloudflare; celld run does not act on it"
_BUNDLING = (
    "configures wrangler's bundler; celld loads `main` and its imports with its own loader "
    "and does not act on it"
)

# Settings celld runs without, each with why: `celld run` warns once per key present, so
# nothing in a config is ignored silently. Deploy-only keys mean nothing to a local
# runtime (as under `wrangler dev`); bundler settings have no counterpart in celld's
# loader.
NOT_ACTED_ON: Mapping[str, str] = {
    "account_id": _DEPLOY,
    "workers_dev": _DEPLOY,
    "route": _DEPLOY,
    "routes": _DEPLOY,
    "preview_urls": _DEPLOY,
    "observability": _DEPLOY,
    "logpush": _DEPLOY,
    "upload_source_maps": _DEPLOY,
    "minify": _DEPLOY,
    "keep_names": _DEPLOY,
    "keep_vars": _DEPLOY,
    "send_metrics": "is wrangler's telemetry setting; celld sends no metrics anywhere",
    "placement": _DEPLOY,
    "tail_consumers": _DEPLOY,
    "streaming_tail_consumers": _DEPLOY,
    "usage_model": _DEPLOY,
    "compliance_region": _DEPLOY,
    "first_party_worker": _DEPLOY,
    "dependencies_instrumentation": _DEPLOY,
    "no_bundle": _BUNDLING,
    "find_additional_modules": _BUNDLING,
    "base_dir": _BUNDLING,
    "preserve_file_names": _BUNDLING,
    "rules": _BUNDLING,
    "triggers": "cron triggers do not fire on their own, as under `wrangler dev`; fire the "
    "Worker's scheduled() with `curl http://HOST:PORT/cdn-cgi/handler/scheduled?cron=...` "
    "(or /__scheduled with `celld run --test-scheduled`)",
}

# Keys that are no setting at all: never warned about. Besides an editor's JSON schema
# reference and named environments (`--env NAME` selects one: celld.project.environments),
# the bookkeeping wrangler writes into a config it generates for a build (the one
# `.wrangler/deploy/config.json` redirects to: celld/project/files.py).
GENERATED_MARKS: frozenset[str] = frozenset(
    {"configPath", "userConfigPath", "topLevelName", "definedEnvironments"}
)
SILENT: frozenset[str] = frozenset({"$schema", "env"}) | GENERATED_MARKS

IGNORED: frozenset[str] = frozenset(NOT_ACTED_ON) | SILENT

# Bindings celld does not provide, with wrangler's friendly names.
UNSUPPORTED_BINDINGS: Mapping[str, str] = {
    "ai_search": "AI Search",
    "ai_search_namespaces": "AI Search Namespace",
    "websearch": "Web Search",
    "agent_memory": "Agent Memory",
    "hyperdrive": "Hyperdrive",
    "mtls_certificates": "mTLS Certificate",
    "dispatch_namespaces": "Dispatch Namespace",
    "site": "Workers Sites",
    "unsafe": "Unsafe",
    "containers": "Container",
    "secrets_store_secrets": "Secrets Store Secret",
    "version_metadata": "Worker Version Metadata",
    "images": "Images",
    "stream": "Stream",
    "media": "Media",
    "pipelines": "Pipeline",
    "ratelimits": "Rate Limit",
    "worker_loaders": "Worker Loader",
    "vpc_services": "VPC Service",
    "vpc_networks": "VPC Network",
    "artifacts": "Artifacts",
    "flagship": "Flagship",
    "logfwdr": "logfwdr",
    "unsafe_hello_world": "Hello World",
    "wasm_modules": "Wasm Module",
    "text_blobs": "Text Blob",
    "data_blobs": "Data Blob",
}

# Real Wrangler settings that change what the Worker is or how its code runs.
UNSUPPORTED_FEATURES: Mapping[str, str] = {
    "define": "build-time `define` substitutions are not supported by celld yet",
    "alias": "module `alias` rewriting is not supported by celld yet",
    "exports": "the `exports` form of workflow declarations is not supported by celld yet; "
    "declare workflows with [[workflows]]",
    "node_compat": "`node_compat` was removed from wrangler; "
    'use compatibility_flags = ["nodejs_compat"]',
    "legacy_env": "`legacy_env` is no longer supported by wrangler; remove it",
    "pages_build_output_dir": "Cloudflare Pages projects are not supported by celld",
    "python_modules": "Python Workers are not supported by celld",
    "cloudchamber": "containers (`cloudchamber`) are not supported by celld yet",
    "secrets": "declared `secrets` are not supported by celld yet; put local values in .dev.vars",
    "addresses": "`addresses` is not supported by celld yet",
}

KNOWN: frozenset[str] = (
    SUPPORTED | IGNORED | frozenset(UNSUPPORTED_BINDINGS) | frozenset(UNSUPPORTED_FEATURES)
)


def did_you_mean(key: str, candidates: Iterable[str]) -> str:
    """A ``(did you mean "x"?)`` suffix, or "" when nothing is close."""
    close = difflib.get_close_matches(key, sorted(candidates), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def unknown_key_message(key: str, candidates: Iterable[str]) -> str:
    return "unknown key" + did_you_mean(key, candidates)


def classify_top_level(
    raw: Mapping[str, Any],
) -> tuple[dict[str, Any], list[Issue], list[Issue]]:
    """Split the top level into the supported keys, issues for refused or unknown ones,
    and warnings for the keys celld accepts but does not act on."""
    supported: dict[str, Any] = {}
    issues: list[Issue] = []
    warnings: list[Issue] = []
    # wrangler writes every binding kind into a config it generates, most of them empty
    generated = "topLevelName" in raw and "configPath" in raw
    for key, value in raw.items():
        if generated and _generated_default(key, value, raw):
            continue
        if key in SUPPORTED:
            supported[key] = value
        elif key in IGNORED:
            if key == "triggers" and not _has_crons(value):
                pass  # an empty [triggers] asks for nothing
            elif key in NOT_ACTED_ON:
                warnings.append(Issue(key, NOT_ACTED_ON[key]))
        elif key in UNSUPPORTED_BINDINGS:
            issues.append(
                Issue(key, f"{UNSUPPORTED_BINDINGS[key]} bindings are not supported by celld yet")
            )
        elif key in UNSUPPORTED_FEATURES:
            issues.append(Issue(key, UNSUPPORTED_FEATURES[key]))
        else:
            issues.append(Issue(key, unknown_key_message(key, KNOWN)))
    return supported, issues, warnings


def _generated_default(key: str, value: Any, raw: Mapping[str, Any]) -> bool:
    """A refused key of a generated config that asks for nothing: an empty binding list or
    table (`"queues": {"producers": [], "consumers": []}`), or the Python module rules of a
    Worker whose `main` is not Python."""
    if key not in UNSUPPORTED_BINDINGS and key not in UNSUPPORTED_FEATURES:
        return False
    if key == "python_modules":
        return not str(raw.get("main", "")).endswith(".py")
    return declares_nothing(value)


def declares_nothing(value: Any) -> bool:
    """An empty list or table, or one of only empty ones."""
    if isinstance(value, list):
        return not value
    if isinstance(value, dict):
        return all(declares_nothing(inner) for inner in value.values())
    return False


def _has_crons(value: Any) -> bool:
    return not isinstance(value, dict) or bool(value.get("crons"))
