"""The table of host operations an isolate can request."""

from __future__ import annotations

from celld.isolate.coreops import core_ops
from celld.isolate.host import OpHandler
from celld.isolate.nodeops import node_ops
from celld.isolate.streams import stream_ops
from celld.isolate.webcrypto import crypto_ops
from celld.isolate.webops import web_ops


def isolate_ops() -> dict[str, OpHandler]:
    """Every operation available to any isolate (Worker or workflow)."""
    ops = core_ops()
    ops.update(web_ops())
    ops.update(stream_ops())
    ops.update(crypto_ops())
    ops.update(node_ops())
    return ops
