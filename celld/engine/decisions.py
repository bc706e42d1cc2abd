"""What the machine answers to a step call or a report: one small frozen value each."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from .binary import BinaryValue, concat, join_texts, wire_member
from .errors import ErrorInfo


@dataclass(frozen=True, slots=True)
class Resolve:
    """The step returns ``value`` (serialized JSON text; ``None`` means ``undefined``)."""

    value: str | None


@dataclass(frozen=True, slots=True)
class Reject:
    """The step throws ``error`` into ``run()``; catchable there."""

    error: ErrorInfo


@dataclass(frozen=True, slots=True)
class Run:
    """JS must run the step callback as ``attempt`` with ``context`` as ``ctx``, give up on it
    after ``timeout_ms`` (report ``timed_out=True``), and call the delay function on failure
    only if ``will_retry``."""

    attempt: int
    context: dict[str, Any]
    timeout_ms: int
    will_retry: bool


@dataclass(frozen=True, slots=True)
class Suspend:
    """Pending. ``until`` is the deadline (``None``: parked until something else happens, e.g.
    a pause being cancelled); the machine remembers the call for ``wake``/``send_event``."""

    until: int | None
    event_type: str | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    """Fatal and uncatchable: the instance has already moved to ``errored`` with ``error``."""

    error: ErrorInfo


Decision = Resolve | Reject | Run | Suspend | Fail


class JournalEntry(NamedTuple):
    """A finished step handed to JS at the start of a run: ``("value", text | None)`` or
    ``("error", ErrorInfo)``."""

    kind: str
    data: str | ErrorInfo | None


@dataclass(frozen=True, slots=True)
class RunStart:
    """Returned by ``start_run``: the generation this run belongs to (drop messages of older
    ones), every finished step keyed by ``str(StepKey)``, and the step limit JS applies to the
    ``step.do`` calls it resolves locally from the journal; ``rollback`` when the run exists to
    roll back."""

    generation: int
    journal: dict[str, JournalEntry]
    step_limit: int
    #: A rollback run (:mod:`celld.engine.rollback`): ``{"error": trigger, "steps": [plan
    #: entries, in the order they run]}``; the runtime replays ``run()`` only to find the
    #: handlers again, then runs them one by one as the machine says.
    rollback: dict[str, Any] | None = None
    #: Finished steps read from the store as journal members, already JSON text (see
    #: :class:`JournalText`), when the machine started the run without them in memory;
    #: ``journal`` then holds only the ones in memory.
    recorded: JournalText | None = None

    def journal_json(self) -> str:
        """The journal as one JSON text for a single hand-over to JS (see
        :class:`JournalText` for its two sections). A key both in ``recorded`` and in
        memory appears twice with the same entry (a finished row never changes);
        JSON.parse keeps one."""
        first = [self.recorded.first] if self.recorded and self.recorded.first else []
        keyed = [self.recorded.keyed] if self.recorded and self.recorded.keyed else []
        for key, entry in self.journal.items():
            if key.startswith(FIRST_DO_PREFIX):  # str(StepKey): "<type>:<count>:<name>"
                first.append(journal_member(key[len(FIRST_DO_PREFIX) :], entry))
            else:
                keyed.append(journal_member(key, entry))
        return concat(
            '{"first":{', join_texts(",", first), '},"keyed":{', join_texts(",", keyed), "}}"
        )


#: The key prefix of a first ``step.do`` call of its name, journaled by name alone.
FIRST_DO_PREFIX = "do:1:"


class JournalText(NamedTuple):
    """Finished steps as the two sections of the JS journal, each JSON object members
    (see :func:`journal_member`, comma-separated, "" if none).

    ``first``: the first ``step.do`` call of each name (``count`` 1, most of any replay),
    keyed by the name alone: it resolves in JS with one lookup and no key to build, and
    a store builds its members with less string work. ``keyed``: every other finished
    step, keyed ``"<type>:<count>:<name>"`` (``str(StepKey)``)."""

    first: str = ""
    keyed: str = ""


#: The serialized form of ``undefined`` (js/web/serialize.js): the entry of a finished sleep
#: and of a step whose value is ``undefined``.
UNDEFINED_ENTRY = '{"$":"undefined"}'
#: The tag of a recorded error's entry. The value serializer escapes any object with a
#: ``"$"`` key of its own and emits no such tag, so no recorded value can look like one.
ERROR_TAG = "celld:error"


def journal_member(key: str, entry: JournalEntry) -> str:
    """One journal member as JSON text: ``"<key>":<value>`` (the recorded JSON text as
    is; :data:`UNDEFINED_ENTRY` for ``undefined``) or, for an error,
    ``"<key>":{"$":"celld:error","error":{name, message}}``."""
    kind, data = entry
    if kind == "error":
        body = '{"$":"' + ERROR_TAG + '","error":' + data.to_json() + "}"  # type: ignore[union-attr]
    elif data is None:
        body = UNDEFINED_ENTRY
    elif type(data) is BinaryValue:
        return concat(json.dumps(key, ensure_ascii=False) + ":", wire_member(data))
    else:
        body = data  # type: ignore[assignment]
    return json.dumps(key, ensure_ascii=False) + ":" + body
