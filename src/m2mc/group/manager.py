"""The Group Manager (seeds/000 III.A.4, IX.E) as a sans-IO stack: :class:`GroupNode`.

It owns the process's M2MP layer, one :class:`~m2mc.group.gjlp.Gjlp` and, per
group joined, a :class:`~m2mc.group.instance.GroupInstance` (MOP, MSP, repair).
It routes each incoming group message by its group tag and kind, and turns
application calls (create, join, leave, send) into group messages.

Drivers call :meth:`receive_datagram`, :meth:`on_timer`, the API methods, then
take :meth:`datagrams_to_send`, carry out :meth:`take_save`
(:func:`m2mc.core.carry_out`: the store's commit, then the trace it makes true)
and only then transmit the datagrams; the application drains :meth:`events`.
The node never commits by itself: the save is the driver's to carry out
*before* any datagram leaves, so a message identity is durable before anyone
can see it.

Keyed groups (docs/security.md): every message of a group this node holds a
key for (:meth:`set_key`) is sealed in :meth:`_send`, afresh for each
transmission, and opened in :meth:`_on_message` before anything else looks at
it; a message that fails (no tag, bad tag, replay, a sender other than the one
that sealed it) is counted and dropped before any state changes. Control
messages pass a per-sender rate limiter first: ADV and GRPS_INFO the node's discovery
limiter, SYNC_REQ and NACK their group's own (after the tag, in a keyed group).
Messages claiming this node's own pid are dropped before any limiter (``own_echo``).
The core never reads a clock: the first seal counter (``counter_start``) comes
from the driver.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from m2mc.core import Save
from m2mc.errors import BufferFullError, DecodeError, UsageError
from m2mc.fastobj import fast_constructor
from m2mc.group.codec import (
    DISCOVERY_TAG,
    FLAG_AUTH,
    HEADER_SIZE,
    Adv,
    Body,
    Data,
    GrpInfo,
    GrpsInfo,
    Join,
    Kind,
    Leave,
    MemberEntry,
    Repair,
    decode_body,
    encode,
    filter_prefix,
    record_size,
    split_frame,
)
from m2mc.group.config import ORDERS, GroupConfig
from m2mc.group.events import (
    Delivered,
    DeliveredBatch,
    GroupCreated,
    GroupDiscovered,
    GroupEvent,
    MemberJoined,
    MemberLeft,
    MemberNamed,
    Reconnected,
)
from m2mc.group.gjlp import LEFT, MEMBER, GiitRow, Gjlp
from m2mc.group.instance import STATUS_KEEPALIVE, GroupInstance
from m2mc.group.membership import Membership
from m2mc.group.names import MemberNames, check_name
from m2mc.group.reconnect import INTERFACE, MADE_META, SILENCE, Reconnect
from m2mc.kinds import ReconnectReason
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.security import groupwire  # a module: groupwire imports the group codec
from m2mc.security.auth import AuthConfig, GroupAuth, overhead
from m2mc.security.errors import AuthError, KeyRequiredError
from m2mc.security.keys import GroupSecret
from m2mc.security.ratelimit import RateLimitConfig, RateLimiter, RateLimitStats
from m2mc.store import GroupRow, GroupStore, MemoryStore
from m2mc.trace.schema import NullSink, TraceEvent, TraceJournal, TraceSink, detail_json
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageAbandoned, MessageReceived
from m2mc.wire.packet import MAX_FRAGMENT


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


_make_delivered = fast_constructor(Delivered)
_make_batch = fast_constructor(DeliveredBatch)
_FLAGS_AT = HEADER_SIZE - 1  # offset of the flags byte in a group message
_TAG_AT = slice(3, 11)  # the group tag, after magic and version
_RATE_LIMITED = frozenset((int(Kind.NACK), int(Kind.SYNC_REQ), int(Kind.GONE)))  # + discovery
_VERSION_META = "ver/"  # store meta key prefix: "ver/<gid>" = our last join/leave version
_DISCOVERY_KINDS = frozenset((int(Kind.ADV), int(Kind.GRPS_INFO)))
_AUTH_META = "auth/"  # store meta key prefix: "auth/<gid>" = suite of a keyed group, or ""
# Store meta key: the trace lines of the last committed batch (docs/decisions.md, "The
# trace of a node with a durable log survives kill -9").
TRACE_JOURNAL_META = "trace/last-batch"


class GroupNode:
    """A process's whole M2MC stack over one M2MP layer (a SansIOStack)."""

    def __init__(self, pid: str, *, rng: random.Random, config: GroupConfig | None = None,
                 m2mp: M2MPLayer | None = None, m2mp_config: M2MPConfig | None = None,
                 store: GroupStore | None = None, trace: TraceSink | None = None,
                 run_id: str = "", keys: Mapping[str, GroupSecret] | None = None,
                 counter_start: int = 0, trace_journal: TraceJournal | None = None,
                 name: str = "") -> None:
        if not pid or len(pid) > 64:
            raise UsageError("a process id must be 1 to 64 characters")
        self.pid = pid
        # Our display name (m2mc.group.names): in our JOINs and STATUSes, "" for none.
        self.name = check_name(name)
        self.rng = rng
        self.config = config or GroupConfig()
        self.config.validate()
        self.m2mp = m2mp or M2MPLayer(m2mp_config, rng=random.Random(rng.getrandbits(64)))
        self.m2mp.add_filter(filter_prefix(DISCOVERY_TAG))
        self.store: GroupStore = store if store is not None else MemoryStore()
        self.store.set_retention(self.config.retention())  # docs/group.md section 8
        self.trace_sink: TraceSink = trace_journal or trace or NullSink()
        self.tracing = self.trace_sink.enabled
        # Trace events wait for the store commit (take_save, carried out by the driver):
        # a process killed before it leaves no event about a message its log does not have.
        self._trace_out: list[TraceEvent] = []
        self._journal = trace_journal if self.tracing else None
        self.run_id = run_id
        self.gjlp = Gjlp(pid, self.config, rng)
        # Coming back into range (reconnect.py): the silence that counts as "away" is
        # measured against the members' status keepalive.
        self.reconnect = Reconnect(self.config, rng,
                                   STATUS_KEEPALIVE * self.config.status_interval)
        self.groups: dict[str, GroupInstance] = {}
        self._by_tag: dict[bytes, GroupInstance] = {}
        self._events: list[GroupEvent] = []
        self._out: list[bytes] = []
        self._now = 0.0
        self.stats = NodeStats()
        self.started = False
        self.record_delivered = False  # keep delivered ids per group (simulator checks)
        # Deliveries as DeliveredBatch events (consecutive ones of a group coalesced)
        # instead of one Delivered each: for an owner that takes them by the batch.
        self.batch_deliveries = False
        self.delivered_ids: dict[str, list[MessageId]] = {}
        # Keyed groups: the keys the application gave (by group id), one GroupAuth per
        # keyed group (kept across leave and rejoin: its counter must not go back),
        # and the GroupAuth of every group instance that is keyed, by group tag.
        self.counter_start = counter_start
        self._secrets: dict[str, GroupSecret] = dict(keys or {})
        self._auths: dict[str, GroupAuth] = {}
        self._auth_by_tag: dict[bytes, GroupAuth] = {}
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

    # ================================================================ lifecycle
    def start(self, now: float) -> None:
        """Boot or reboot: reload the GIIT and every joined group from the store,
        ask the groups for what we missed (MSP) and advertise (GJLP)."""
        self._now = now
        self.started = True
        self.reconnect.started(now)
        for row in self.store.load_groups():
            giit_row = GiitRow(row.gid, row.desc, row.order, MEMBER if row.state == MEMBER
                               else LEFT, Membership(self.config.max_members, row.members),
                               row.my_version, names=MemberNames(self.config.max_members))
            if giit_row.state == MEMBER:  # names are not kept: ours now, others' as heard
                giit_row.names.said(self.pid, self.name)
            giit_row.keyed = row.gid in self._secrets or bool(
                self.store.get_meta(_AUTH_META + row.gid))
            self.gjlp.giit[row.gid] = giit_row
            if giit_row.state == MEMBER:
                if giit_row.keyed and row.gid not in self._secrets:
                    # Keyed when we were last up, and no key now: running it open would
                    # accept outsiders' messages. It waits for join_group(gid, key=...).
                    self.locked.add(row.gid)
                    continue
                inst = self._instance(giit_row, now)
                inst.start_sync(now)
        if self.config.advertise_on_start:
            self.advertise(now)

    def network_changed(self, now: float) -> None:
        """The driver's word that the network changed under us: the channel's interface
        came (back) up or got its address again, or (simulator) the node regained
        coverage. The node is taken to be back in range (docs/group.md section 4): it
        advertises, re-announces the groups it created and runs MSP for every group."""
        self._now = now
        self._back(now, INTERFACE, None)

    def _back(self, now: float, reason: ReconnectReason, silent_for: float | None) -> None:
        if self.started and self.reconnect.back(now, reason):
            self._event(Reconnected(reason, silent_for))

    def _heard_again(self, now: float) -> None:
        """A message of another process after ``reconnect.silence`` or more of hearing
        nobody: "back" if we are in a group with others, whose keepalives we missed."""
        silent_for = self.reconnect.heard(now)
        if silent_for is not None and any(
                len(inst.row.membership.current()) > 1 for inst in self.groups.values()
                if not inst.lingering):
            self._back(now, SILENCE, silent_for)

    # ================================================================ app API
    def advertise(self, now: float) -> None:
        """sendAdvMsg: announce ourselves; every group we may join gets offered."""
        self._now = now
        self._send(DISCOVERY_TAG, self.gjlp.advertise())

    def new_group_id(self) -> str:
        """A fresh group id ``<pid>/<n>`` (what :meth:`create_group` uses when given none;
        a driver that must derive a key from the id takes one first)."""
        n = int(self.store.get_meta("grp_seqno") or 0) + 1
        self.store.set_meta("grp_seqno", str(n))
        return f"{self.pid}/{n}"

    def set_key(self, gid: str, secret: GroupSecret | None,
                counter_start: int | None = None) -> None:
        """Give (or with None, take back) the key of group ``gid`` before creating or
        joining it: a keyed group's messages are sealed and only sealed ones accepted.

        ``counter_start``: the first seal counter (a driver passes ``counter_start_at``
        of the wall-clock seconds it read; default the node's ``counter_start``).
        A key cannot change while the node is a member (UsageError): leave first.
        """
        current = self._secrets.get(gid)
        if current == secret:
            return
        if self.is_member(gid):
            raise UsageError(f"cannot change the key of group {gid!r} while a member")
        if gid in self.groups:  # lingering after a leave: stop sealing with the old key
            self._drop_instance(gid)
        old = self._auths.pop(gid, None)
        if secret is None:
            self._secrets.pop(gid, None)
            return
        self._secrets[gid] = secret
        start = self.counter_start if counter_start is None else counter_start
        if old is not None:  # the same sender id must never reuse a counter under a key
            start = max(start, old.next_counter)
        self._auths[gid] = self._new_auth(gid, secret, start)

    def set_name(self, name: str, now: float) -> None:
        """Change our display name (``""``: none): every group we are in hears it in a
        status soon (docs/group.md, "Display names")."""
        name = check_name(name)
        if name == self.name:
            return
        self._now = now
        self.name = name
        for inst in self.groups.values():
            if not inst.lingering:
                inst.renamed(now)

    def is_keyed(self, gid: str) -> bool:
        """True if this node holds group ``gid`` keyed (its messages are authenticated)."""
        row = self.gjlp.giit.get(gid)
        return row.keyed if row is not None else gid in self._secrets

    def create_group(self, desc: str, now: float, order: str = "sb",
                     gid: str | None = None, *, key: GroupSecret | None = None,
                     counter_start: int | None = None) -> str:
        """CreateGroup: a new group with a unique id ``<pid>/<n>`` (or the given id),
        keyed if ``key`` is given (or was given with :meth:`set_key`)."""
        self._now = now
        if order not in ORDERS:
            raise UsageError(f"unknown order {order!r}; expected one of {', '.join(ORDERS)}")
        if gid is None:
            gid = self.new_group_id()
        if gid in self.gjlp.giit and self.gjlp.giit[gid].state == MEMBER:
            raise UsageError(f"already a member of group {gid!r}")
        if key is not None:
            self.set_key(gid, key, counter_start)
        row = self.gjlp.row(gid, desc, order, keyed=gid in self._secrets)
        row.desc, row.order = desc, order
        self.store.set_meta(MADE_META + gid, "1")  # re-announced when we are back in range
        self._join(row, now, creating=True)
        self._event(GroupCreated(gid, desc, order))
        self._send(DISCOVERY_TAG, GrpsInfo(self.pid, (row.announcement(),)))
        self.gjlp.announce_later(gid, now)  # and again, in case that datagram was lost
        return gid

    def join_group(self, gid: str, now: float, order: str | None = None,
                   desc: str | None = None, *, key: GroupSecret | None = None,
                   counter_start: int | None = None) -> None:
        """joinThisGroup: join a discovered group, or a named one (``order`` needed
        if the group was never heard of; it defaults to S_b). ``key``: the group's
        key (as :meth:`set_key`); a group known to be keyed cannot be joined without
        one (:class:`~m2mc.security.errors.KeyRequiredError`)."""
        self._now = now
        if order is not None and order not in ORDERS:
            raise UsageError(f"unknown order {order!r}; expected one of {', '.join(ORDERS)}")
        if order is None and gid not in self.gjlp.giit and gid not in self.gjlp.discovered:
            raise UsageError(f"group {gid!r} is unknown here: wait until it is discovered, "
                             "or give its order to join it by name")
        if key is not None:
            self.set_key(gid, key, counter_start)
        keyed = gid in self._secrets
        known = self.gjlp.giit.get(gid) or self.gjlp.discovered.get(gid)
        if not keyed and (gid in self.locked or (known is not None and known.keyed)):
            raise KeyRequiredError(f"group {gid!r} is keyed: joining it takes its key "
                                   "(key, key_file or passphrase)")
        row = self.gjlp.row(gid, desc or gid, order or "sb", keyed=keyed)
        if row.state == MEMBER and gid in self.groups:
            return
        if not row.membership.current() and order is not None:
            row.order = order
        self._join(row, now, creating=False)

    def reject_group(self, gid: str) -> None:
        """rejectGrp: do not offer this group again (until we advertise)."""
        self.gjlp.reject(gid)

    def leave_group(self, gid: str, now: float) -> None:
        """leaveThisGroup: leaveMsg, then keep answering repairs for ``leave_linger``."""
        self._now = now
        inst = self.groups.get(gid)
        if inst is None or inst.lingering:
            raise UsageError(f"not a member of group {gid!r}")
        row = inst.row
        inst.hand_over_for_leave(now)
        self._flush_group(inst)
        self._next_version(row)
        row.state = LEFT
        row.membership.apply(MemberEntry(self.pid, row.my_version, False))
        self._save_row(row)
        self._send(inst.tag, Leave(self.pid, row.my_version))
        self._trace("leave", gid)
        inst.start_leave(now)

    def send(self, gid: str, payload: bytes, now: float,
             reply_to: MessageId | str | None = None) -> MessageId:
        """receiveMsgfrmAppl: send ``payload`` to the group, in reply to ``reply_to``
        (the S_b parent; None or ROOT for a message that answers nothing)."""
        self._now = now
        inst = self.groups.get(gid)
        if inst is None or inst.lingering_until is not None:
            raise UsageError(f"not a member of group {gid!r}")
        if len(payload) > self.config.max_payload:
            raise UsageError(f"payload of {len(payload)} bytes exceeds {self.config.max_payload}")
        if type(payload) is not bytes:
            payload = bytes(payload)
        if inst.order == "total" and len(inst.mop.unstamped) >= self.config.max_unstamped:
            raise BufferFullError(f"group {gid!r}: {len(inst.mop.unstamped)} messages wait for "
                                  "the total order (no majority of the group is reachable)")
        if reply_to is None:
            parent = ROOT
        elif isinstance(reply_to, str):
            parent = MessageId.parse(reply_to)
        else:
            parent = reply_to
        message = inst.mop.next_message(payload, parent)
        self.stats.sent += 1
        inst.bulk = self.m2mp.queued_packets + inst.pending_records >= self.config.bulk_backlog
        tracing = self.tracing
        if tracing:
            self._trace("send", gid, message)
        _, out = inst.mop.accept(message)
        if tracing:
            self._trace("recv", gid, message, peer=self.pid)
        if out:
            inst.delivered_count += len(out)
            if tracing:
                for m in out:
                    self._delivered(gid, m)
            else:
                self._delivered_many(gid, out)
        inst.queue_data(message, now)
        return message.mid

    def events(self) -> list[GroupEvent]:
        events, self._events = self._events, []
        return events

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

    def group_stats(self, gid: str) -> dict[str, int]:
        """Counters of one group's repair, MSP and ordering core (for tests and benches)."""
        inst = self.groups.get(gid)
        if inst is None:
            return {}
        out: dict[str, int] = {}
        for stats in ((inst.repair.stats, inst.msp.stats, inst.retention.stats, inst.mop.log.stats)
                      if inst.order == "total" else
                      (inst.repair.stats, inst.msp.stats, inst.retention.stats)):
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
        auth = self._auth_by_tag.get(inst.tag)
        if auth is not None:
            out.update({f"auth_{name}": value for name, value in auth.stats.as_dict().items()})
        return out

    def node_stats(self) -> dict[str, int]:
        out = {name: getattr(self.stats, name) for name in self.stats.__dataclass_fields__
               if isinstance(getattr(self.stats, name), int)}
        out["delivered"] = sum(inst.delivered_count for inst in self.groups.values())
        for name in self.gjlp.stats.__dataclass_fields__:
            value = getattr(self.gjlp.stats, name)
            if isinstance(value, int):
                out[f"gjlp_{name}"] = value
        rc = self.reconnect.stats
        out.update({name: getattr(rc, name) for name in rc.__dataclass_fields__})
        disc, ctrl = self.discovery_limits, self.control_limits
        out["rate_limited_sender"] = disc.limited + ctrl.limited
        out["rate_limited_total"] = disc.limited_total + ctrl.limited_total
        out["rate_limited_discovery"] = disc.limited + disc.limited_total
        out["rate_limited_control"] = ctrl.limited + ctrl.limited_total
        return out

    @property
    def send_backlog(self) -> int:
        """Packets waiting in M2MP plus unsent data records (for back-pressure)."""
        backlog = self.m2mp.queued_packets
        for g in self.groups.values():  # (a loop: a generator costs more, every send)
            backlog += g.pending_records
        return backlog

    # ================================================================ SansIOStack
    def receive_datagram(self, datagram: bytes, now: float) -> None:
        self.receive_datagrams((datagram,), now)

    def receive_datagrams(self, datagrams: Sequence[bytes], now: float) -> None:
        """Datagrams that arrived together, in order: the same as
        :meth:`receive_datagram` for each (what the group layer does with a message
        changes nothing in M2MP), with M2MP's per-call work done once."""
        self._now = now
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

    def on_timer(self, now: float) -> None:
        self._now = now
        self.m2mp.on_timer(now)
        for event in self.m2mp.events():
            if isinstance(event, MessageAbandoned):
                self.stats.abandoned += 1
        self.reconnect.run_due(self, now)
        reply = self.gjlp.reply_due(now)
        if reply is not None:
            self._send(DISCOVERY_TAG, reply)
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
        for d in (self.gjlp.next_deadline(), self.reconnect.due):
            if d is not None and (best is None or d < best):
                best = d
        for inst in self.groups.values():
            d = inst.next_deadline()
            if d is not None and (best is None or d < best):
                best = d
        return best

    def datagrams_to_send(self, now: float) -> list[bytes]:
        """The datagrams to transmit now. Before any of them leaves the process the
        driver carries out :meth:`take_save` (commit, then trace)."""
        self._now = now
        # Adaptive batching: while M2MP holds packets back (flow control), records
        # pile up into fuller batches instead of one packet each.
        idle = self.m2mp.queued_packets == 0 and not self.m2mp.flow_blocked
        for inst in self.groups.values():
            if inst.pending_records:
                self._flush_group(inst, force=idle)
            if inst.order == "total":
                inst.flush_log(now)
        m2mp = self.m2mp
        out = self._out
        if out:
            for message in out:
                m2mp.send(message, now)
            out.clear()
        return m2mp.datagrams_to_send(now)

    def take_save(self, now: float) -> Save[float]:
        """What the driver must make durable before the datagrams it took leave: the
        store's writes so far (committed at ``now``, which also runs its age eviction)
        and the trace events they make true, written after the commit."""
        events = self._trace_out
        if not events:
            return Save(now)
        self._trace_out = []
        journal = self._journal
        if journal is None:
            return Save(now, trace_events=events)
        # With a journal the batch's lines go into the same commit, so the next
        # incarnation can put back what a kill -9 right after the commit cut off.
        batch = journal.render(events)
        self.store.set_meta(TRACE_JOURNAL_META, batch)
        return Save(now, trace_text=batch)

    # ================================================================ internals
    def _join(self, row: GiitRow, now: float, creating: bool) -> None:
        secret = self._secrets.get(row.gid)
        row.keyed = secret is not None
        self.locked.discard(row.gid)
        # Remembered (the suite, never the key) so that a restart without the key
        # keeps the group closed instead of running it open.
        self.store.set_meta(_AUTH_META + row.gid, secret.suite if secret is not None else "")
        self._next_version(row)
        row.state = MEMBER
        row.membership.apply(MemberEntry(self.pid, row.my_version, True))
        row.names.said(self.pid, self.name)
        self._save_row(row)
        old = self.groups.get(row.gid)
        if old is not None:  # rejoining while still lingering after a leave
            self._drop_instance(row.gid)
        self._trace("join", row.gid)
        inst = self._instance(row, now)
        if row.order == "total":
            if creating:
                inst.found(now)
            else:  # joined by name, nobody else known: the lowest member founds its log
                inst.mop.log.may_found = row.membership.current() == [self.pid]
        self._send(inst.tag, Join(self.pid, row.my_version, row.order, row.desc, self.name))
        self._trace("view", row.gid, detail=_view(row))
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

    def refute(self, inst: GroupInstance, version: int, now: float) -> None:
        """News of us at ``version`` or later (a leave or join of an incarnation whose
        version we lost) while we are a member: join again above it, so the others'
        views, MSP and total order's configuration count us in."""
        row = inst.row
        self._next_version(row, version)
        row.membership.apply(MemberEntry(self.pid, row.my_version, True))
        self._save_row(row)
        self.stats.refuted += 1
        self._send(inst.tag, Join(self.pid, row.my_version, row.order, row.desc, self.name))

    def _instance(self, row: GiitRow, now: float) -> GroupInstance:
        inst = GroupInstance(self, row)
        self.groups[row.gid] = inst
        self._by_tag[inst.tag] = inst
        secret = self._secrets.get(row.gid)
        if secret is not None:
            auth = self._auths.get(row.gid)
            if auth is None:
                auth = self._auths[row.gid] = self._new_auth(row.gid, secret, self.counter_start)
            self._auth_by_tag[inst.tag] = auth
            # Sealing adds overhead(pid) bytes, and a batch must still fit one M2MP packet.
            # The room is counted exactly here (the plain budget keeps a byte or two of
            # slack that, at small payloads, would cost a keyed batch one record).
            inst.batch_budget = max(64, min(self.config.batch_bytes,
                                            _batch_room(self.pid) - overhead(self.pid)))
        self.m2mp.add_filter(filter_prefix(inst.tag))
        inst.restore(now)
        return inst

    def _new_auth(self, gid: str, secret: GroupSecret, counter_start: int) -> GroupAuth:
        cfg = self.config
        return GroupAuth(gid, {secret.key_id: secret.key}, self.pid,
                         config=AuthConfig(secret.suite, cfg.replay_window, cfg.max_senders),
                         send_key_id=secret.key_id, counter_start=counter_start)

    def _drop_instance(self, gid: str) -> None:
        inst = self.groups.pop(gid)
        self._by_tag.pop(inst.tag, None)
        self._auth_by_tag.pop(inst.tag, None)
        self.m2mp.remove_filter(filter_prefix(inst.tag))

    def _on_message(self, payload: bytes, now: float) -> None:
        stats = self.stats
        if len(payload) > self.config.max_message_bytes:
            stats.oversized += 1
            return
        sealed_by: str | None = None  # the authenticated sender of a keyed group's message
        by_tag = self._auth_by_tag
        if len(payload) > _FLAGS_AT and payload[_FLAGS_AT] & FLAG_AUTH:
            auth = by_tag.get(payload[_TAG_AT])
            if auth is None:  # an open group of ours, discovery, or a group we are not in
                if payload[_TAG_AT] in self._by_tag or payload[_TAG_AT] == DISCOVERY_TAG:
                    stats.sealed_refused += 1
                else:
                    stats.unknown_group += 1
                return
            try:
                frame, sealed_by = groupwire.open_frame(auth, payload)
            except AuthError:
                stats.auth_failed += 1
                return
            except DecodeError:
                stats.malformed += 1
                return
        else:
            try:
                frame = split_frame(payload)
            except DecodeError:
                stats.malformed += 1
                return
            if by_tag and frame.tag in by_tag:  # a keyed group: a message without a tag
                with contextlib.suppress(AuthError):
                    by_tag[frame.tag].unauthenticated()  # counts it in the group's stats
                stats.auth_failed += 1
                return
        if frame.tag == DISCOVERY_TAG:
            if frame.kind not in (Kind.ADV, Kind.GRPS_INFO):
                stats.wrong_kind += 1
                return
            try:
                body = decode_body(frame.kind, frame.body, max_seq=self.config.max_seq)
            except DecodeError:
                stats.malformed += 1
                return
            if body.sender == self.pid:  # our own (or a forgery of it): nothing to do
                stats.own_echo += 1
                return
            if not self.discovery_limiter.allow(body.sender, now):
                stats.rate_limited += 1
                return
            if now - self.reconnect.heard_at > self.reconnect.silence:
                self._heard_again(now)
            self.reconnect.heard_at = now
            self._on_discovery(body, now)
            return
        inst = self._by_tag.get(frame.tag)
        if inst is None:
            stats.unknown_group += 1
            return
        kind = frame.kind
        if kind in _DISCOVERY_KINDS:
            stats.wrong_kind += 1
            return
        try:
            body = decode_body(kind, frame.body, max_seq=self.config.max_seq)
        except DecodeError:
            stats.malformed += 1
            return
        if sealed_by is not None and body.sender != sealed_by:
            stats.sender_mismatch += 1
            return
        if body.sender == self.pid:  # our own (or a forgery of it): never processed
            stats.own_echo += 1
            return
        # After authentication (a keyed group's sender is the sealing one), in the
        # group's own limiter: neither discovery nor another group spends its tokens.
        if kind in _RATE_LIMITED and not inst.limiter.allow(body.sender, now):
            stats.rate_limited += 1
            return
        reconnect = self.reconnect
        if now - reconnect.heard_at > reconnect.silence:
            self._heard_again(now)
        reconnect.heard_at = now
        inst.on_body(body, now)

    def _on_discovery(self, body: Body, now: float) -> None:
        if isinstance(body, Adv):
            self.reconnect.overheard_adv(now)
            self.gjlp.on_adv(body, now)
        elif isinstance(body, GrpsInfo):
            if body.sender == self.pid:
                return
            self.reconnect.overheard_reply()
            new, changed, renamed = self.gjlp.on_grps_info(body)
            for info in new:
                self._event(GroupDiscovered(info))
            announced: set[tuple[str, str]] = set()
            for gid, entries in changed:
                inst = self.groups.get(gid)
                if inst is not None:  # GJLP merged the entries into the row already
                    self._save_row(inst.row)
                    for e in entries:
                        if e.pid == self.pid:
                            continue
                        if e.joined:
                            announced.add((gid, e.pid))
                            self._event(MemberJoined(gid, e.pid, inst.row.names.get(e.pid)))
                        else:
                            self._event(MemberLeft(gid, e.pid))
                    self._trace("view", gid, detail=_view(inst.row))
            for gid, pid in renamed:
                inst = self.groups.get(gid)
                if inst is not None and (gid, pid) not in announced:
                    self._event(MemberNamed(gid, pid, inst.row.names.get(pid)))

    def _flush_group(self, inst: GroupInstance, force: bool = True) -> None:
        for batch in inst.take_batches(force):
            self._send(inst.tag, Data(self.pid, batch))

    def _send_repairs(self, inst: GroupInstance, messages: list[Message]) -> None:
        # One M2MP packet per REPAIR, as a DATA batch: M2MP loses a message whole when
        # any of its packets is lost, and repairs are what a lossy network needs, so a
        # lost packet costs only its own records (docs/decisions.md).
        batch: list[Message] = []
        size = 0
        budget = inst.batch_budget
        for m in messages:
            if self.tracing:
                self._trace("retransmit", inst.gid, m)
            s = record_size(m)
            if batch and size + s > budget:
                self._send(inst.tag, Repair(self.pid, batch))
                batch, size = [], 0
            batch.append(m)
            size += s
        if batch:
            self._send(inst.tag, Repair(self.pid, batch))

    def _send(self, tag: bytes, body: Body) -> None:
        frame = encode(tag, body)
        auth = self._auth_by_tag.get(tag)
        # A keyed group's message is sealed here, once per transmission: a repair is a
        # new message with a new counter, never a byte copy receivers would refuse.
        self._out.append(frame if auth is None else groupwire.seal_frame(auth, frame))

    def _delivered(self, gid: str, m: Message) -> None:
        if self.tracing:
            self._trace("deliver", gid, m)
        if self.record_delivered:
            self.delivered_ids.setdefault(gid, []).append(m.mid)
        if self.batch_deliveries:
            self._batch(gid, [m])
        else:
            self._events.append(_make_delivered(gid, m))

    def _delivered_many(self, gid: str, messages: list[Message]) -> None:
        """Deliver ``messages`` (a list the caller gives up) of ``gid``, in order: the
        hot paths of a node that is not tracing. (A tracing node goes message by
        message through :meth:`_delivered`: its trace interleaves each ``deliver``
        with the ``recv`` that caused it.)"""
        if self.record_delivered:
            self.delivered_ids.setdefault(gid, []).extend([m.mid for m in messages])
        events = self._events
        if self.batch_deliveries:
            if events:  # (_batch, inline: this runs for every message sent)
                last = events[-1]
                if type(last) is DeliveredBatch and last.gid == gid:
                    last.messages.extend(messages)
                    return
            events.append(_make_batch(gid, messages))
        else:
            events.extend([_make_delivered(gid, m) for m in messages])

    def _batch(self, gid: str, messages: list[Message]) -> None:
        """Append to the pending DeliveredBatch of ``gid`` if it is the last event (no
        other event may come between two messages), else start one with ``messages``."""
        events = self._events
        if events:
            last = events[-1]
            if type(last) is DeliveredBatch and last.gid == gid:
                last.messages.extend(messages)
                return
        events.append(_make_batch(gid, messages))

    def _event(self, event: GroupEvent) -> None:
        self._events.append(event)

    def _save_row(self, row: GiitRow) -> None:
        self.store.save_group(GroupRow(row.gid, row.desc, row.order, row.state, row.my_version,
                                       list(row.membership.entries())))

    def _trace(self, event: str, gid: str | None, m: Message | None = None, *,
               peer: str | None = None, detail: str | None = None) -> None:
        if not self.tracing:
            return
        order = None
        if gid is not None:
            row = self.gjlp.giit.get(gid)
            order = row.order if row is not None else None
        if m is not None:
            vdetail = detail
            if m.vclock is not None and detail is None and event in ("send", "deliver"):
                vdetail = detail_json(vclock=dict(sorted(m.vclock.items())))
            self._trace_out.append(TraceEvent(
                self.run_id, self.pid, self._now, event, gid, str(m.mid), str(m.parent), order,
                m.gseq if order == "total" else None, len(m.payload), peer, vdetail))
        else:
            self._trace_out.append(TraceEvent(self.run_id, self.pid, self._now, event, gid,
                                            order=order, peer=peer, detail=detail))


def _batch_room(pid: str) -> int:
    """Bytes of data records that fit one M2MP packet in a DATA message of ``pid``:
    the fragment less the group header, the body's 2-array, the sender string and
    the records array's header (3 bytes: up to 65535 records)."""
    size = len(pid.encode())
    return MAX_FRAGMENT - HEADER_SIZE - 1 - (1 if size < 32 else 2) - size - 3


def _view(row: GiitRow) -> str:
    return detail_json(members=row.membership.current())
