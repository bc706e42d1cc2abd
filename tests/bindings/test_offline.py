"""Bindings that need Cloudflare's network: present in env, every call throws clearly."""

from __future__ import annotations

import logging

import pytest

from celld.bindings.offline import warn_offline
from celld.project.bindings import OfflineBindingConfig
from tests.jsharness import JsError, run_js

OFFLINE = {
    "offline": [
        {"binding": "AI", "kind": "ai", "service": "Workers AI"},
        {"binding": "MAIL", "kind": "send_email", "service": "Email sending"},
    ]
}


def test_calls_throw_a_clear_error() -> None:
    with pytest.raises(JsError) as caught:
        run_js('await env.AI.run("@cf/meta/llama", {prompt: "hi"});', env=OFFLINE)
    assert caught.value.name == "Error"
    assert caught.value.message == (
        "env.AI.run(): Workers AI needs Cloudflare's network and is not available under celld"
    )
    with pytest.raises(JsError) as caught:
        run_js("await env.MAIL.send({});", env=OFFLINE)
    assert "env.MAIL.send(): Email sending needs Cloudflare's network" in caught.value.message


def test_the_binding_exists_and_is_not_a_thenable() -> None:
    assert run_js(
        "return [typeof env.AI, env.AI.then, JSON.stringify(env.AI), 'MAIL' in env];", env=OFFLINE
    ) == ["object", None, '{"binding":"AI","service":"Workers AI"}', True]


def test_one_warning_names_them(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="celld.bindings"):
        warn_offline([OfflineBindingConfig("ai", "AI"), OfflineBindingConfig("browser", "B")])
    [record] = caplog.records
    assert record.getMessage().endswith("env.AI (Workers AI), env.B (Browser Rendering)")
