"""The gateway G of seeds/001 3.2 (figure 5), one per host; its cell is the host's
local multicast (seeds/004 3.1).

State: ``local`` and ``local-m`` from beaconing (2.4, B1-B3), ``first``/``last``
(the replica's rows, :mod:`.state`), the norm-cache (the replica log) and
``trans``. It relays committed multicasts to its cell, acknowledges every uplink
frame (A2), handles NACKs itself and forwards everything else to the coordinator
(A4) through an :class:`~m2mc.infra.reliable.Outbox`.

Departures from the pseudo-code, each in docs/decisions.md:

* ``trans[mid]`` remembers the ``s1`` of the NACK that started the transfer, so
  that a repeated identical NACK passes the check of line 13 as footnote 3 wants.
* A computer's greeting names its member identifier from the moment it sends
  JOIN, so a gateway allocates ``local-m`` for a joining computer and (4.1)
  subscribes before its "has joined" is sequenced.
* A greeting's ``mystable`` (footnote 4) starts a transfer of the member's own
  "has joined" or "has left" when the member cannot otherwise learn of it (4.1,
  4.3: skipped or not relayed here); with 4.1 the beacons' ``high`` covers what was
  sequenced while the cell was out of the subscr-set.

Against outsiders (docs/security.md): ``local`` holds at most ``max_local``
computers (greetings of further ones are ignored until some go silent); JOINs,
NACKs and arrivals (a greeting that brings a new computer or member id: a
handoff; any frame of a known computer from a new address, where its answers then
go) pass a per-computer token bucket (``control_rate``/``control_burst``, and
``control_total_*`` for all together) before any work is done; a refused one is
not acknowledged, so a real member's retry brings it back. STABINFO is reported
only for members of the replica's tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from m2mc.infra import history
from m2mc.infra import messages as msg
from m2mc.infra.codec import record_size
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import NO_EPOCH, Epoch, MemberId
from m2mc.infra.reliable import Outbox
from m2mc.infra.replog import ReplicaLog
from m2mc.security.ratelimit import RateLimitConfig, RateLimiter

CellOut = tuple[str | None, msg.DownlinkMessage]  # (member address or None: broadcast)


@dataclass(slots=True)
class _Local:
    addr: str
    heard: float
    mid: MemberId | None = None
    mystable: int = 0


@dataclass(slots=True)
class _Transfer:
    """A running StateTransfer(gm, low, high) (figure 5 lines 20-32)."""

    low: int  # s1 of the NACK that started it (the check of line 13)
    num: int  # next sequence number to send
    high: int  # stop before this one
    addr: str
    fetch_at: float = -1e9  # when we last asked the coordinator for missing copies


@dataclass(slots=True)
class GatewayStats:
    relayed: int = 0
    transferred: int = 0
    nacks: int = 0
    nacks_discarded: int = 0
    forwarded: int = 0
    refused_full: int = 0
    aborted: int = 0
    beacons: int = 0
    moved: int = 0
    rate_limited: int = 0  # JOINs, NACKs and arrivals refused by the rate limiter
    local_refused: int = 0  # greetings of new computers while `local` was full
    history_served: int = 0  # history answers sent to members (ours or the master's)
    history_refused: int = 0  # history requests of non-members, or for others' groups
    history_asked: int = 0  # requests passed to the master (its log reaches further)
    readdressed: int = 0  # computers heard from a new address (their answers follow)


@dataclass(slots=True)
class _Pending:
    records: list[msg.Record] = field(default_factory=list)
    size: int = 0


class Gateway:
    def __init__(self, host: str, cfg: InfraConfig, log: ReplicaLog, uplink: str = "") -> None:
        self.host = host
        self.cfg = cfg
        self.log = log
        self.uplink = uplink
        self.master = ""
        self.epoch: Epoch = NO_EPOCH  # epoch of the coordinator we forward to
        self.commit = 0  # commit point known in that epoch
        self.stable = 0  # every member delivered every multicast up to this one
        self.directory: tuple[msg.CellInfo, ...] = ()
        self.local: dict[str, _Local] = {}
        self.local_m: dict[MemberId, str] = {}  # mid -> node
        self.trans: dict[MemberId, _Transfer] = {}
        self.outbox = Outbox(cfg.max_forward_queue, cfg.forward_retry)
        self.subscribed = not cfg.subscribe  # 4.1: without it every gateway gets everything
        self.sub_requested = False
        self._sub_wait: float | None = None  # 4.1: since when we wait for the SUBSCOK
        self.relay_high = 0  # highest gseq relayed in the cell
        self.stats = GatewayStats()
        self.cell_out: list[CellOut] = []
        self.to_coord: list[msg.BackboneMessage] = []
        self._normals = _Pending()
        self._stabinfo: dict[MemberId, int] = {}
        self._reported: dict[MemberId, int] = {}
        self._fetched: dict[int, msg.Record] = {}
        self._next_beacon = 0.0
        self._next_stabinfo = 0.0
        self._next_sweep = 0.0
        # What the log frees stays here, in memory, for the retention (a durable host's
        # store takes over at restore: docs/infra.md, "History").
        log.history = history.MemoryHistory(cfg.memory_history_bytes, cfg.retention_age)
        self.limiter = RateLimiter(RateLimitConfig(
            cfg.control_rate, cfg.control_burst, cfg.control_total_rate,
            cfg.control_total_burst, cfg.control_max_senders))

    # =============================================================== uplink
    def on_uplink(self, src: str, m: msg.UplinkMessage, now: float) -> None:
        if m.host != self.host:
            return  # meant for the gateway of another cell (B3)
        known = self.local.get(m.node)
        if known is None and len(self.local) >= self.cfg.max_local:
            self.stats.local_refused += 1
            return
        if self._costly(m, known, src) and not self.limiter.allow(m.node, now):
            self.stats.rate_limited += 1  # no ack: a real member tries again
            return
        loc = self._greet(src, m.node, now)
        if isinstance(m, msg.Hello):
            if m.mid is not None and m.member and self._gone(m.mid, m.mystable):
                self.cell_out.append((src, msg.NotMember(self.host, m.mid)))
                return
            self._set_mid(m.node, loc, m.mid)
            if m.mid is not None and m.mystable > loc.mystable \
                    and m.mid in self.log.state.rows:
                loc.mystable = m.mystable
                self._stabinfo[m.mid] = m.mystable
            if m.mid is not None:
                self._own_change(m, src)
            return
        if isinstance(m, msg.NackReq):
            self._set_mid(m.node, loc, m.mid)
            self.cell_out.append((src, msg.Ack(self.host, m.node, m.rseq)))  # A2
            self._on_nack(m, src)
            return
        if isinstance(m, msg.HistoryReq):
            self._on_history(m, src)
            return
        if isinstance(m, msg.JoinReq | msg.NewReq | msg.LeaveReq):
            self._set_mid(m.node, loc, m.mid)
        fseq = self.outbox.add(m, now)
        if fseq is None:
            self.stats.refused_full += 1  # no ack: the member resends later
            return
        self.cell_out.append((src, msg.Ack(self.host, m.node, m.rseq)))  # A2
        if self.master:
            self.to_coord.append(msg.Forward(self.host, fseq, m))  # A4
            self.stats.forwarded += 1

    @staticmethod
    def _costly(m: msg.UplinkMessage, known: _Local | None, src: str) -> bool:
        """Control traffic that makes the gateway or the coordinator work: JOIN, NACK,
        an arrival (a greeting of a computer or member id not seen here), and any
        frame of a known computer from a new address (its answers go there from now
        on: in an unkeyed deployment that costs an outsider as much as a NACK would)."""
        if isinstance(m, msg.JoinReq | msg.NackReq | msg.HistoryReq):
            return True
        if known is not None and known.addr != src:
            return True
        return isinstance(m, msg.Hello) and (known is None or known.mid != m.mid)

    def _gone(self, mid: MemberId, mystable: int) -> bool:
        """Whether ``mid`` certainly is no member any more: cleaned up, or missing from
        tables that are at least as recent as what the member has delivered."""
        state = self.log.state
        if mid in state.rows:
            return False
        return mid in state.mcache or mystable <= state.gseq

    def _greet(self, src: str, node: str, now: float) -> _Local:
        loc = self.local.get(node)
        if loc is None:
            loc = self.local[node] = _Local(src, now)
        elif loc.addr != src:
            self._readdress(loc, src)
        loc.heard = now
        return loc

    def _readdress(self, loc: _Local, src: str) -> None:
        """A known computer speaks from a new address (its interface's address changed,
        or it roamed): answers, MOVEs and its running transfer go there from now on.
        Members are keyed by node, never by address; the address is its own word (a
        frame sealed by that node, in a keyed deployment)."""
        loc.addr = src
        self.stats.readdressed += 1
        t = self.trans.get(loc.mid) if loc.mid is not None else None
        if t is not None:
            t.addr = src

    def _set_mid(self, node: str, loc: _Local, mid: MemberId | None) -> None:
        if mid is not None and mid in self.log.state.mcache and mid not in self.log.state.rows:
            mid = None  # it has left and been cleaned up: late frames do not bring it back
        if loc.mid == mid:
            if mid is not None and mid not in self.local_m:
                self.local_m[mid] = node
                self._local_m_changed()
            return
        if loc.mid is not None:
            self._drop_member(loc.mid)
        loc.mid = mid
        loc.mystable = 0
        if mid is not None:
            self.local_m[mid] = node
            self._local_m_changed()

    def _drop_member(self, mid: MemberId) -> None:
        if self.local_m.pop(mid, None) is not None:
            self._abort(mid)  # "when mid leaves local-m, G executes StateTransferAbort"
            self._local_m_changed()

    # =============================================================== NACK (figure 5)
    def _on_nack(self, n: msg.NackReq, src: str) -> None:
        self.stats.nacks += 1
        mid = n.mid
        t = self.trans.get(mid)
        if t is not None and n.s1 < t.low:  # line 13 (with trans = s1, footnote 3)
            self.stats.nacks_discarded += 1
            return
        row = self.log.state.rows.get(mid)
        if row is None or not self.subscribed:  # lines 15-16: "mid has joined" not here yet
            self.stats.nacks_discarded += 1
            return
        self._stabinfo[mid] = max(self._stabinfo.get(mid, 0), n.s1)  # line 16 STABINFO
        self._abort(mid)  # line 18
        start = max(n.s1 + 1, row.first)  # line 22
        high = n.s2
        if row.last != 0:  # lines 24-25
            high = row.last + 1
        if start < high:
            self.trans[mid] = _Transfer(n.s1, start, high, src)  # line 19

    def _own_change(self, m: msg.Hello, src: str) -> None:
        """A member that came here (it moved, or was switched off and on again) after
        its own "has joined" or "has left" went by may never hear of it: with 4.3 this
        cell skipped it (the member was not here), with 4.1 the cell may not have been
        subscribed then, and when no multicast follows, nothing shows the member the
        hole. Its greeting says how far it got (footnote 4), so the gateway sends it
        what it lacks up to that record."""
        mid = m.mid
        assert mid is not None
        row = self.log.state.rows.get(mid)
        if row is None or mid in self.trans or not self.subscribed:
            return
        if m.member and row.last:  # leaving: up to its "has left"
            low, want = m.mystable, row.last
        elif not m.member and not row.last:  # joining: its "has joined"
            low, want = 0, row.first
        else:
            return
        if m.mystable < want <= self.log.committed_gseq():
            self.trans[mid] = _Transfer(low, max(m.mystable + 1, row.first), want + 1, src)

    def _abort(self, mid: MemberId) -> None:
        if self.trans.pop(mid, None) is not None:
            self.stats.aborted += 1

    def _run_transfers(self, now: float) -> None:
        """Send the next chunk of every running transfer (lines 26-31)."""
        if not self.trans:
            return
        done: list[MemberId] = []
        for mid, t in self.trans.items():
            # What every member delivered, or this one said it delivered, is not sent.
            node = self.local_m.get(mid)
            loc = self.local.get(node) if node is not None else None
            t.num = max(t.num, self.stable + 1, (loc.mystable + 1) if loc is not None else 0)
            chunk: list[msg.Record] = []
            size = 0
            budget = self.cfg.transfer_chunk
            while t.num < t.high and budget > 0:
                r = self.log.by_gseq(t.num) or self._fetched.get(t.num)
                if r is None:
                    if t.num <= self.log.committed_gseq() \
                            and now >= t.fetch_at + self.cfg.nack_timer:
                        # freed here, or before our snapshot: ask the norm-buffer (3.2)
                        t.fetch_at = now
                        self.to_coord.append(msg.Fetch(self.host, t.num, t.high - 1))
                    break  # not here yet: resumes when it is
                if r.gseq > self.log.committed_gseq():
                    break
                t.num += 1
                budget -= 1
                # 4.3: line 28 is not skipped: a joining or leaving member takes no
                # dummies, so its holes must be filled (docs/decisions.md).
                chunk.append(r)
                size += record_size(r)
                if size >= self.cfg.max_datagram:
                    self.cell_out.append((t.addr, msg.Transfer(self.host, mid, tuple(chunk))))
                    chunk, size = [], 0
            if chunk:
                self.cell_out.append((t.addr, msg.Transfer(self.host, mid, tuple(chunk))))
            self.stats.transferred += self.cfg.transfer_chunk - budget
            if t.num >= t.high:
                done.append(mid)
        for mid in done:
            del self.trans[mid]  # line 32
        if not self.trans:
            self._fetched.clear()

    def transfers_ready(self) -> bool:
        """Whether a running transfer can send something right now."""
        for t in self.trans.values():
            r = self.log.by_gseq(t.num) or self._fetched.get(t.num)
            if r is not None and r.gseq <= self.log.committed_gseq():
                return True
        return False

    def on_copies(self, m: msg.Fetched | msg.HistoryAnswer) -> None:
        """The master's copies: for a transfer (Fetched), or for a member's history."""
        if isinstance(m, msg.HistoryAnswer):
            self.on_history_answer(m)
            return
        limit = self.cfg.fetch_limit * 4
        for r in m.records:
            if len(self._fetched) < limit:
                self._fetched[r.gseq] = r

    # =============================================================== history
    def _on_history(self, m: msg.HistoryReq, src: str) -> None:
        """Answer from this host's log, or pass the request to the master when this log
        stops short of it (docs/infra.md, "History")."""
        log = self.log
        if not history.may_read(log, m.mid, m.groups):
            self.stats.history_refused += 1  # (or our tables lag: the member asks again)
            return
        a = history.answer(log, m, self.cfg.fetch_limit, self.cfg.max_datagram)
        if history.lacks(a, m) and self.master and self.master != self.host:
            self.stats.history_asked += 1
            self.to_coord.append(msg.HistoryAsk(self.host, m.node, m.mid, m.req, m.groups,
                                                m.lo, m.hi, m.newest))
            return
        members = history.members_of(log, m.groups[0]) if len(m.groups) == 1 else ()
        self.stats.history_served += 1
        self.cell_out.append((src, msg.HistoryReply(self.host, m.mid, m.req, a.lo, a.hi,
                                                    a.floor, a.records, members)))

    def on_history_answer(self, a: msg.HistoryAnswer) -> None:
        """The master's answer to a request we passed on: to the member, if still here."""
        loc = self.local.get(a.node)
        if loc is None or loc.mid != a.dest:
            return
        self.stats.history_served += 1
        self.cell_out.append((loc.addr, msg.HistoryReply(self.host, a.dest, a.req, a.lo, a.hi,
                                                         a.floor, a.records, a.members)))

    # =============================================================== NORMAL (figure 5)
    def _skip(self, r: msg.Record) -> bool:
        return (self.cfg.skip_membership and r.kind in msg.MEMBERSHIP_KINDS
                and r.mid not in self.local_m)

    def on_committed(self, records: list[msg.Record]) -> None:
        """Relay newly committed records (figure 5 lines 1-11, 38-42)."""
        pend = self._normals
        for r in records:
            if r.kind == msg.CLEANUP:  # lines 38-42 (the rows went with the record)
                node = self.local_m.get(r.mid)
                if node is not None:
                    self._drop_member(r.mid)
                    loc = self.local.get(node)
                    if loc is not None and loc.mid == r.mid:
                        loc.mid = None
                continue
            if r.kind in msg.HOSTS_ONLY_KINDS:  # the hosts' business: no multicast to relay
                continue
            if not self.subscribed or self._skip(r):
                continue
            pend.records.append(r)  # line 11: broadcast in the cell
            pend.size += record_size(r)
            self.relay_high = r.gseq
            if pend.size >= self.cfg.max_datagram:
                self._flush_normals()

    def _flush_normals(self) -> None:
        pend = self._normals
        if pend.records:
            self.cell_out.append((None, msg.Normals(self.host, tuple(pend.records))))
            self.stats.relayed += len(pend.records)
            pend.records = []
            pend.size = 0

    # =============================================================== 4.1 subscription
    def _local_m_changed(self) -> None:
        """Figure 7, without the wait: NACKs are dropped until the SUBSCOK (a Sync)
        arrives, and the member's NACK timer repeats them."""
        if not self.cfg.subscribe or not self.master:
            return
        if self.local_m and not self.sub_requested:
            self.sub_requested = True
            self._sub_wait = None
            self.to_coord.append(msg.Subscribe(self.host))
        elif not self.local_m and self.sub_requested:
            self.sub_requested = False
            self.subscribed = False
            self.to_coord.append(msg.Unsubscribe(self.host))
            self.trans.clear()  # line 14

    def _subscribe_again(self, now: float) -> None:
        """A Subscribe lost on the way (a backbone partition drops it, and the master
        may have missed our Unsubscribe too, so it syncs nobody) would leave the cell
        unserved for good: ask again every ``forward_retry`` until the SUBSCOK comes."""
        if not self.sub_requested or self.subscribed or not self.master:
            return
        if self._sub_wait is None:
            self._sub_wait = now
        elif now - self._sub_wait >= self.cfg.forward_retry:
            self._sub_wait = now
            self.to_coord.append(msg.Subscribe(self.host))

    def on_synced(self) -> None:
        """A Sync from the coordinator arrived: with 4.1 it is the SUBSCOK."""
        if self.sub_requested:
            self.subscribed = True
        if self.subscribed:
            # What was sequenced while this cell was out of the subscr-set (or this
            # host down, or recovering) never went by here: the beacons' high shows it,
            # so that a member here asks for it even when no multicast follows.
            self.relay_high = max(self.relay_high, self.log.committed_gseq())

    # =============================================================== coordinator changes
    def new_master(self, master: str, epoch: Epoch, now: float) -> None:
        """Forward everything not yet committed to the new coordinator (docs/infra.md)."""
        self.master = master
        self.epoch = epoch
        self.commit = 0
        for fseq, req in self.outbox.all_for_new_master(now):
            self.to_coord.append(msg.Forward(self.host, fseq, req))
        if self.cfg.subscribe:
            self.sub_requested = False
            self.subscribed = False
            self._local_m_changed()
        self._reported.clear()

    def on_fwd_ack(self, a: msg.FwdAck) -> None:
        if a.epoch == self.epoch:
            self.outbox.on_ack(a.fseq, a.upto, a.epoch)
            self.outbox.release(self.commit, self.epoch)

    def on_commit_point(self, commit: int, stable: int = 0) -> None:
        self.commit = commit
        self.stable = max(self.stable, stable)
        self.outbox.release(commit, self.epoch)

    def on_reroute(self, count: int, target: msg.CellInfo) -> None:
        """seeds/004 5.5: order ``count`` members of this cell to move to ``target``."""
        movable = sorted(node for node, loc in self.local.items() if loc.mid is not None)
        for node in movable[-count:] if count > 0 else []:
            self.cell_out.append((self.local[node].addr, msg.Move(self.host, node, target)))
            self.stats.moved += 1

    def move_uplink(self, uplink: str, now: float) -> None:
        """Beacons name ``uplink`` from now on, starting with one at once."""
        self.uplink = uplink
        self._next_beacon = now

    # =============================================================== timers
    def tick(self, now: float) -> None:
        if now >= self._next_beacon:
            self._next_beacon = now + self.cfg.beacon_interval
            self.cell_out.append((None, msg.Beacon(self.host, self.relay_high, self.uplink,
                                                   self.master, self.directory,
                                                   self.log.state.sequence)))
            self.stats.beacons += 1
        if now >= self._next_sweep:  # B2: silent computers leave `local`
            self._next_sweep = now + self.cfg.beacon_interval
            for node in [n for n, loc in self.local.items()
                         if now - loc.heard > self.cfg.local_timeout]:
                loc = self.local.pop(node)
                if loc.mid is not None:
                    self._drop_member(loc.mid)
            for fseq, req in self.outbox.due(now):
                if self.master:
                    self.to_coord.append(msg.Forward(self.host, fseq, req))
            self._subscribe_again(now)
            rows = self.log.state.rows
            if len(self._reported) > len(rows):  # forget what we reported of departed members
                self._reported = {mid: s for mid, s in self._reported.items() if mid in rows}
        if now >= self._next_stabinfo and self._stabinfo:
            self._next_stabinfo = now + self.cfg.stabinfo_interval
            pairs = tuple((mid, s) for mid, s in self._stabinfo.items()
                          if s > self._reported.get(mid, 0))
            self._stabinfo.clear()
            if pairs and self.master:
                self._reported.update(pairs)
                self.to_coord.append(msg.StabInfo(self.host, pairs))


    def flush(self, now: float) -> None:
        self._flush_normals()
        self._run_transfers(now)

    def next_deadline(self) -> float:
        d = min(self._next_beacon, self._next_sweep)
        if self._stabinfo:
            d = min(d, self._next_stabinfo)
        return d

    def load(self) -> int:
        """Messengers served (seeds/004 4.4): members and joining computers in the cell."""
        return len(self.local_m)
