"""A project without `main`: an assets-only Worker, as wrangler dev serves it.

Its requests are answered by the assets alone: a file, a redirect, the `not_found_handling`
page (a single-page app's index.html for every unmatched request, navigation or not), or an
empty 404. There is no Worker script, so what only a script can use is refused with
wrangler's own words: an assets binding, `run_worker_first`, and the project's own
Workflow or Durable Object classes; with neither `main` nor assets there is nothing to run.
"""

from __future__ import annotations

from .errors import Issue
from .schema import TopLevelModel

NOTHING_TO_RUN = "Missing entry-point to Worker script or to assets directory"
ASSETS_BINDING = (
    "Cannot use assets with a binding in an assets-only Worker.\n"
    "Please remove the asset binding from your configuration file, or provide a Worker "
    "script in your configuration file (`main`)."
)
RUN_WORKER_FIRST = (
    "Cannot set run_worker_first without a Worker script.\n"
    "Please remove run_worker_first from your configuration file, or provide a Worker "
    "script in your configuration file (`main`)."
)


def assets_only_issues(model: TopLevelModel) -> list[Issue]:
    """What a project without `main` may not have (nothing when it has `main`)."""
    if model.main is not None:
        return []
    assets = model.assets
    if assets is None:
        return [Issue("main", NOTHING_TO_RUN)]
    issues = []
    if assets.binding is not None:
        issues.append(Issue("assets.binding", ASSETS_BINDING))
    if assets.run_worker_first:
        issues.append(Issue("assets.run_worker_first", RUN_WORKER_FIRST))
    own = [
        *(
            f"Workflow class {w.class_name}"
            for w in model.workflows
            if w.script_name in (None, model.name)
        ),
        *(
            f"Durable Object class {b.class_name}"
            for b in (model.durable_objects.bindings if model.durable_objects else ())
            if b.script_name in (None, model.name)
        ),
    ]
    if own:
        issues.append(
            Issue("main", f"{', '.join(own)} needs a Worker script (`main`) that exports it")
        )
    return issues
