"""Bindings that need Cloudflare's network (Workers AI, Vectorize, email sending...).

``wrangler dev`` starts a Worker that declares them (it proxies them to Cloudflare when logged
in). celld cannot reach those services, but refusing the whole Worker would stop every other
route from working, so the Worker starts with one warning naming them, and every call to such a
binding throws an Error saying it needs Cloudflare's network (js/bindings/offline.js).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from celld.project.bindings import OfflineBindingConfig

log = logging.getLogger("celld.bindings")


def offline_warning(bindings: Iterable[OfflineBindingConfig]) -> str | None:
    names = [f"env.{b.binding} ({b.service})" for b in bindings]
    if not names:
        return None
    return (
        "these bindings need Cloudflare's network and are not available under celld; "
        f"calls to them will throw: {', '.join(names)}"
    )


def warn_offline(bindings: Iterable[OfflineBindingConfig]) -> None:
    message = offline_warning(bindings)
    if message:
        log.warning("%s", message)
