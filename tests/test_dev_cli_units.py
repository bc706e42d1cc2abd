"""`celld run`'s settings resolution and log colour rules, without a server."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from celld.cli.devsettings import resolve
from celld.project.config import DevConfig
from celld.server.logformat import colour_wanted

NONE = dict(
    ip=None, port=None, local_protocol=None, upstream_protocol=None, host=None,
    https_key_path=None, https_cert_path=None,
)  # fmt: skip


def test_flags_then_dev_then_defaults() -> None:
    assert resolve(DevConfig(), **NONE).port == 8787
    assert resolve(DevConfig(), **NONE).ip == "127.0.0.1"
    config = DevConfig(port=9000, ip="0.0.0.0", local_protocol="https", host="a.test")
    settings = resolve(config, **NONE)
    assert (settings.port, settings.ip, settings.local_protocol, settings.host) == (
        9000, "0.0.0.0", "https", "a.test",
    )  # fmt: skip
    flagged = resolve(config, **{**NONE, "port": 0, "ip": "127.0.0.2", "host": "b.test"})
    assert (flagged.port, flagged.ip, flagged.host) == (0, "127.0.0.2", "b.test")
    assert not resolve(DevConfig(), **NONE).rewrites_url
    assert resolve(DevConfig(upstream_protocol="https"), **NONE).rewrites_url


def test_own_certificates_need_both_paths_and_https() -> None:
    with pytest.raises(ValueError, match="give both"):
        resolve(DevConfig(), **{**NONE, "https_key_path": Path("k.pem")})
    with pytest.raises(ValueError, match="--local-protocol https"):
        resolve(DevConfig(), **{**NONE, "https_key_path": Path("k"), "https_cert_path": Path("c")})


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "env", "wanted"),
    [
        (Tty(), {}, True),
        (io.StringIO(), {}, False),
        (io.StringIO(), {"FORCE_COLOR": "1"}, True),
        (Tty(), {"FORCE_COLOR": "0"}, True),  # "0" does not force either way
        (io.StringIO(), {"FORCE_COLOR": "0"}, False),
        (Tty(), {"NO_COLOR": ""}, False),
        (Tty(), {"TERM": "dumb"}, False),
        (io.StringIO(), {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),
    ],
)
def test_colours_follow_wranglers_switches(
    stream: io.StringIO, env: dict[str, str], wanted: bool
) -> None:
    assert colour_wanted(stream, env) is wanted
