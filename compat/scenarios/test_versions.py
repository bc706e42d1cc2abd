"""Version pinning (beyond Cloudflare, issue 13 item 9): an instance names the version of
the Worker it started on. The rest (a replay under other code) needs two versions of a
Worker, which one compat target cannot serve: tests/e2e/test_versions.py covers it."""

from __future__ import annotations

import re

from compat.differences import VERSION_PINNING, difference
from compat.scenario import Scenario

EXPLORER = "/cdn-cgi/local/explorer/api/workflows/script-workflow/instances"


@difference(wrangler=VERSION_PINNING)
def test_instance_details_name_the_version_it_started_on(sc: Scenario) -> None:
    i = sc.create([{"do": "a"}])
    sc.output(i)
    # celld's own details (wrangler's CLI gets wrangler dev's shape, without a version)
    details = sc.target.request("GET", f"{EXPLORER}/{i}", headers={"x-celld-details": "1"}).json()[
        "result"
    ]
    version = details.get("versionId")
    shown = bool(isinstance(version, str) and re.fullmatch(r"[0-9a-f]{16}", version))
    assert shown == sc.pick(celld=True, wrangler=False)
