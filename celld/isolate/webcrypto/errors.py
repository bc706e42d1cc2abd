"""The errors Web Crypto throws, as DOMException names the runtime rebuilds in JS.

workerd rejects every SubtleCrypto promise with a DOMException (or a TypeError for a
malformed argument); js/web/crypto.js turns a host error whose name is one of these into
a real DOMException, so `e instanceof DOMException` and `e.name` hold as they do there.
"""

from __future__ import annotations

from celld.isolate.host import HostError


def not_supported(message: str) -> HostError:
    """An algorithm, format or curve Web Crypto does not provide for this operation."""
    return HostError(message, "NotSupportedError")


def data_error(message: str) -> HostError:
    """Key data that cannot be a key of the algorithm asked for."""
    return HostError(message, "DataError")


def operation_error(message: str) -> HostError:
    """The operation itself failed (a tag that does not match, a bad padding)."""
    return HostError(message, "OperationError")


def invalid_access(message: str) -> HostError:
    """The key may not be used so: wrong usage, wrong algorithm, not extractable."""
    return HostError(message, "InvalidAccessError")


def syntax_error(message: str) -> HostError:
    """Usages that a key of this kind cannot have (Web Crypto's SyntaxError)."""
    return HostError(message, "SyntaxError")


def type_error(message: str) -> HostError:
    """A required member is missing or of the wrong type (WebIDL conversion)."""
    return HostError(message, "TypeError")
