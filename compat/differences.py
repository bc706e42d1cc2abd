"""Declared differences: where celld follows production on purpose and `wrangler dev` does not.

A scenario that expects the targets to differ carries ``@difference(wrangler=REASON)``; its
assertions then pick each target's own value with ``scenario.pick(celld=..., wrangler=...)``,
which refuses to run when the values differ and no difference is declared. The reasons below
are the rows of docs/semantics.md (celld's rules where its sources differ) and what the
compatibility suite found of `wrangler dev`'s own, phrased so the report explains itself.
"""

from __future__ import annotations

import pytest

WAITING = (
    "`waiting` status: production reports it while an instance sleeps, waits for an event or "
    "waits to retry (docs/semantics.md); wrangler dev's engine never sets it and says `running`"
)
RETRY_DELAY = (
    "default retry delay: production documents 10 s (celld follows it: docs/semantics.md); "
    "wrangler dev uses 1 s"
)
ERROR_STRINGS = (
    "binding error strings: celld uses production's `(instance.<code>) ...` messages (as "
    "production answers them); wrangler dev words them differently"
)
EVENT_TYPE = (
    "sendEvent type validation: production rejects types outside ^[a-zA-Z0-9_][a-zA-Z0-9-_]*$ "
    "or longer than 100 chars (workflow.invalid_event_type); wrangler dev accepts and ignores them"
)
NON_RETRYABLE = (
    "NonRetryableError in status().error: since compat date 2026-05-14 production keeps "
    "{name: NonRetryableError, message} (flag workflows_preserve_non_retryable_error_message); "
    "wrangler dev still reports a WorkflowFatalError with a generic message"
)
OUTPUT_NULL = (
    "status().output before completion: absent in production's types (celld); wrangler dev "
    "sets it to null"
)
PAYLOAD_LIMIT = (
    "1 MiB limit on params and event payloads: production enforces it (Cloudflare's "
    "documented limits); wrangler dev does not check"
)
STEP_RESULT_LIMIT = (
    "1 MiB limit on step results: production documents it (Cloudflare's documented limits) "
    "and celld fails the attempt; wrangler dev accepts a result of 1 MiB and more"
)
SYMBOL_RESULT = (
    "a Symbol returned by a step: production documents that it cannot be serialized and the "
    "instance throws (celld errors it at once); wrangler dev never settles the step and the "
    "instance stays running"
)
SCHEDULES_LOCAL = (
    "cron `schedules`: production starts an instance at every tick (id `<cron>-<tick ms>`, "
    "`event.schedule`), and so does celld; wrangler dev accepts the key but fires nothing"
)
VERSION_PINNING = (
    "version pinning (beyond Cloudflare): celld records the hash of the Worker bundle each "
    "instance started on and shows it as `versionId`; wrangler dev's explorer shows no version"
)
SEND_EVENT_FINISHED = (
    "sendEvent to a finished instance: production documents that it throws once the instance "
    "is not running or errored, and celld refuses it for complete, errored and terminated "
    "instances (`(instance.cannot_send_event) ...`); wrangler dev accepts the event"
)
WAIT_TIMEOUT_RANGE = (
    "waitForEvent timeout range 1 s to 365 days: production documents it (docs/semantics.md) "
    "and celld refuses a shorter timeout; wrangler dev accepts 500 ms"
)


ROLLBACK_STATUS = (
    "status().rollback: production reports {outcome, error} once rollback handlers ran "
    "(changelog 2026-06-05, workerd's InstanceStatus type); wrangler dev runs the handlers "
    "but its status() has no rollback field"
)

STREAM_RESULT_LIMIT = (
    "ReadableStream step results over 1 MiB: production allows a stream beyond the 1 MiB "
    "result limit (it counts toward instance storage), and so does wrangler dev; celld keeps "
    "the 1 MiB step output limit for streams too (celld/engine/DECISIONS.md) and fails the "
    "attempt as too large"
)


def difference(*, wrangler: str) -> pytest.MarkDecorator:
    """Declare that `wrangler dev` differs from celld in this scenario, and why."""
    return pytest.mark.difference(wrangler=wrangler)


# -- storage bindings (KV, D1, R2) ---------------------------------------------------------

JS_ENGINE_MESSAGES = (
    "JavaScript engine wording: errors JS itself throws (JSON.parse of a non-JSON value) carry "
    "QuickJS's message under celld and V8's under wrangler dev; the error class is the same"
)
SQLITE_ERROR_OFFSET = (
    "D1 syntax errors: workerd's newer SQLite adds `at offset N` to syntax errors; celld reports "
    "the message of the SQLite that Python links (3.40 here), without the offset"
)
D1_EXEC_ERROR_LINE = (
    "D1 exec() errors: celld names the line that failed (`Error in line 3: <that line>`), as "
    "production does; wrangler dev always reports line 1 and the first line's text"
)
R2_STORAGE_CLASS = (
    "R2 storageClass: production reports `Standard` for objects stored without a class (celld); "
    "wrangler dev reports an empty string"
)
R2_STREAM_LENGTH = (
    "R2 put() of a ReadableStream of unknown length: workerd refuses it (it needs a known "
    "length); celld stores it as it streams in"
)
D1_ROWS_READ = (
    "D1 meta.rows_read: SQLite does not report to Python how many rows a statement scanned, so "
    "celld counts the rows a query returns; aggregates over a table (count(*)) read more rows "
    "under wrangler dev"
)


# -- WebSockets and Queues ---------------------------------------------------------------------

QUEUE_MESSAGE_TOO_LARGE = (
    "a queue message over 128,000 bytes: production refuses it with `Queue send failed: message "
    "length of N bytes exceeds limit of 128000 (10204)` (Cloudflare's documented limits), and "
    "so does celld; wrangler dev's local queue broker fails the send with `Unknown Internal "
    "Error (15000)`"
)
