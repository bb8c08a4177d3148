"""The closed vocabularies of the domain, as enums every layer shares.

Each is a :class:`~enum.StrEnum`: a member *is* its string (``Order.TOTAL ==
"total"``, ``json.dumps`` and msgpack write ``"total"``), so the values on the
wire, in the trace, in verify.json and in saved state are exactly the strings
docs/interfaces.md specifies, and an application may still pass ``order="total"``
(:func:`group_order` makes the member of it where such a string comes in). Code
compares with the members, never with string literals, so a typo is a name error
and the type checker knows which values a field can take
(tests/architecture/test_kinds.py checks it).

Here, at the bottom of the layers, so the trace, the store, the ordering cores,
the group and infrastructure layers, the simulator and the API can all name them.
"""

from __future__ import annotations

from enum import StrEnum

from m2mc.errors import UsageError

__all__ = ["GROUP_ORDERS", "DistKind", "GjlpState", "MetricKind", "MobilityModel", "NodeMode",
           "Order", "PartitionKind", "ReconnectReason", "RejoinReason", "RetentionMode", "ViewKind",
           "group_order"]


class Order(StrEnum):
    """A group's delivery order (docs/group.md section 3), plus ``NONE`` for the
    trace rows of a stack that has no ordering layer (the simulator's flood stack):
    never a group's order (:data:`GROUP_ORDERS` are those)."""

    SB = "sb"
    CAUSAL = "causal"
    FIFO = "fifo"
    TOTAL = "total"
    NONE = "none"


GROUP_ORDERS: tuple[Order, ...] = (Order.SB, Order.CAUSAL, Order.FIFO, Order.TOTAL)
"""The orders a group can have, as the API, the wire and scenario files accept them."""


def group_order(value: str) -> Order:
    """``value`` as the group order it names, where a caller's plain string comes in
    (``create_group(order="total")``): the member, or a UsageError naming the choices."""
    if value not in GROUP_ORDERS:
        raise UsageError(f"unknown order {value!r}; expected one of {', '.join(GROUP_ORDERS)}")
    return Order(value)


class GjlpState(StrEnum):
    """A GIIT row's state (seeds/000 V; docs/group.md section 4): this node is a
    ``MEMBER`` of the group, or the row stands for the seed's N/A (``REJECTED``: the
    application declined it; ``LEFT``: it left). Saved as is in the durable log."""

    MEMBER = "member"
    REJECTED = "rejected"
    LEFT = "left"


class ReconnectReason(StrEnum):
    """Why a node took itself to be back in range (``Reconnected.reason``,
    docs/group.md section 4): its interface came back (the driver's word), or it
    heard others again after a silence."""

    INTERFACE = "interface"
    SILENCE = "silence"


class RejoinReason(StrEnum):
    """Why the hosts ended an infrastructure member's membership without its leave
    (``Rejoined.reason``, docs/infra.md): nobody heard it for ``member_timeout`` or its
    backlog passed ``max_backlog_bytes``/``max_backlog_age`` (expelled), a power-on
    found it gone (resume refused), or every host lost its log (sequence lost)."""

    EXPELLED = "expelled"
    RESUME_REFUSED = "resume_refused"
    SEQUENCE_LOST = "sequence_lost"


class NodeMode(StrEnum):
    """How an application :class:`~m2mc.api.Node` runs (``NodeConfig.mode``): serverless
    (``ADHOC``, docs/group.md) or as a member of an infrastructure deployment
    (``INFRA``, docs/infra.md)."""

    ADHOC = "adhoc"
    INFRA = "infra"


class ViewKind(StrEnum):
    """What happened to another member in an infrastructure group's view
    (``m2mc.infra.member_events.ViewChange.kind``, seeds/001 3.3)."""

    JOINED = "joined"
    LEFT = "left"
    EXPELLED = "expelled"


class PartitionKind(StrEnum):
    """A simulated partition (``[[faults.partition]] kind``, docs/simulator.md):
    ``SYMMETRIC`` splits the nodes into sides, ``ONE_WAY`` drops ``from -> to`` only,
    ``ASYMMETRIC`` drops each way with its own probability."""

    SYMMETRIC = "symmetric"
    ONE_WAY = "one-way"
    ASYMMETRIC = "asymmetric"


class DistKind(StrEnum):
    """A distribution of delays or sizes in a scenario (``{dist = "..."}``,
    docs/simulator.md; :class:`m2mc.sim.dists.Dist`)."""

    CONSTANT = "constant"
    UNIFORM = "uniform"
    EXPONENTIAL = "exponential"
    LOGNORMAL = "lognormal"


class MobilityModel(StrEnum):
    """How a simulated node moves (``[nodes.mobility] model``, docs/simulator.md)."""

    STATIC = "static"
    WAYPOINTS = "waypoints"
    RANDOM_WAYPOINT = "random_waypoint"


class RetentionMode(StrEnum):
    """What a group's log keeps of what it evicts (``RetentionPolicy.mode``,
    docs/group.md): nothing (``FULL``: it keeps whole messages while they fit), or
    their identities (``IDS``)."""

    FULL = "full"
    IDS = "ids"


class MetricKind(StrEnum):
    """A Prometheus metric family's type (:class:`m2mc.metrics.spec.MetricSpec`)."""

    COUNTER = "counter"
    GAUGE = "gauge"
