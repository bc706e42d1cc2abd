"""Decisions as js/workflows/step.js reads them."""

from __future__ import annotations

from typing import Any

from celld.engine import Decision, Reject, Resolve, Run


def decision_wire(decision: Decision) -> dict[str, Any]:
    if isinstance(decision, Resolve):
        return {"resolve": decision.value}
    if isinstance(decision, Reject):
        return {"reject": decision.error.to_dict()}
    if isinstance(decision, Run):
        return {
            "run": {
                "attempt": decision.attempt,
                "context": decision.context,
                "timeout": decision.timeout_ms,
                "willRetry": decision.will_retry,
            }
        }
    raise TypeError(f"{decision!r} is not delivered to JS")
