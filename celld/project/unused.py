"""Keys inside supported sections that celld accepts but does not act on.

Each becomes a warning naming the key path (`celld run` prints it once at start), so a
setting that would change what `wrangler dev` does never goes unnoticed: preview and
remote resources (celld keeps every binding's data locally), R2 jurisdictions, the
subrequest limit, wrangler's inspector and containers, and a `build.watch_dir` with no
`build.command` to run.
"""

from __future__ import annotations

from .errors import Issue
from .schema import TopLevelModel

_REMOTE = (
    "remote bindings are not supported by celld: the binding keeps its data locally under "
    "the state folder"
)
_PREVIEW = "preview resources are for `wrangler dev --remote`; celld keeps this binding local"


def unused_keys(model: TopLevelModel) -> list[Issue]:
    """A warning for each key of `model` celld does not act on, in the config's order."""
    found: list[Issue] = []

    def note(path: str, message: str) -> None:
        found.append(Issue(path, message))

    for index, kv in enumerate(model.kv_namespaces):
        if kv.preview_id is not None:
            note(f"kv_namespaces[{index}].preview_id", _PREVIEW)
        if kv.remote:
            note(f"kv_namespaces[{index}].remote", _REMOTE)
    for index, db in enumerate(model.d1_databases):
        if db.preview_database_id is not None:
            note(f"d1_databases[{index}].preview_database_id", _PREVIEW)
        if db.database_internal_env is not None:
            note(f"d1_databases[{index}].database_internal_env", "is Cloudflare's own setting")
        if db.remote:
            note(f"d1_databases[{index}].remote", _REMOTE)
    for index, bucket in enumerate(model.r2_buckets):
        if bucket.preview_bucket_name is not None:
            note(f"r2_buckets[{index}].preview_bucket_name", _PREVIEW)
        if bucket.jurisdiction is not None:
            note(
                f"r2_buckets[{index}].jurisdiction",
                "jurisdictions are not supported by celld: objects are stored locally",
            )
        if bucket.remote:
            note(f"r2_buckets[{index}].remote", _REMOTE)
    for index, service in enumerate(model.services):
        if service.remote:
            note(f"services[{index}].remote", _REMOTE)
    if model.limits is not None and model.limits.subrequests is not None:
        note("limits.subrequests", "celld does not count or limit subrequests")
    dev = model.dev
    if dev is not None:
        for key in ("inspector_port", "inspector_ip"):
            if getattr(dev, key) is not None:
                note(f"dev.{key}", "celld has no JavaScript inspector (QuickJS runs the Worker)")
        if dev.enable_containers is not None:
            note("dev.enable_containers", "containers are not supported by celld")
        if dev.container_engine is not None:
            note("dev.container_engine", "containers are not supported by celld")
        if dev.generate_types is not None:
            note("dev.generate_types", "celld does not generate types; run `wrangler types`")
    build = model.build
    if build is not None and build.watch_dir is not None and not (build.command or "").strip():
        note("build.watch_dir", "there is no build.command to run again when files change")
    return found
