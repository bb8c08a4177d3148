"""The flat ``name -> int`` views :meth:`GroupNode.group_stats` and
:meth:`GroupNode.node_stats` give of a node's counters (:class:`NodeStats`) and of
each group's components (for tests, benches and the metrics).

They read the node through :class:`CountedNode`, what they need of it, so that this
module sits below :mod:`m2mc.group.manager` (no import cycle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from m2mc.group.gjlp import Gjlp
    from m2mc.group.instance import GroupInstance
    from m2mc.group.node_stats import NodeStats
    from m2mc.group.reconnect import Reconnect
    from m2mc.group.streams import GroupStreams
    from m2mc.security.auth import GroupAuth
    from m2mc.security.ratelimit import RateLimitStats


class CountedNode(Protocol):
    """The node as its counters' views see it."""

    @property
    def stats(self) -> NodeStats: ...
    @property
    def groups(self) -> Mapping[str, GroupInstance]: ...
    @property
    def gjlp(self) -> Gjlp: ...
    @property
    def reconnect(self) -> Reconnect: ...
    @property
    def streams(self) -> GroupStreams: ...
    @property
    def discovery_limits(self) -> RateLimitStats: ...
    @property
    def control_limits(self) -> RateLimitStats: ...


def group_counters(inst: GroupInstance, auth: GroupAuth | None) -> dict[str, int]:
    """Counters of one group's repair, MSP, retention, order strategy and ordering core
    (``auth``: its GroupAuth, in a keyed group)."""
    out: dict[str, int] = {}
    tables: tuple[DataclassInstance, ...] = (inst.repair.stats, inst.msp.stats,
                                             inst.retention.stats, inst.window.stats,
                                             *inst.ordering.stats_tables())
    for stats in tables:
        for name in stats.__dataclass_fields__:
            value = getattr(stats, name)
            if isinstance(value, int):
                out[name] = value
    core = inst.mop.core
    out.update(held=core.held_count, core_duplicates=core.duplicates, core_refused=core.refused)
    mop = inst.mop
    out.update(unstamped=len(mop.unstamped), unstamped_refused=mop.unstamped_refused,
               stamps_refused=mop.stamps_refused, mirs=len(inst.msp.mirs),
               pending_repairs=inst.repair.pending_repairs,
               holdoff_senders=inst.repair.holdoff_senders)
    out["delivered"] = inst.delivered_count
    out["members_refused"] = inst.row.membership.refused
    out["names_refused"] = inst.row.names.refused
    if auth is not None:
        out.update({f"auth_{name}": value for name, value in auth.stats.as_dict().items()})
    return out


def node_counters(node: CountedNode) -> dict[str, int]:
    """The node's own counters, its GJLP's, its reconnect's and its rate limiters'."""
    stats = node.stats
    out = {name: getattr(stats, name) for name in stats.__dataclass_fields__
           if isinstance(getattr(stats, name), int)}
    out["delivered"] = sum(inst.delivered_count for inst in node.groups.values())
    for name in node.gjlp.stats.__dataclass_fields__:
        value = getattr(node.gjlp.stats, name)
        if isinstance(value, int):
            out[f"gjlp_{name}"] = value
    rc = node.reconnect.stats
    out.update({name: getattr(rc, name) for name in rc.__dataclass_fields__})
    out.update(node.streams.counters())
    disc, ctrl = node.discovery_limits, node.control_limits
    out["rate_limited_sender"] = disc.limited + ctrl.limited
    out["rate_limited_total"] = disc.limited_total + ctrl.limited_total
    out["rate_limited_discovery"] = disc.limited + disc.limited_total
    out["rate_limited_control"] = ctrl.limited + ctrl.limited_total
    return out
