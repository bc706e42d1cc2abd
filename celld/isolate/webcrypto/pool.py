"""The small thread pool that slow host work runs on: crypto (RSA key generation, PBKDF2 of
many iterations) and Brotli. Both let the GIL go while they compute, so the event loop
keeps running; the pool is made when first needed (a Worker that never uses them costs no
threads). It is its own module so that Brotli and the lazy loading of the crypto modules
can use it without importing `cryptography`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

_executor: ThreadPoolExecutor | None = None


def pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="celld-crypto")
    return _executor
