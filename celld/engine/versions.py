"""Version pinning: a replay under another version of the Worker must not mix histories.

Each instance records the version (a hash of the Worker bundle) it started on. When its
run is replayed by a different version, :class:`ReplayCheck` follows which recorded steps
the new code asks for. A step the history does not have ("fresh") is judged only once the
replay has gone quiet (every branch of ``Promise.all`` / ``Promise.race`` has run as far
as recorded results take it): if recorded steps that the new code has not asked for remain
then, the new code has taken another path through the history, and the instance fails
with :func:`mismatch_error` instead of running the new step on top of the old history.

Correct code under a new version asks for every recorded step before it needs a new one
(its parallel branches included), so the check never fires for it; once every recorded
step has been asked for, the check is over.

Pure: no I/O, no clock. The cells layer feeds it the keys and says when JS is quiet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import ErrorInfo, fatal
from .state import StepKey

_SHOWN = 5  # steps named in the error before "and N more"


@dataclass(frozen=True)
class VersionMismatch:
    started: str
    current: str
    fresh: tuple[StepKey, ...]
    unasked: tuple[StepKey, ...]

    def error(self) -> ErrorInfo:
        return mismatch_error(self)


def _names(keys: Sequence[StepKey]) -> str:
    shown = [f'"{k.name}" ({k.type} #{k.count})' for k in keys[:_SHOWN]]
    more = len(keys) - _SHOWN
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def mismatch_error(found: VersionMismatch) -> ErrorInfo:
    return fatal(
        f"This instance started on version {found.started} and is replayed by version "
        f"{found.current}, whose run() asks for {_names(found.fresh)}, not in the "
        f"instance's history, while recorded steps it has not asked for remain before it: "
        f"{_names(found.unasked)}. Running on would mix two histories; let instances "
        "finish (or restart them) before deploying code that changes their steps."
    )


class ReplayCheck:
    """What a replay under another version has asked of the recorded history."""

    def __init__(self, recorded: Iterable[StepKey], started: str, current: str) -> None:
        self.recorded: tuple[StepKey, ...] = tuple(recorded)  # in start order
        self._unasked = dict.fromkeys(self.recorded)
        self.started = started
        self.current = current

    @property
    def done(self) -> bool:
        """Every recorded step has been asked for: nothing left to check."""
        return not self._unasked

    def ask(self, key: StepKey) -> bool:
        """The replay asks for `key`; True if it is recorded (it is then marked asked),
        False for a fresh step, to be judged with :meth:`judge`."""
        if key in self._unasked:
            del self._unasked[key]
            return True
        return key in self.recorded

    def judge(self, fresh: Iterable[StepKey]) -> VersionMismatch | None:
        """At a quiet point, with `fresh` steps asked and held: the mismatch, if recorded
        steps remain unasked; None if the fresh steps may run."""
        fresh = tuple(fresh)
        if not fresh or not self._unasked:
            return None
        return VersionMismatch(self.started, self.current, fresh, tuple(self._unasked))
