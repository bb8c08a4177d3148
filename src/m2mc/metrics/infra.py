"""What infrastructure mode exports: a member (``Node(mode="infra")``) and a host
(``m2mc host``): frames and their authentication, the member's deliveries and
NACKs, and a host's election state, gateway, coordinator and bounded tables.

Runs on the owner's event loop at scrape time (:mod:`m2mc.metrics.server`). It
reads a snapshot the owner makes of itself (:mod:`m2mc.metrics.views`: a
``MemberView``, a ``HostView``) and the cores' counters as they are. A member's own
groups label its queues (``group``: at most ``max_member_groups``), so no label here
takes a value from outside but the master's host id, of which the directory admits
at most ``max_hosts``.
"""

from __future__ import annotations

from m2mc import __version__
from m2mc.infra.wire import InfraWire
from m2mc.metrics import catalogue as cat
from m2mc.metrics.sink import Samples
from m2mc.metrics.views import HostView, MemberView


def member_snapshot(view: MemberView) -> Samples:
    samples = Samples(view.pid)
    samples.add("m2mc_node_info", 1, mode="member", version=__version__)
    core = view.core
    if core is None:
        return samples
    s = samples
    s.stats(cat.MEMBER, core.stats)
    s.add("m2mc_messages_sent_total", core.app_seq)
    s.add("m2mc_dropped_total", view.malformed_bodies, reason="malformed_body")
    s.add("m2mc_events_dropped_total", view.events_dropped)
    s.add("m2mc_member_moves_total", view.moves)
    s.add("m2mc_member_bad_addresses_total", view.bad_addresses)
    for phase in type(core.phase):
        s.add("m2mc_member_phase", 1 if core.phase is phase else 0, phase=phase.value)
    _wire(s, core.wire, core.group)
    if view.pieces is not None:
        s.stats(cat.PIECES, view.pieces)
    for gid, unread in view.unread.items():
        s.queue("app_messages", unread, view.max_queued_messages, gid)
    s.queue("app_events", view.app_events, view.max_queued_events)
    s.queue("pending_sends", core.pending_sends, core.cfg.max_pending_sends)
    return samples


def host_snapshot(view: HostView) -> Samples:
    samples = Samples(view.host_id)
    samples.add("m2mc_node_info", 1, mode="host", version=__version__)
    core = view.core
    if core is None:
        return samples
    s = samples
    cfg = core.cfg
    s.stats(cat.HOST, core.stats)
    s.stats(cat.GATEWAY, core.gateway.stats)
    s.stats(cat.RATE_LIMIT, core.gateway.limiter.stats, limiter="gateway")
    if core.coordinator is not None:
        s.stats(cat.COORDINATOR, core.coordinator.stats)
        s.queue("members", len(core.coordinator.work.members), cfg.max_members)
    _wire(s, core.wire, view.group)
    if view.pieces is not None:
        s.stats(cat.PIECES, view.pieces)
    # The election: who is master, whether it is alive, how many elections ran.
    directory = core.directory
    alive = bool(core.master) and (core.master == core.me or directory.is_live(core.master))
    if core.master:
        s.add("m2mc_host_master", 1, master=core.master)
    s.add("m2mc_host_has_master", int(alive))
    s.add("m2mc_host_is_master", int(core.master == core.me and core.coordinator is not None))
    s.add("m2mc_host_epoch", core.epoch.round)
    s.add("m2mc_host_elections_total", core.election.rounds)
    s.add("m2mc_host_hosts_live", len(directory.live()))
    s.add("m2mc_host_cell_members", core.gateway.load())
    s.add("m2mc_host_commit", core.commit)
    s.add("m2mc_host_log_high", core.log.high)
    s.add("m2mc_host_log_refused_total", core.log.refused)
    s.add("m2mc_host_bad_addresses_total", view.bad_addresses)
    s.add("m2mc_host_untrusted_addresses_total", view.untrusted_addresses)
    # The configuration: after a retirement, quorums count fewer hosts.
    s.add("m2mc_host_configuration_hosts", directory.universe())
    s.add("m2mc_host_quorum", directory.quorum())
    s.add("m2mc_host_retired_hosts", len(core.retired))
    ops = core.ops
    s.add("m2mc_host_retired_notices_total", ops.notices)
    s.add("m2mc_host_admin_refused_total", ops.desk.refused)
    s.add("m2mc_host_backbone_refused_connections_total", view.backbone_refused_connections)
    s.add("m2mc_host_backbone_bad_streams_total", view.backbone_bad_streams)
    s.queue("hosts", len(directory.hosts), cfg.max_hosts)
    s.queue("local", len(core.gateway.local), cfg.max_local)
    s.queue("forward", len(core.gateway.outbox), cfg.max_forward_queue)
    s.queue("queued_requests", core.queued_requests, cfg.max_queued_requests)
    s.queue("admin_requests", len(ops.desk.clients), ops.desk.limit)
    return samples


def _wire(s: Samples, wire: InfraWire, group: str) -> None:
    """Frames decoded and refused, and the deployment key's counters (if keyed)."""
    s.stats(cat.WIRE, wire.stats)
    auth = wire.auth
    failures = 0
    if auth is not None:
        s.stats(cat.AUTH, auth.stats, group=group)
        failures = sum(getattr(auth.stats, name) for name in cat.AUTH_REFUSALS)
    s.add("m2mc_auth_failures_total", failures)

