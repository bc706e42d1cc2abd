"""The one exception type the configuration layer raises.

Every problem is reported against the file it came from and the key path inside it, because a
user fixing a config needs to know *where* to look before *what* is wrong. Several problems
found in one pass are raised together so a user can fix them all in one edit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Issue:
    """One problem: a key path such as ``workflows[0].class_name`` ("" for the whole file)."""

    key: str
    message: str
    line: int | None = None
    column: int | None = None


class ConfigError(Exception):
    """A project configuration that celld cannot use.

    ``str()`` renders one line per issue as ``<file>[:line:col]: <key path>: <message>``.
    """

    def __init__(
        self,
        file: Path | str,
        key: str = "",
        message: str = "",
        *,
        line: int | None = None,
        column: int | None = None,
        issues: Iterable[Issue] = (),
    ) -> None:
        self.file = Path(file)
        collected = list(issues)
        if message:
            collected.insert(0, Issue(key, message, line, column))
        if not collected:
            raise ValueError("ConfigError needs a message or at least one issue")
        self.issues: tuple[Issue, ...] = tuple(collected)
        super().__init__(str(self))

    @property
    def key(self) -> str:
        return self.issues[0].key

    @property
    def message(self) -> str:
        return self.issues[0].message

    def __str__(self) -> str:
        return "\n".join(self._render(issue) for issue in self.issues)

    def _render(self, issue: Issue) -> str:
        where = str(self.file)
        if issue.line is not None:
            where += f":{issue.line}"
            if issue.column is not None:
                where += f":{issue.column}"
        parts = [where, issue.key, issue.message] if issue.key else [where, issue.message]
        return ": ".join(parts)
