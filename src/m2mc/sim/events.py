"""The simulator's events: what sits in its one heap, each kind a named tuple.

Every event starts with ``t`` (virtual time) and ``seq`` (a counter shared by the
whole run, never repeated), and the heap orders events as tuples do: by ``t``, then
by ``seq``. As ``seq`` is unique no comparison ever looks further, so events at the
same virtual time run in the order they were scheduled, whatever their kind.

They are :class:`~typing.NamedTuple` rather than frozen dataclasses on purpose: the
heap compares them in C (a dataclass would need a Python ``__lt__`` per comparison)
and reading a field is one C-level lookup, so naming the fields costs the engine's
hot loop next to nothing (docs/simulator.md, "Speed").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from m2mc.sim.world import Domain, SimNode


class Arrival(NamedTuple):
    """A datagram reaching one interface of a node."""

    t: float
    seq: int
    node: SimNode  # the receiver
    iface: int  # the receiver's interface (index into ``node.iface_names``)
    data: bytes
    src: SimNode  # the sender (the receiver itself for a looped-back broadcast)
    domain: Domain  # where it travelled: dropped if the receiver has left it meanwhile


class Timer(NamedTuple):
    """A node's timer, armed from its stack's ``next_deadline``."""

    t: float
    seq: int
    node: SimNode
    generation: int  # the node's generation when armed: a crash makes the timer stale
    deadline: float  # in the node's own clock, as the stack asked for it


class Call(NamedTuple):
    """A plain call at a virtual time: faults, workload, mobility, phase changes."""

    t: float
    seq: int
    fn: Callable[[Any], None]
    arg: Any


Event = Arrival | Timer | Call
