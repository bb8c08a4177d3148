"""The counters of a group node: :class:`NodeStats` (everything dropped or
suppressed: bad input is counted, never fatal), and the flat ``name -> int``
views :meth:`GroupNode.group_stats` and :meth:`GroupNode.node_stats` give of
them and of each group's components (for tests, benches and the metrics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from m2mc.group.manager import GroupNode


@dataclass(slots=True)
class NodeStats:
    """Counters of everything dropped or suppressed (bad input is counted, never fatal)."""

    malformed: int = 0  # undecodable group messages
    unknown_group: int = 0  # a group tag we are not in
    wrong_kind: int = 0
    own_echo: int = 0
    duplicates: int = 0
    refused: int = 0
    malformed_records: int = 0
    abandoned: int = 0
    oversized: int = 0
    status_suppressed: int = 0
    refuted: int = 0  # news of our own leave (an earlier incarnation's) answered by a rejoin
    auth_failed: int = 0  # keyed groups: no tag, bad tag, replayed, stale, bad auth header
    sealed_refused: int = 0  # a sealed message for a group (or discovery) we hold no key for
    sender_mismatch: int = 0  # a body naming another sender than the one who sealed it
    rate_limited: int = 0  # control messages over their sender's (or the total) rate
    sent: int = 0
    delivered: int = 0
    extra: dict[str, int] = field(default_factory=dict)


def group_stats(node: GroupNode, gid: str) -> dict[str, int]:
    """Counters of one group's repair, MSP, retention, order strategy and ordering core."""
    inst = node.groups.get(gid)
    if inst is None:
        return {}
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
    auth = node._auth_by_tag.get(inst.tag)
    if auth is not None:
        out.update({f"auth_{name}": value for name, value in auth.stats.as_dict().items()})
    return out


def node_stats(node: GroupNode) -> dict[str, int]:
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
