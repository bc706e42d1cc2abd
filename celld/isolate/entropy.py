"""OS entropy for each isolate's random pool (js/web/random.js).

JS cannot ask the host for bytes synchronously, so crypto.getRandomValues draws on a pool
of OS random bytes inside the isolate. Every isolate gets its first bytes here, before
any user code runs, and more through `entropy` requests once it has drawn most of them.
The first SEED_BYTES of every delivery seed (or reseed) the CTR_DRBG that serves a draw
larger than what the pool holds.
"""

from __future__ import annotations

import base64
import os

from celld.isolate.runtime import Script

#: The CTR_DRBG's seed (AES-256 key and block), at the head of every delivery.
SEED_BYTES = 48
#: The pool an isolate starts with: 64 UUIDs' worth before it asks for more.
INITIAL_POOL_BYTES = 2048
#: The most one `entropy` request may ask for.
MAX_DELIVERY_BYTES = 65536


def fresh_bytes(count: int) -> str:
    """`count` bytes from the OS CSPRNG (os.urandom), base64."""
    return base64.b64encode(os.urandom(count)).decode("ascii")


def entropy_script() -> Script:
    """The script that gives one isolate its first random bytes.

    Evaluate a fresh one in every isolate (never share it: isolates would share a
    random stream), either before the runtime scripts or right after them, and in
    both cases before any user code.
    """
    initial = fresh_bytes(SEED_BYTES + INITIAL_POOL_BYTES)
    source = (
        '(function (k) { if (typeof __celld_entropy_seed === "function") __celld_entropy_seed(k);'
        ' else Object.defineProperty(globalThis, "__celld_entropy_initial",'
        f' {{ value: k, configurable: true }}); }})("{initial}");'
    )
    return Script("celld-entropy.js", source)
