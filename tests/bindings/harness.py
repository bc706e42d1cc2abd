"""Real bindings over real SQLite files in a temp folder (or a real PostgreSQL database for
KV and R2), driven from a real isolate."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from celld.bindings.registry import Bindings
from celld.cells.clock import ManualClock
from celld.project.bindings import (
    BindingsConfig,
    D1DatabaseConfig,
    KvNamespaceConfig,
    R2BucketConfig,
)
from tests.jsharness import run_js_async

START_MS = 1_800_000_000_000


def storage_config(root: Path) -> BindingsConfig:
    return BindingsConfig(
        kv=(KvNamespaceConfig("KV", "kv-id"),),
        d1=(
            D1DatabaseConfig(
                binding="DB",
                database_name="db",
                id="db-id",
                migrations_dir=root / "migrations",
                migrations_table="d1_migrations",
            ),
        ),
        r2=(R2BucketConfig("BUCKET", "bucket"),),
    )


class Harness:
    """One project's bindings; `run(js)` runs a snippet with them as `env`."""

    def __init__(
        self, state: Path, config: BindingsConfig | None = None, *, shared: str | None = None
    ) -> None:
        self.state = state
        #: the DSN of the shared store KV and R2 live in (None: files under `state`)
        self.shared = shared
        self.clock = ManualClock(START_MS)
        self.config = config or storage_config(state.parent)

    async def run(self, body: str, **kwargs: Any) -> Any:
        bindings = Bindings(self.config, self.state, self.clock.now, shared=self.shared)
        await bindings.open()
        try:
            return await run_js_async(
                body, ops=bindings.ops(), env=bindings.env_message(), **kwargs
            )
        finally:
            await bindings.close()

    def __call__(self, body: str, **kwargs: Any) -> Any:
        return asyncio.run(self.run(body, **kwargs))
