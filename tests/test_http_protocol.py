"""The check of uvicorn's private hook celld's HTTP protocol relies on (see
celld/server/protocol.py): it passes on the uvicorn installed, and names what is missing
on one that lacks it (celld then runs without counting kept-alive connections idle)."""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from celld.server.protocol import uvicorn_hooks


def test_the_installed_uvicorn_has_the_hook() -> None:
    assert uvicorn_hooks() is None


class _NoHook:
    """A protocol as a uvicorn without `on_response_complete` would have it."""


class _HookWithArguments:
    def on_response_complete(self, cycle: object) -> None:
        del cycle


class _CycleWithoutCallback:
    def __init__(self, scope: object, transport: object) -> None:
        del scope, transport


def test_a_uvicorn_without_the_hook_is_named() -> None:
    assert "no on_response_complete" in str(uvicorn_hooks(_NoHook, RequestResponseCycle))
    changed = uvicorn_hooks(_HookWithArguments, RequestResponseCycle)
    assert "takes arguments" in str(changed)
    missing = uvicorn_hooks(HttpToolsProtocol, _CycleWithoutCallback)
    assert "no on_response callback" in str(missing)
