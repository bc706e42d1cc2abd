"""Mapping between the engine's records and the SQL stores' rows.

Serialized values that may hold binary data (step values, event payloads, params) go
through an `encode` function (celld/engine/binary.py): `store_form` for SQLite, whose
columns take text or a BLOB, `store_bytes` for PostgreSQL's BYTEA columns; `load_form`
reads either back. The output stays text (its base64 form)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from celld.engine import rollback as rb
from celld.engine.binary import join_texts, load_form, store_form, text_of
from celld.engine.decisions import ERROR_TAG, UNDEFINED_ENTRY, JournalText, journal_member
from celld.engine.errors import ErrorInfo
from celld.engine.lifecycle import Status
from celld.engine.machine import Machine
from celld.engine.state import (
    DO_DONE,
    DO_FAILED,
    FINISHED_STATES,
    STEP_TYPES,
    WAIT_RECEIVED,
    WAIT_TIMED_OUT,
    EventRecord,
    InstanceState,
    StepKey,
    StepRecord,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (
    workflow TEXT NOT NULL,
    id TEXT NOT NULL,
    status TEXT NOT NULL,
    params TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    output TEXT,
    error TEXT,
    started_at INTEGER,
    finished_at INTEGER,
    paused_at INTEGER,
    success_retention_ms INTEGER NOT NULL,
    error_retention_ms INTEGER NOT NULL,
    expires_at INTEGER,
    generation INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    next_event_seq INTEGER NOT NULL,
    next_wake INTEGER,
    runnable INTEGER NOT NULL,
    version TEXT,
    PRIMARY KEY (workflow, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS instances_by_wake_key ON instances (next_wake, workflow, id)
    WHERE next_wake IS NOT NULL;
CREATE INDEX IF NOT EXISTS instances_by_expiry ON instances (expires_at)
    WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS instances_runnable ON instances (runnable) WHERE runnable = 1;
CREATE TABLE IF NOT EXISTS steps (
    workflow TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    type TEXT NOT NULL,
    name TEXT NOT NULL,
    count INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    config TEXT,
    value TEXT,
    error TEXT,
    wake_at INTEGER,
    event_type TEXT,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    PRIMARY KEY (workflow, instance_id, type, name, count)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    workflow TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    timestamp INTEGER NOT NULL,
    consumed_by TEXT,
    PRIMARY KEY (workflow, instance_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS celld_probe (id INTEGER PRIMARY KEY, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS instance_log (
    event_id INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    timestamp INTEGER NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS instance_log_by_instance
    ON instance_log (workflow, instance_id, event_id);
CREATE TABLE IF NOT EXISTS schedule_ticks (
    workflow TEXT NOT NULL,
    expression TEXT NOT NULL,
    tick INTEGER NOT NULL,
    PRIMARY KEY (workflow, expression)
) WITHOUT ROWID;
"""

#: How a store writes a serialized value (see the module's docstring).
Encode = Callable[[str | None], str | bytes | None]

#: Columns added after the first release, with their type: added to older state files.
ADDED_INSTANCE_COLUMNS = {"version": "TEXT"}

INSTANCE_COLUMNS = (
    "workflow", "id", "status", "params", "created_at", "output", "error", "started_at",
    "finished_at", "paused_at", "success_retention_ms", "error_retention_ms", "expires_at",
    "generation", "next_seq", "next_event_seq", "next_wake", "runnable", "version",
)  # fmt: skip
STEP_COLUMNS = (
    "workflow", "instance_id", "type", "name", "count", "seq", "state", "attempts", "config",
    "value", "error", "wake_at", "event_type", "started_at", "finished_at",
)  # fmt: skip
EVENT_COLUMNS = (
    "workflow", "instance_id", "seq", "type", "payload", "timestamp", "consumed_by",
)  # fmt: skip


def _upsert(table: str, columns: tuple[str, ...]) -> str:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({marks})"


UPSERT_INSTANCE = _upsert("instances", INSTANCE_COLUMNS)
INSERT_INSTANCE = UPSERT_INSTANCE.replace("INSERT OR REPLACE", "INSERT")
UPSERT_STEP = _upsert("steps", STEP_COLUMNS)
UPSERT_EVENT = _upsert("events", EVENT_COLUMNS)


def _error_text(error: ErrorInfo | None) -> str | None:
    return error.to_json() if error is not None else None


def _error_value(text: str | None) -> ErrorInfo | None:
    return ErrorInfo.from_json(text) if text else None


def instance_row(
    state: InstanceState, next_wake: int | None, runnable: bool, encode: Encode = store_form
) -> tuple[Any, ...]:
    return (
        state.workflow, state.id, state.status.value, encode(state.params), state.created_at,
        text_of(state.output), _error_text(state.error), state.started_at, state.finished_at,
        state.paused_at, state.success_retention_ms, state.error_retention_ms,
        state.expires_at, state.generation, state.next_seq, state.next_event_seq,
        next_wake, int(runnable), state.version,
    )  # fmt: skip


def instance_from_row(row: Any) -> InstanceState:
    return InstanceState(
        workflow=row["workflow"],
        id=row["id"],
        params=load_form(row["params"]),
        created_at=row["created_at"],
        status=Status(row["status"]),
        output=row["output"],
        error=_error_value(row["error"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        paused_at=row["paused_at"],
        success_retention_ms=row["success_retention_ms"],
        error_retention_ms=row["error_retention_ms"],
        expires_at=row["expires_at"],
        generation=row["generation"],
        next_seq=row["next_seq"],
        next_event_seq=row["next_event_seq"],
        version=row["version"],
    )


def step_row(
    workflow: str, instance_id: str, step: StepRecord, encode: Encode = store_form
) -> tuple[Any, ...]:
    return (
        workflow, instance_id, step.type, step.name, step.count, step.seq, step.state,
        step.attempts, step.config, encode(step.value), _error_text(step.error), step.wake_at,
        step.event_type, step.started_at, step.finished_at,
    )  # fmt: skip


def step_from_row(row: Any) -> StepRecord:
    return StepRecord(
        type=row["type"],
        name=row["name"],
        count=row["count"],
        seq=row["seq"],
        state=row["state"],
        attempts=row["attempts"],
        config=row["config"],
        value=load_form(row["value"]),
        error=_error_value(row["error"]),
        wake_at=row["wake_at"],
        event_type=row["event_type"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def event_row(
    workflow: str, instance_id: str, event: EventRecord, encode: Encode = store_form
) -> tuple[Any, ...]:
    consumed = str(event.consumed_by) if event.consumed_by is not None else None
    return (
        workflow, instance_id, event.seq, event.type, encode(event.payload), event.timestamp,
        consumed,
    )  # fmt: skip


def event_from_row(row: Any) -> EventRecord:
    consumed = row["consumed_by"]
    return EventRecord(
        seq=row["seq"],
        type=row["type"],
        payload=load_form(row["payload"]),
        timestamp=row["timestamp"],
        consumed_by=StepKey.parse(consumed) if consumed else None,
    )


# -- light loads and journals (what a run needs of a long history) -------------------------


def _sql_list(values: Any) -> str:
    return ", ".join(f"'{v}'" for v in sorted(values))


#: Steps a light load reads: the unfinished ones and the rollback phase (kept in memory
#: whatever its state); finished rows stay on disk (celld.engine.Machine.forget_finished).
UNFINISHED_STEPS_WHERE = f"(state NOT IN ({_sql_list(FINISHED_STATES)}) OR type = '{rb.PHASE}')"

#: One journal member per finished step, as JSON text built by the database (no row
#: reaches Python): the same text as `journal_member` of `Machine.journal_entry(row)`.
#: Values and errors are stored as JSON text and spliced in verbatim; SQL's json_quote
#: escapes the key as JSON requires. The first step.do call of a name (most rows of a
#: long history) is keyed by its name alone (`JournalText.first`): half the string work
#: per row of the full key (type:count:name).
_ERROR_ENTRY_SQL = f"""'{{"$":"{ERROR_TAG}","error":' || coalesce(error, 'null') || '}}'"""
JOURNAL_MEMBER_SQL = f"""json_quote(type || ':' || count || ':' || name) || ':' || CASE
    WHEN state IN ('{DO_DONE}', '{WAIT_RECEIVED}') THEN
        CASE WHEN type = 'sleep' OR value IS NULL THEN '{UNDEFINED_ENTRY}' ELSE value END
    ELSE {_ERROR_ENTRY_SQL} END"""
FIRST_DO_MEMBER_SQL = f"""json_quote(name) || ':' || CASE
    WHEN state = '{DO_DONE}' THEN coalesce(value, '{UNDEFINED_ENTRY}')
    ELSE {_ERROR_ENTRY_SQL} END"""
JOURNAL_STEPS_WHERE = (
    f"type IN ({_sql_list(STEP_TYPES)}) "
    f"AND state IN ({_sql_list({DO_DONE, DO_FAILED, WAIT_RECEIVED, WAIT_TIMED_OUT})})"
)
#: Rows whose value is text (SQLite splices it into the journal); a binary value (a BLOB,
#: celld/engine/binary.py) is read apart (`BINARY_JOURNAL_SQL`) and joined in Python.
_TEXT_VALUE = "typeof(value) != 'blob'"
_FIRST_DO_WHERE = "type = 'do' AND count = 1"
#: Both sections of an instance's journal (parameters: workflow, instance id), one row
#: each, tagged 0 (first) and 1 (keyed): two range reads of the primary key.
JOURNAL_SQL = (
    f"SELECT 0, group_concat({FIRST_DO_MEMBER_SQL}, ',') FROM steps "
    f"WHERE workflow = ?1 AND instance_id = ?2 AND {_FIRST_DO_WHERE} "
    f"AND state IN ('{DO_DONE}', '{DO_FAILED}') AND {_TEXT_VALUE} "
    f"UNION ALL SELECT 1, group_concat({JOURNAL_MEMBER_SQL}, ',') FROM steps "
    f"WHERE workflow = ?1 AND instance_id = ?2 AND NOT ({_FIRST_DO_WHERE}) "
    f"AND {JOURNAL_STEPS_WHERE} AND {_TEXT_VALUE}"
)
#: The finished steps of an instance whose value is binary (see `JOURNAL_SQL`).
BINARY_JOURNAL_SQL = (
    "SELECT * FROM steps WHERE workflow = ?1 AND instance_id = ?2 "
    f"AND typeof(value) = 'blob' AND {JOURNAL_STEPS_WHERE}"
)


def journal_text(steps: Iterable[StepRecord]) -> JournalText:
    """The journal of the finished steps among `steps` (a store that reads rows into
    Python builds its journal text here)."""
    first, keyed = [], []
    for row in steps:
        if row.type not in STEP_TYPES:
            continue
        entry = Machine.journal_entry(row)
        if entry is None:
            continue
        if row.type == "do" and row.count == 1:
            first.append(journal_member(row.name, entry))
        else:
            keyed.append(journal_member(str(row.key), entry))
    return JournalText(join_texts(",", first), join_texts(",", keyed))
