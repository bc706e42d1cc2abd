"""Which top-level Wrangler keys celld uses, ignores, or refuses.

A key that only matters when deploying (routes, account, observability...) means nothing to a
local runtime and is ignored, as ``wrangler dev`` ignores it. A key that gives the Worker
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
        "migrations",
        # How wrangler's esbuild compiles the code (celld.isolate.tsconfig)
        "tsconfig",
        "jsx_factory",
        "jsx_fragment",
        *OFFLINE_BINDINGS,
    }
)

# Deploy- or build-only settings with no meaning for a local run.
IGNORED: frozenset[str] = frozenset(
    {
        "$schema",
        "account_id",
        "workers_dev",
        "route",
        "routes",
        "preview_urls",
        "observability",
        "logpush",
        "upload_source_maps",
        "minify",
        "keep_names",
        "keep_vars",
        "send_metrics",
        "placement",
        "tail_consumers",
        "streaming_tail_consumers",
        "dev",
        "build",
        "no_bundle",
        "find_additional_modules",
        "base_dir",
        "preserve_file_names",
        "rules",
        # Named environments: like `wrangler dev` without --env, only the top level is used.
        "env",
        # Cron triggers: `wrangler dev` does not fire them on its own either.
        "triggers",
        "usage_model",
        "compliance_region",
        "first_party_worker",
        "dependencies_instrumentation",
    }
)

# Bindings celld does not provide, with wrangler's friendly names.
UNSUPPORTED_BINDINGS: Mapping[str, str] = {
    "queues": "Queue",
    "services": "Service",
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


def classify_top_level(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[Issue]]:
    """Split the top level into the supported keys and issues for refused or unknown ones."""
    supported: dict[str, Any] = {}
    issues: list[Issue] = []
    for key, value in raw.items():
        if key in SUPPORTED:
            supported[key] = value
        elif key in IGNORED:
            if key == "env" and not isinstance(value, dict):
                issues.append(Issue(key, "expected a table of named environments"))
        elif key in UNSUPPORTED_BINDINGS:
            issues.append(
                Issue(key, f"{UNSUPPORTED_BINDINGS[key]} bindings are not supported by celld yet")
            )
        elif key in UNSUPPORTED_FEATURES:
            issues.append(Issue(key, UNSUPPORTED_FEATURES[key]))
        else:
            issues.append(Issue(key, unknown_key_message(key, KNOWN)))
    return supported, issues
