"""Where `celld run` listens and what URL the Worker sees: its flags, then ``[dev]``, then
wrangler's defaults (celld listens on 127.0.0.1 rather than wrangler's ``localhost``).

``host`` and ``upstream_protocol`` change the request the Worker sees, as under `wrangler
dev`: with ``host`` set, ``request.url`` names that host (and the ``Host`` header says
it); with ``upstream_protocol`` set, its scheme is that protocol. With neither, the
Worker sees the URL it was called with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from celld.project.config import DevConfig

DEFAULT_PORT = 8787
DEFAULT_IP = "127.0.0.1"


@dataclass(frozen=True)
class DevSettings:
    ip: str
    port: int
    local_protocol: str  # "http" or "https"
    #: what the Worker's request.url says instead of the URL it was called with
    upstream_protocol: str | None
    host: str | None
    https_key_path: Path | None = None
    https_cert_path: Path | None = None

    @property
    def rewrites_url(self) -> bool:
        return self.upstream_protocol is not None or self.host is not None


def resolve(
    config: DevConfig,
    *,
    ip: str | None,
    port: int | None,
    local_protocol: str | None,
    upstream_protocol: str | None,
    host: str | None,
    https_key_path: Path | None,
    https_cert_path: Path | None,
) -> DevSettings:
    """Each setting from the flag given, else ``[dev]``, else the default."""
    if (https_key_path is None) != (https_cert_path is None):
        raise ValueError("--https-key-path and --https-cert-path go together: give both")
    protocol = local_protocol or config.local_protocol or "http"
    if https_key_path is not None and protocol != "https":
        raise ValueError("--https-key-path and --https-cert-path need --local-protocol https")
    return DevSettings(
        ip=ip or config.ip or DEFAULT_IP,
        port=next(p for p in (port, config.port, DEFAULT_PORT) if p is not None),
        local_protocol=protocol,
        upstream_protocol=upstream_protocol or config.upstream_protocol,
        host=host or config.host,
        https_key_path=https_key_path,
        https_cert_path=https_cert_path,
    )
