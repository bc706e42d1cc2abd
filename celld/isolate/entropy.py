"""Seeding each isolate's random number generator with OS entropy.

JS cannot ask the host for bytes synchronously, so crypto.getRandomValues draws on a
ChaCha20 generator inside the isolate (js/web/crypto.js). Every isolate gets its own
first key here, before any user code runs, and fresh entropy from the host later.
"""

from __future__ import annotations

import base64
import secrets

from celld.isolate.runtime import Script

ENTROPY_BYTES = 32


def fresh_key() -> str:
    """32 bytes from the OS CSPRNG, base64."""
    return base64.b64encode(secrets.token_bytes(ENTROPY_BYTES)).decode("ascii")


def entropy_script() -> Script:
    """The script that gives one isolate its first DRBG key.

    Evaluate a fresh one in every isolate (never share it: isolates would share a
    random stream), either before the runtime scripts or right after them, and in
    both cases before any user code.
    """
    key = fresh_key()
    source = (
        '(function (k) { if (typeof __celld_entropy_seed === "function") __celld_entropy_seed(k);'
        ' else Object.defineProperty(globalThis, "__celld_entropy_initial",'
        f' {{ value: k, configurable: true }}); }})("{key}");'
    )
    return Script("celld-entropy.js", source)
