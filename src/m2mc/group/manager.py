"""The Group Manager (seeds/000 III.A.4, IX.E) as a sans-IO stack: :class:`GroupNode`.

It owns the process's M2MP layer, one :class:`~m2mc.group.gjlp.Gjlp` and, per
group joined, a :class:`~m2mc.group.instance.GroupInstance` (MOP, MSP, repair).
It routes each incoming group message by its group tag and kind, and turns
application calls (create, join, leave, send) into group messages.

The node is three sides and a core, each an object with explicit references, not
mixins of one class: the receive side (:class:`~m2mc.group.node_receive.NodeReceive`,
``receiver``), the send side (:class:`~m2mc.group.node_send.NodeSend`, ``sender``)
and the output side (:class:`~m2mc.group.node_output.NodeOutput`, ``output``), whose
bound methods the node binds once as its own ``send_body``, ``trace``, ``deliver``...
(the :class:`~m2mc.group.port.NodePort` of its group instances). The node keeps the
lifecycle, the application's calls, the group and key tables and the SansIOStack.

Drivers call :meth:`receive_datagram`, :meth:`on_timer`, the API methods, then
take :meth:`datagrams_to_send`, carry out :meth:`take_save`
(:func:`m2mc.core.carry_out`: the store's commit, then the trace it makes true)
and only then transmit the datagrams; the application drains :meth:`events`.
The node never commits by itself: the save is the driver's to carry out
*before* any datagram leaves, so a message identity is durable before anyone
can see it.

Keyed groups (docs/security.md): every message of a group this node holds a
key for (:meth:`set_key`) is sealed in ``send_body`` (:mod:`~m2mc.group.node_output`),
afresh for each transmission, and opened in ``on_message``
(:mod:`~m2mc.group.node_receive`) before anything else looks at
it; a message that fails (no tag, bad tag, replay, a sender other than the one
that sealed it) is counted and dropped before any state changes. Control
messages pass a per-sender rate limiter first: ADV and GRPS_INFO the node's discovery
limiter, SYNC_REQ and NACK their group's own (after the tag, in a keyed group).
Messages claiming this node's own pid are dropped before any limiter (``own_echo``).
The core never reads a clock: the first seal counter (``counter_start``) comes
from the driver.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from m2mc.core import Save
from m2mc.errors import UsageError
from m2mc.group.codec import (
    DISCOVERY_TAG,
    GrpInfo,
    GrpsInfo,
    Join,
    Leave,
    MemberEntry,
    filter_prefix,
)
from m2mc.group.config import GroupConfig
from m2mc.group.counters import group_counters, node_counters
from m2mc.group.events import GroupCreated, GroupEvent, Reconnected
from m2mc.group.gjlp import LEFT, MEMBER, GiitRow, Gjlp
from m2mc.group.instance import STATUS_KEEPALIVE, GroupInstance
from m2mc.group.membership import Membership
from m2mc.group.names import MemberNames, check_name
from m2mc.group.node_keys import NodeKeys
from m2mc.group.node_output import TRACE_JOURNAL_META, NodeOutput
from m2mc.group.node_receive import NodeReceive
from m2mc.group.node_send import NodeSend, settles
from m2mc.group.node_stats import NodeStats
from m2mc.group.port import InstancePort
from m2mc.group.reconnect import INTERFACE, MADE_META, Reconnect
from m2mc.group.stream_codec import STREAM_MAGIC
from m2mc.group.streams import GroupStreams
from m2mc.group.unknown_groups import UnknownGroups
from m2mc.group.views import view_detail
from m2mc.kinds import Order, ReconnectReason, group_order
from m2mc.ordering import MessageId
from m2mc.security.errors import KeyRequiredError
from m2mc.security.keys import GroupSecret
from m2mc.security.ratelimit import RateLimitConfig, RateLimiter, RateLimitStats
from m2mc.store import GroupStore, MemoryStore
from m2mc.store.bodies import BodyStore, MemoryBodyStore
from m2mc.trace.schema import NullSink, TraceJournal, TraceSink
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageAbandoned, MessageReceived

__all__ = ["TRACE_JOURNAL_META", "GroupNode", "NodeStats"]


_VERSION_META = "ver/"  # store meta key prefix: "ver/<gid>" = our last join/leave version
_AUTH_META = "auth/"  # store meta key prefix: "auth/<gid>" = suite of a keyed group, or ""


class GroupNode:
    """A process's whole M2MC stack over one M2MP layer (a SansIOStack)."""

    takes_blocks = True  # receive_datagrams hands wire.segments.Segments to M2MP (m2mc.core)

    def __init__(self, pid: str, *, rng: random.Random, config: GroupConfig | None = None,
                 m2mp: M2MPLayer | None = None, m2mp_config: M2MPConfig | None = None,
                 store: GroupStore | None = None, trace: TraceSink | None = None,
                 run_id: str = "", keys: Mapping[str, GroupSecret] | None = None,
                 counter_start: int = 0, trace_journal: TraceJournal | None = None,
                 name: str = "", bodies: BodyStore | None = None) -> None:
        if not pid or len(pid) > 64:
            raise UsageError("a process id must be 1 to 64 characters")
        self.pid = pid
        # Our display name (m2mc.group.names): in our JOINs and STATUSes, "" for none.
        self.name = check_name(name)
        self.rng = rng
        self.config = config or GroupConfig()
        self.config.validate()
        self.window_bytes = self.config.send_window_bytes  # (fit_window may lower it)
        self.m2mp = m2mp or M2MPLayer(m2mp_config, rng=random.Random(rng.getrandbits(64)))
        self.m2mp.add_filter(filter_prefix(DISCOVERY_TAG))
        self.store: GroupStore = store if store is not None else MemoryStore()
        self.store.set_retention(self.config.retention())  # docs/group.md section 8
        self.trace_sink: TraceSink = trace_journal or trace or NullSink()
        self.tracing = self.trace_sink.enabled
        self.run_id = run_id
        self.gjlp = Gjlp(pid, self.config, rng)
        # Coming back into range (reconnect.py): the silence that counts as "away" is
        # measured against the members' status keepalive.
        self.reconnect = Reconnect(self.config, rng,
                                   STATUS_KEEPALIVE * self.config.status_interval)
        self.unknown = UnknownGroups(self.gjlp, self.config.adv_reply_backoff, rng)
        self.groups: dict[str, GroupInstance] = {}
        self._by_tag: dict[bytes, GroupInstance] = {}
        self.send_room = self.send_room_size = 0
        self.now = 0.0  # the time of the current step (the last entry point's ``now``)
        self.stats = NodeStats()
        self.started = False
        # Keyed groups (node_keys.py); a key's first seal counter, unless given with it.
        self.counter_start = counter_start
        self.keyring = NodeKeys(pid, self.config, keys)
        self.locked: set[str] = set()  # keyed groups in the log whose key was not given
        cfg = self.config
        # Rate limits (docs/security.md): discovery (ADV, GRPS_INFO; unauthenticated, so
        # keyed by the claimed sender) has its own limiter; each group instance has one
        # for its SYNC_REQ and NACK, applied after the tag verified in a keyed group. An
        # outsider's discovery flood claiming a member's pid costs that member nothing.
        self.limit_config = RateLimitConfig(cfg.control_rate, cfg.control_burst,
                                            cfg.control_total_rate, cfg.control_total_burst,
                                            cfg.max_senders)
        self.discovery_limits = RateLimitStats()
        self.control_limits = RateLimitStats()  # shared by the groups' limiters
        self.discovery_limiter = RateLimiter(self.limit_config, stats=self.discovery_limits)
        # Streamed messages' bodies (docs/group.md section 12), kept beside the log.
        self.streams = GroupStreams(self, bodies if bodies is not None else MemoryBodyStore(
            min(cfg.stream_store_bytes, cfg.memory_log_bytes)))
        # The three sides, each given what it uses (the tables above are shared, not
        # copied: the node adds and drops groups and keys in them).
        self.output = output = NodeOutput(
            self, pid=pid, run_id=run_id, store=self.store, gjlp=self.gjlp,
            streams=self.streams, auth_by_tag=self.keyring.by_tag,
            journal=trace_journal if self.tracing else None, tracing=self.tracing)
        # The NodePort of the group instances, and the node's own way out: the output
        # side's methods, bound once (no call in between, on any path).
        self.send_body = output.send_body
        self.send_repairs = output.send_repairs
        self.trace = output.trace
        self.record_traces = output.record_traces
        self.deliver = output.deliver
        self.deliver_many = output.deliver_many
        self.emit = output.emit
        self.save_row = output.save_row
        self.outbox = output.outbox  # (m2mc.group.backlog counts it)
        self.sender = NodeSend(pid=pid, groups=self.groups, config=cfg, m2mp=self.m2mp,
                               stats=self.stats, output=output)
        self._send_data = self.sender.send_data
        self.receiver = NodeReceive(
            pid=pid, config=cfg, stats=self.stats, groups=self.groups, by_tag=self._by_tag,
            auth_by_tag=self.keyring.by_tag, gjlp=self.gjlp, reconnect=self.reconnect,
            unknown=self.unknown, discovery_limiter=self.discovery_limiter,
            streams=self.streams, output=output, back=self._back)
        self._on_message = self.receiver.on_message
        self.m2mp.watch_filtered(self.receiver.turned_away)

    @property
    def batch_deliveries(self) -> bool:
        """Deliveries as DeliveredBatch events (consecutive ones of a group coalesced)
        instead of one Delivered each: for an owner that takes them by the batch."""
        return self.output.batch_deliveries

    @batch_deliveries.setter
    def batch_deliveries(self, value: bool) -> None:
        self.output.batch_deliveries = value

    # ================================================================ lifecycle
    @settles
    def start(self, now: float) -> None:
        """Boot or reboot: reload the GIIT and every joined group from the store,
        ask the groups for what we missed (MSP) and advertise (GJLP)."""
        self.now = now
        self.started = True
        self.reconnect.started(now)
        for row in self.store.load_groups():
            giit_row = GiitRow(row.gid, row.desc, row.order, MEMBER if row.state == MEMBER
                               else LEFT, Membership(self.config.max_members, row.members),
                               row.my_version, names=MemberNames(self.config.max_members))
            if giit_row.state == MEMBER:  # names are not kept: ours now, others' as heard
                giit_row.names.said(self.pid, self.name)
            giit_row.keyed = self.keyring.has(row.gid) or bool(
                self.store.get_meta(_AUTH_META + row.gid))
            self.gjlp.giit[row.gid] = giit_row
            if giit_row.state == MEMBER:
                if giit_row.keyed and not self.keyring.has(row.gid):
                    # Keyed when we were last up, and no key now: running it open would
                    # accept outsiders' messages. It waits for join_group(gid, key=...).
                    self.locked.add(row.gid)
                    continue
                inst = self._instance(giit_row, now)
                inst.start_sync(now)
        if self.config.advertise_on_start:
            self.advertise(now)

    @settles
    def network_changed(self, now: float) -> None:
        """The driver's word that the network changed under us: the channel's interface
        came (back) up or got its address again, or (simulator) the node regained
        coverage. The node is taken to be back in range (docs/group.md section 4): it
        advertises, re-announces the groups it created and runs MSP for every group."""
        self.now = now
        self._back(now, INTERFACE, None)

    def _back(self, now: float, reason: ReconnectReason, silent_for: float | None) -> None:
        """A sign that we are back in range (the driver's, or the receive side's after a
        silence): once started, a reaction (reconnect.py) and a Reconnected event."""
        if self.started and self.reconnect.back(now, reason):
            self.emit(Reconnected(reason, silent_for))

    # ================================================================ app API
    @settles
    def advertise(self, now: float) -> None:
        """sendAdvMsg: announce ourselves; every group we may join gets offered."""
        self.now = now
        self.unknown.advertisement(now)
        self.send_body(DISCOVERY_TAG, self.gjlp.advertise())

    def new_group_id(self) -> str:
        """A fresh group id ``<pid>/<n>`` (what :meth:`create_group` uses when given none;
        a driver that must derive a key from the id takes one first)."""
        n = int(self.store.get_meta("grp_seqno") or 0) + 1
        self.store.set_meta("grp_seqno", str(n))
        return f"{self.pid}/{n}"

    @settles
    def set_key(self, gid: str, secret: GroupSecret | None,
                counter_start: int | None = None) -> None:
        """Give (or with None, take back) the key of group ``gid`` before creating or
        joining it: a keyed group's messages are sealed and only sealed ones accepted.

        ``counter_start``: the first seal counter (a driver passes ``counter_start_at``
        of the wall-clock seconds it read; default the node's ``counter_start``).
        A key cannot change while the node is a member (UsageError): leave first.
        """
        if self.keyring.secret(gid) == secret:
            return
        if self.is_member(gid):
            raise UsageError(f"cannot change the key of group {gid!r} while a member")
        if gid in self.groups:  # lingering after a leave: stop sealing with the old key
            self._drop_instance(gid)
        self.keyring.set(gid, secret, self.counter_start if counter_start is None
                         else counter_start)

    @settles
    def set_name(self, name: str, now: float) -> None:
        """Change our display name (``""``: none): every group we are in hears it in a
        status soon (docs/group.md, "Display names")."""
        name = check_name(name)
        if name == self.name:
            return
        self.now = now
        self.name = name
        for inst in self.groups.values():
            if not inst.lingering:
                inst.renamed(now)

    def is_keyed(self, gid: str) -> bool:
        """True if this node holds group ``gid`` keyed (its messages are authenticated)."""
        row = self.gjlp.giit.get(gid)
        return row.keyed if row is not None else self.keyring.has(gid)

    @settles
    def create_group(self, desc: str, now: float, order: Order = Order.SB,
                     gid: str | None = None, *, key: GroupSecret | None = None,
                     counter_start: int | None = None) -> str:
        """CreateGroup: a new group with a unique id ``<pid>/<n>`` (or the given id),
        keyed if ``key`` is given (or was given with :meth:`set_key`)."""
        self.now = now
        order = group_order(order)  # checked: a caller not type-checked may pass any string
        if gid is None:
            gid = self.new_group_id()
        if gid in self.gjlp.giit and self.gjlp.giit[gid].state == MEMBER:
            raise UsageError(f"already a member of group {gid!r}")
        if key is not None:
            self.set_key(gid, key, counter_start)
        row = self.gjlp.row(gid, desc, order, keyed=self.keyring.has(gid))
        row.desc, row.order = desc, order
        self.store.set_meta(MADE_META + gid, "1")  # re-announced when we are back in range
        self._join(row, now, creating=True)
        self.emit(GroupCreated(gid, desc, order))
        self.send_body(DISCOVERY_TAG, GrpsInfo(self.pid, (row.announcement(),)))
        self.gjlp.announce_later(gid, now)  # and again, in case that datagram was lost
        return gid

    @settles
    def join_group(self, gid: str, now: float, order: Order | None = None,
                   desc: str | None = None, *, key: GroupSecret | None = None,
                   counter_start: int | None = None) -> None:
        """joinThisGroup: join a discovered group, or a named one (``order`` needed
        if the group was never heard of; it defaults to S_b). ``key``: the group's
        key (as :meth:`set_key`); a group known to be keyed cannot be joined without
        one (:class:`~m2mc.security.errors.KeyRequiredError`)."""
        self.now = now
        if order is not None:
            order = group_order(order)
        if order is None and gid not in self.gjlp.giit and gid not in self.gjlp.discovered:
            raise UsageError(f"group {gid!r} is unknown here: wait until it is discovered, "
                             "or give its order to join it by name")
        if key is not None:
            self.set_key(gid, key, counter_start)
        keyed = self.keyring.has(gid)
        known = self.gjlp.giit.get(gid) or self.gjlp.discovered.get(gid)
        if not keyed and (gid in self.locked or (known is not None and known.keyed)):
            raise KeyRequiredError(f"group {gid!r} is keyed: joining it takes its key "
                                   "(key, key_file or passphrase)")
        row = self.gjlp.row(gid, desc or gid, order or Order.SB, keyed=keyed)
        if row.state == MEMBER and gid in self.groups:
            return
        if not row.membership.current() and order is not None:
            row.order = order
        self._join(row, now, creating=False)

    def send(self, gid: str, payload: bytes, now: float,
             reply_to: MessageId | str | None = None) -> MessageId:
        """receiveMsgfrmAppl: send ``payload`` to the group, in reply to ``reply_to``
        (the S_b parent; None or ROOT for a message that answers nothing). A message of
        any size goes as a stream instead (``streams``, docs/group.md section 12).
        Not settled: an S_b group's send is taken in with the next ones
        (:mod:`~m2mc.group.node_send`)."""
        if payload.startswith(STREAM_MAGIC):
            raise UsageError("a payload may not start with the stream head's marker")
        self.now = now
        self.send_room -= 1
        return self._send_data(gid, payload, now, reply_to, True)

    def send_head(self, gid: str, payload: bytes, now: float,
                  reply_to: MessageId | str | None) -> MessageId:
        """A stream's head (``streams``): taken in at once, and its batch sent, so that
        it leaves before the stream's first chunk."""
        self.now = now
        self.send_room = 0  # (what follows a head is not counted: backlog.send_room)
        mid = self._send_data(gid, payload, now, reply_to)
        self.output.flush_group(self.groups[gid])
        return mid

    def settle_sends(self) -> None:
        """Take in the messages sent since the last time (:mod:`~m2mc.group.node_send`)."""
        self.sender.settle_sends()

    @settles
    def take_save(self, now: float) -> Save[float]:
        """What the driver must make durable before the datagrams it took leave: the
        store's writes so far (committed at ``now``, which also runs its age eviction)
        and the trace events they make true, written after the commit."""
        return self.output.take_save(now)

    @settles
    def reject_group(self, gid: str) -> None:
        """rejectGrp: do not offer this group again (until we advertise)."""
        self.gjlp.reject(gid)

    @settles
    def leave_group(self, gid: str, now: float) -> None:
        """leaveThisGroup: leaveMsg, then keep answering repairs for ``leave_linger``."""
        self.now = now
        inst = self.groups.get(gid)
        if inst is None or inst.lingering:
            raise UsageError(f"not a member of group {gid!r}")
        row = inst.row
        inst.ordering.hand_over_for_leave(now)
        self.output.flush_group(inst)
        self._next_version(row)
        row.state = LEFT
        row.membership.apply(MemberEntry(self.pid, row.my_version, False))
        self.save_row(row)
        self.send_body(inst.tag, Leave(self.pid, row.my_version))
        self.trace("leave", gid)
        inst.start_leave(now)

    @settles
    def events(self) -> list[GroupEvent]:
        return self.output.take_events()

    # ---------------------------------------------------------------- queries
    def is_member(self, gid: str) -> bool:
        inst = self.groups.get(gid)
        return inst is not None and not inst.lingering

    def members(self, gid: str) -> list[str]:
        row = self.gjlp.giit.get(gid)
        return row.membership.current() if row is not None else []

    def member_names(self, gid: str) -> dict[str, str]:
        """pid -> display name of the current members of ``gid`` that have one (ours
        included); a group not joined: those its discovery replies told."""
        row = self.gjlp.giit.get(gid)
        if row is not None:
            return dict(row.names.of(row.membership.current()))
        info = self.gjlp.discovered.get(gid)
        return dict(info.names) if info is not None else {}

    def group_info(self, gid: str) -> GrpInfo | None:
        row = self.gjlp.giit.get(gid)
        if row is not None:
            return row.info()
        return self.gjlp.discovered.get(gid)

    def discovered(self) -> list[GrpInfo]:
        return list(self.gjlp.discovered.values())

    @settles
    def group_stats(self, gid: str) -> dict[str, int]:
        """Counters of one group's repair, MSP and ordering core (for tests and benches)."""
        inst = self.groups.get(gid)
        return {} if inst is None else group_counters(inst, self.keyring.by_tag.get(inst.tag))

    @settles
    def node_stats(self) -> dict[str, int]:
        return node_counters(self)

    def fit_window(self, receive_buffer: int) -> None:
        """The channel's socket buffer holds ``receive_buffer`` bytes, in the kernel's
        count (overheads included): keep each group's send window to half of it, so
        that a window of packets fits a receiver whose buffer is like ours
        (group/window.py; a host at Linux's default buffer gets a window of 208 KiB,
        one that grants the 4 MiB the channel asks for 4 MiB)."""
        self.window_bytes = min(self.config.send_window_bytes, max(0, receive_buffer) // 2)
        for inst in self.groups.values():
            inst.window.limit = self.window_bytes
            inst.credit.every = self.window_bytes // 4

    @property
    def send_backlog(self) -> int:
        """Packets waiting in M2MP plus unsent data records (for back-pressure)."""
        backlog = self.m2mp.queued_packets
        for g in self.groups.values():  # (a loop: a generator costs more, every send)
            backlog += g.pending_records
        return backlog

    @property
    def send_backlog_bytes(self) -> int:
        """Bytes of the packets waiting in M2MP plus the unsent data records."""
        backlog = self.m2mp.queued_bytes
        for g in self.groups.values():
            backlog += g.pending_bytes
        return backlog

    # ================================================================ SansIOStack
    def receive_datagram(self, datagram: bytes, now: float) -> None:
        self.receive_datagrams((datagram,), now)

    @settles
    def receive_datagrams(self, datagrams: Sequence[bytes], now: float) -> None:
        """Datagrams that arrived together, in order: the same as
        :meth:`receive_datagram` for each (what the group layer does with a message
        changes nothing in M2MP), with M2MP's per-call work done once."""
        self.now = now
        m2mp = self.m2mp
        m2mp.receive_datagrams(datagrams, now)
        on_message = self._on_message
        for event in m2mp.events():
            if isinstance(event, MessageReceived):
                on_message(event.payload, now)
            elif isinstance(event, MessageAbandoned):
                self.stats.abandoned += 1
                for inst in self.groups.values():
                    inst.repair.suspect(now)

    @settles
    def on_timer(self, now: float) -> None:
        self.now = now
        self.m2mp.on_timer(now)
        for event in self.m2mp.events():
            if isinstance(event, MessageAbandoned):
                self.stats.abandoned += 1
        self.reconnect.run_due(self, now)
        self.unknown.run_due(self.advertise, now)
        self.streams.on_timer(now)
        reply = self.gjlp.reply_due(now)
        if reply is not None:
            self.send_body(DISCOVERY_TAG, reply)
        for gid, inst in list(self.groups.items()):
            deadline = inst.next_deadline()
            if deadline is None or deadline > now:
                continue
            if inst.linger_over(now):
                self._drop_instance(gid)
                continue
            inst.on_timer(now)

    def next_deadline(self) -> float | None:
        best = self.m2mp.next_deadline()
        for d in (self.gjlp.next_deadline(), self.reconnect.due, self.unknown.due,
                  self.streams.next_deadline()):
            if d is not None and (best is None or d < best):
                best = d
        for inst in self.groups.values():
            d = inst.next_deadline()
            if d is not None and (best is None or d < best):
                best = d
        return best

    @settles
    def release_batches(self) -> None:
        """Before closing: the records held for batching (``batch_hold``) go with the
        next output instead of after the node has stopped."""
        for inst in self.groups.values():
            inst.release()

    @settles
    def datagrams_to_send(self, now: float) -> list[bytes]:
        """The datagrams to transmit now. Before any of them leaves the process the
        driver carries out :meth:`take_save` (commit, then trace)."""
        self.now = now
        # Adaptive batching: while M2MP holds packets back (flow control), records
        # pile up into fuller batches instead of one packet each; and a sender that
        # sends batches less than batch_hold apart holds the next one until it is
        # full or that time is up (GroupInstance.sending and held).
        idle = self.m2mp.queued_packets == 0 and not self.m2mp.flow_blocked
        flush = self.output.flush_group
        for inst in self.groups.values():
            if inst.pending_records and not inst.held(now):
                if idle:
                    inst.sending(now)
                flush(inst, force=idle)
            inst.ordering.flush(now)
        m2mp = self.m2mp
        self.output.hand_to(m2mp, now)
        return m2mp.datagrams_to_send(now)

    # ================================================================ internals
    def _join(self, row: GiitRow, now: float, creating: bool) -> None:
        secret = self.keyring.secret(row.gid)
        row.keyed = secret is not None
        self.locked.discard(row.gid)
        # Remembered (the suite, never the key) so that a restart without the key
        # keeps the group closed instead of running it open.
        self.store.set_meta(_AUTH_META + row.gid, secret.suite if secret is not None else "")
        self._next_version(row)
        row.state = MEMBER
        row.membership.apply(MemberEntry(self.pid, row.my_version, True))
        row.names.said(self.pid, self.name)
        self.save_row(row)
        old = self.groups.get(row.gid)
        if old is not None:  # rejoining while still lingering after a leave
            self._drop_instance(row.gid)
        self.trace("join", row.gid)
        inst = self._instance(row, now)
        inst.ordering.joined(now, creating, alone=row.membership.current() == [self.pid])
        self.send_body(inst.tag, Join(self.pid, row.my_version, row.order, row.desc, self.name))
        self.trace("view", row.gid, detail=view_detail(row))
        if not creating:
            inst.start_sync(now)

    def _next_version(self, row: GiitRow, above: int = 0) -> None:
        """The version of our next join or leave: above every one of ours that anyone
        may know -- the row's, the group's membership news (an earlier incarnation's),
        the one kept in the store (the GIIT forgets left groups on advertisement)."""
        own = row.membership.get(self.pid)
        stored = self.store.get_meta(_VERSION_META + row.gid)
        row.my_version = max(row.my_version, own.version if own is not None else 0,
                             int(stored) if stored and stored.isdigit() else 0, above) + 1
        self.store.set_meta(_VERSION_META + row.gid, str(row.my_version))

    def refute(self, inst: InstancePort, version: int, now: float) -> None:
        """News of us at ``version`` or later (a leave or join of an incarnation whose
        version we lost) while we are a member: join again above it, so the others'
        views, MSP and total order's configuration count us in."""
        row = inst.row
        self._next_version(row, version)
        row.membership.apply(MemberEntry(self.pid, row.my_version, True))
        self.save_row(row)
        self.stats.refuted += 1
        self.send_body(inst.tag, Join(self.pid, row.my_version, row.order, row.desc, self.name))

    def _instance(self, row: GiitRow, now: float) -> GroupInstance:
        inst = GroupInstance(self, row)
        self.groups[row.gid] = inst
        self._by_tag[inst.tag] = inst
        if self.keyring.bind(row.gid, inst.tag, self.counter_start) is not None:
            inst.batch_budget = self.keyring.batch_budget()  # (sealed: a little less room)
        self.m2mp.add_filter(filter_prefix(inst.tag))
        inst.restore(now)
        return inst

    def _drop_instance(self, gid: str) -> None:
        inst = self.groups.pop(gid)
        self._by_tag.pop(inst.tag, None)
        self.keyring.unbind(inst.tag)
        self.m2mp.remove_filter(filter_prefix(inst.tag))
