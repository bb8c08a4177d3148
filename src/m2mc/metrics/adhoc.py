"""What an ad hoc node exports: its group layer's counters
(:class:`~m2mc.group.manager.GroupNode`), each group's repair, MSP, ordering and
key counters, M2MP's and the channel's, and the depth of every bounded queue.

Runs on the node's event loop at scrape time (:mod:`m2mc.metrics.server`). It reads
the node's snapshot of itself (:class:`~m2mc.metrics.views.AdhocView`) and the group
layer's counters as they are, without changing anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m2mc import __version__
from m2mc.group.total.mop import TotalMop
from m2mc.kinds import Order
from m2mc.metrics import catalogue as cat
from m2mc.metrics.labels import GroupLabels
from m2mc.metrics.sink import Samples
from m2mc.metrics.views import AdhocView

if TYPE_CHECKING:
    from m2mc.group.instance import GroupInstance
    from m2mc.group.manager import GroupNode


def adhoc_snapshot(view: AdhocView, labels: GroupLabels) -> Samples:
    stack = view.stack
    samples = Samples(stack.pid if stack is not None else view.pid)
    samples.add("m2mc_node_info", 1, mode="adhoc", version=__version__)
    if stack is None:
        return samples
    _node_counters(samples, view, stack)
    group_of = labels.assign(gid for gid, inst in stack.groups.items())
    for gid, inst in stack.groups.items():
        _group(samples, view, stack, inst, group_of[gid])
    return samples


def _node_counters(s: Samples, view: AdhocView, stack: GroupNode) -> None:
    # NodeStats.delivered is not kept up: the groups count their deliveries.
    delivered = sum(inst.delivered_count for inst in stack.groups.values())
    s.stats(cat.NODE, stack.stats, override={"delivered": delivered})
    s.add("m2mc_events_dropped_total", view.events_dropped)
    s.stats(cat.GJLP, stack.gjlp.stats)
    s.stats(cat.RECONNECT, stack.reconnect.stats)
    s.add("m2mc_log_evicted_total", getattr(stack.store, "evicted", 0))
    s.stats(cat.RATE_LIMIT, stack.discovery_limits, limiter="discovery")
    s.stats(cat.RATE_LIMIT, stack.control_limits, limiter="control")
    m2mp = stack.m2mp
    s.stats(cat.M2MP, m2mp.stats)
    s.stats(cat.STREAM, stack.streams.stats)
    if view.channel is not None:
        s.stats(cat.CHANNEL, view.channel)
        s.add("m2mc_channel_dropped_paused_total", view.dropped_paused)
    lingering = sum(1 for inst in stack.groups.values() if inst.lingering)
    s.add("m2mc_groups", len(stack.groups) - lingering, state="member")
    s.add("m2mc_groups", lingering, state="lingering")
    s.add("m2mc_groups", len(stack.locked), state="locked")
    s.add("m2mc_groups", len(stack.gjlp.discovered), state="discovered")
    cfg = stack.config
    s.queue("send_backlog", stack.send_backlog, cfg.send_backlog)
    s.queue("send_backlog_bytes", stack.send_backlog_bytes, cfg.send_backlog_bytes)
    s.queue("app_events", view.app_events, view.max_queued_events)
    s.queue("known_groups", len(stack.gjlp.giit) + len(stack.gjlp.discovered), cfg.max_groups)
    s.queue("partial_bytes", m2mp.partial_bytes, m2mp.config.max_partial_bytes)
    s.queue("streams_open", len(stack.streams.incoming), cfg.max_streams)
    s.queue("stream_store", stack.streams.store.held_bytes, stack.streams.store.limit)


def _group(s: Samples, view: AdhocView, stack: GroupNode, inst: GroupInstance, group: str) -> None:
    cfg = stack.config
    mop = inst.mop
    core = mop.core
    s.add("m2mc_group_info", 1, group=group, order=inst.order,
          keyed=str(stack.is_keyed(inst.gid)).lower(),
          state="lingering" if inst.lingering else "member")
    s.add("m2mc_group_members", len(inst.row.membership.current()), group=group)
    s.add("m2mc_group_messages_delivered_total", inst.delivered_count, group=group)
    s.add("m2mc_group_messages_refused_total", core.refused, group=group, reason="held_full")
    s.add("m2mc_group_messages_refused_total", mop.unstamped_refused, group=group,
          reason="unstamped_full")
    s.add("m2mc_group_messages_refused_total", mop.stamps_refused, group=group,
          reason="stamps_full")
    s.add("m2mc_group_duplicates_total", core.duplicates, group=group)
    s.add("m2mc_group_members_refused_total", inst.row.membership.refused, group=group)
    s.add("m2mc_group_holdoff_senders", inst.repair.holdoff_senders, group=group)
    s.stats(cat.REPAIR, inst.repair.stats, group=group)
    s.stats(cat.WINDOW, inst.window.stats, group=group)
    s.stats(cat.MSP, inst.msp.stats, group=group)
    s.stats(cat.RETENTION, inst.retention.stats, group=group)
    if isinstance(mop, TotalMop):
        s.stats(cat.SEQLOG, mop.log.stats, group=group)
    auth = stack.keyring.by_tag.get(inst.tag)
    if auth is not None:
        s.stats(cat.AUTH, auth.stats, group=group)
    s.queue("app_messages", view.unread.get(inst.gid, 0), view.max_queued_messages, group)
    s.queue("held", core.held_count, cfg.max_held, group)
    if inst.order == Order.TOTAL:
        s.queue("unstamped", len(mop.unstamped), cfg.max_unstamped, group)
    s.queue("pending_repairs", inst.repair.pending_repairs, cfg.max_pending_repairs, group)
    s.queue("mirs", len(inst.msp.mirs), cfg.max_mirs, group)

