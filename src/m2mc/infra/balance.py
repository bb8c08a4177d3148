"""Load balancing by the master (seeds/004 4.4, 5.5).

``toReroute = maxNrOfMessengersInHost - #Messengers / #Hosts``: when it is at least
one, the master orders the most loaded host to move that many messengers to the
least loaded one. We move at most ``ceil(average - least)`` at a time so one order
never makes the target the new most loaded host (docs/decisions.md); repeated
checks finish the job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from m2mc.infra.messages import CellInfo


@dataclass(frozen=True, slots=True)
class RerouteOrder:
    source: str
    target: str
    count: int


def to_reroute(loads: Mapping[str, int]) -> float:
    """The seed's formula (0 with no hosts)."""
    if not loads:
        return 0.0
    return max(loads.values()) - sum(loads.values()) / len(loads)


def plan(loads: Mapping[str, int]) -> RerouteOrder | None:
    """The order to give now, or None when balanced. Ties go to the lowest host ID."""
    if len(loads) < 2:
        return None
    excess = to_reroute(loads)
    if excess < 1:
        return None
    source = min(loads, key=lambda h: (-loads[h], h))
    target = min(loads, key=lambda h: (loads[h], h))
    average = sum(loads.values()) / len(loads)
    count = min(math.floor(excess), math.ceil(average - loads[target]))
    if count < 1 or source == target:
        return None
    return RerouteOrder(source, target, count)


def reroute(directory: Sequence[CellInfo], me: str, my_load: int
            ) -> tuple[str, int, CellInfo] | None:
    """The master's order from its directory of cells (its own load counted as it is
    now): ``(source host, how many, target cell)``, or None when balanced."""
    loads = {c.host: c.load for c in directory}
    cells = {c.host: c for c in directory}
    loads[me] = my_load
    order = plan(loads)
    if order is None or order.target not in cells:
        return None
    return order.source, order.count, cells[order.target]
