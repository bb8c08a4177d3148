"""Read marks and collapsed threads, remembered across restarts.

The messages themselves come back from the group layer's durable log; what the
user had read and folded away lives in a small JSON file next to it, so a
restarted chat shows the conversation as it was. A damaged file is set aside
(renamed ``*.bad``) and the chat starts with everything read and expanded.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GroupUiState", "UiStateStore"]

MAX_MARKS = 100_000
"""Marks kept per group and kind; a bound on what a long-lived client writes."""


@dataclass(frozen=True, slots=True)
class GroupUiState:
    unread: frozenset[str] = field(default_factory=frozenset)
    collapsed: frozenset[str] = field(default_factory=frozenset)
    cursor: str | None = None


class UiStateStore:
    """``{gid: {"unread": [...], "collapsed": [...], "cursor": mid}}`` in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._groups: dict[str, GroupUiState] = {}
        self.recovered_from_damage = False
        self._load()

    def _load(self) -> None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            self._set_aside()
            return
        if not isinstance(raw, dict):
            self._set_aside()
            return
        for gid, entry in raw.items():
            if not isinstance(entry, dict):
                continue
            cursor = entry.get("cursor")
            self._groups[str(gid)] = GroupUiState(
                unread=frozenset(_strings(entry.get("unread"))),
                collapsed=frozenset(_strings(entry.get("collapsed"))),
                cursor=cursor if isinstance(cursor, str) else None)

    def _set_aside(self) -> None:
        self.recovered_from_damage = True
        with contextlib.suppress(OSError):
            self.path.replace(self.path.with_suffix(self.path.suffix + ".bad"))

    def get(self, gid: str) -> GroupUiState:
        return self._groups.get(gid, GroupUiState())

    def put(self, gid: str, state: GroupUiState) -> None:
        self._groups[gid] = state

    def save(self) -> None:
        """Write atomically (temporary file, then rename)."""
        data = {gid: {"unread": sorted(s.unread)[:MAX_MARKS],
                      "collapsed": sorted(s.collapsed)[:MAX_MARKS], "cursor": s.cursor}
                for gid, s in sorted(self._groups.items())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [item for item in value[:MAX_MARKS] if isinstance(item, str)]
