"""The ``detail`` of the group layer's ``view`` trace events (docs/group.md section 4).

A node's first view of a group, at its join, lists the members it knows; every later
one says who came in and who went out, and the group's size, so a node's views read
in order give its members at each change. The whole list at every change made a
group's start cost each of n members n events of up to n names: a trace that grew
with the cube of the group (docs/decisions.md, "A view event says what changed").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from m2mc.trace.schema import detail_json

if TYPE_CHECKING:
    from m2mc.group.gjlp import GiitRow

__all__ = ["view_change", "view_detail"]


def view_detail(row: GiitRow) -> str:
    """A node's first view of the group in ``row``: its current members."""
    return detail_json(members=row.membership.current_tuple())


def view_change(row: GiitRow, moved: Iterable[str]) -> str:
    """A later view: of the processes in ``moved`` (whose membership changed, merged
    into ``row`` already), who is in now and who is out, and the group's size."""
    is_member = row.membership.is_member
    joined: list[str] = []
    left: list[str] = []
    for pid in sorted(moved):
        (joined if is_member(pid) else left).append(pid)
    return detail_json(size=row.membership.current_count(), joined=joined, left=left)
