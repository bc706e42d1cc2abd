"""Object references: which class and which 64-hex-digit id a call is for.

The ids themselves are made in JavaScript (js/objects/namespace.js), because
``idFromName`` must answer at once: the first 16 bytes are an HMAC-SHA-256 of the name,
the last 16 an HMAC of the first, both keyed by the SHA-256 of ``<worker>-<class>``, as
workerd derives them, so a name maps to the same id under celld and ``wrangler dev``. The
host only checks the shape, since an id names a file under the state folder.
"""

from __future__ import annotations

import re
from typing import NamedTuple

ID_RE = re.compile(r"^[0-9a-f]{64}$")


class ObjectRef(NamedTuple):
    cls: str
    id: str

    @property
    def workflow(self) -> str:
        """The class, under the name the shared alarm queue logs a reference by."""
        return self.cls

    def __str__(self) -> str:
        return f"{self.cls}/{self.id}"


def check_id(value: object) -> str:
    if not isinstance(value, str) or not ID_RE.match(value):
        raise ValueError(f"not a Durable Object id (64 lowercase hex digits): {value!r}")
    return value
