"""The coordinator S_C of seeds/001 3.1, run by the elected master host.

It keeps ``members``, ``seqnum`` and ``first``/``last``/``recv`` in a working
:class:`~m2mc.infra.state.CoordState` (everything it decided, committed or not),
``stable`` and the norm-buffer's pending sets, the early NEWs of each member,
and the subscr-set of 4.1. Each decision is a :class:`~m2mc.infra.messages.Record`
appended to the host's :class:`~m2mc.infra.replog.ReplicaLog` and replicated to
the other hosts; a record is committed when a quorum of hosts holds it, and only
then relayed to cells (docs/infra.md, "Failover"). The seed's FIFO-multicast of
NORMAL messages to all gateways is this replication stream.

Request handling follows the seed exactly: figure 3 for JOIN, LEAVE and LEAVEOK,
steps (1)-(5) and the buffering of early NEWs, STABINFO steps (1)-(3), A5, A6.

Beyond the seed, a member's **backlog** is bounded: what the hosts hold because that
member has not delivered it (every multicast after its ``stable``). A member whose
application stopped reading keeps greeting, so ``member_timeout`` never expels it;
past ``max_backlog_bytes`` or ``max_backlog_age`` it is expelled instead, as a silent
one is (docs/infra.md, "Bounded hosts"), so no member can make every host's memory
grow for as long as it pauses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from m2mc.infra import history
from m2mc.infra import messages as msg
from m2mc.infra.codec import record_size
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.keepers import Keepers
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState, pack_groups

Out = tuple[str, msg.BackboneMessage]  # (destination host, message)
HISTORY_SYNC_SYNCS = 16  # a host that lacks more freed records than 16 Syncs carry
# gets the committed tables instead (a snapshot), and its history starts over


def _good_name(name: str) -> bool:
    return 0 < len(name.encode()) <= msg.MAX_GROUP_NAME


@dataclass(slots=True)
class Peer:
    """Replication progress of one host in this epoch."""

    sent: int = 0  # highest lsn sent
    acked: int = 0  # highest lsn it said it holds in this epoch
    synced: bool = False  # received a Sync in this epoch
    applied: int = 0  # its applied point, from its status
    heard: bool = False  # its applied point is known (a status, an answer, an Accepted)
    last_progress: float = 0.0
    last_sync: float = -1e9


@dataclass(slots=True)
class CoordStats:
    sequenced: int = 0
    duplicates: int = 0
    early_buffered: int = 0
    early_dropped: int = 0
    discarded_a5: int = 0
    discarded_a6: int = 0
    expelled: int = 0
    expelled_backlog: int = 0  # ... because its backlog passed max_backlog_bytes/_age
    refused_full: int = 0
    groups_refused: int = 0  # joins of a group past max_groups/max_member_groups, bad names
    noops: int = 0  # items turned into NOOP records (refused joins, sends to a group not
    # joined, leaves of a group not joined)


@dataclass(slots=True)
class _Early:
    items: dict[int, msg.NewItem] = field(default_factory=dict)


class Coordinator:
    """The sequencer of one epoch. ``work`` = committed tables + uncommitted records."""

    def __init__(self, host: str, epoch: Epoch, cfg: InfraConfig, log: ReplicaLog,
                 work: CoordState, now: float) -> None:
        self.host = host
        self.epoch = epoch
        self.cfg = cfg
        self.log = log
        self.work = work
        self.commit = log.applied
        self.started = now
        self.stats = CoordStats()
        self.norm_buffer: dict[int, set[MemberId]] = {}  # gseq -> pending
        self.stable: dict[MemberId, int] = {}
        self.early: dict[MemberId, _Early] = {}
        self.peers: dict[str, Peer] = {}
        self.subscribers: set[str] = set()
        self.keepers = Keepers(host, log.high)  # 4.1: whose acknowledgments count
        self.last_seen: dict[MemberId, float] = {}
        self.out: list[Out] = []
        self.first_app_gseq: int | None = None  # first multicast this coordinator numbered
        self.early_total = 0  # early NEWs held, all members together (max_early_total)
        self._commit_dirty = False
        # The multicasts held (gseq order, contiguous from self._held_base): when each
        # was sequenced (or adopted) and the bytes held before it, for the backlog bound.
        self._held: list[tuple[float, int]] = []
        self._held_base = 0  # gseq of self._held[0]
        self._held_bytes = 0  # bytes of every multicast held so far (a running total)
        self._rebuild_norm_buffer(now)

    # ================================================================ set-up
    def _rebuild_norm_buffer(self, now: float) -> None:
        """Pending sets after a takeover, from the rows (docs/infra.md): every
        multicast still held is pending for every member whose [first, last]
        covers it; ``stable`` is unknown (0) until STABINFO arrives."""
        rows = self.work.rows
        for lsn in range(self.log.low, self.log.high + 1):
            r = self.log.get(lsn)
            if r is None or not r.gseq:
                continue
            self._hold(r, now)
            self.norm_buffer[r.gseq] = {
                mid for mid, row in rows.items()
                if row.first <= r.gseq and (row.last == 0 or r.gseq <= row.last)}
            if not self.norm_buffer[r.gseq]:
                del self.norm_buffer[r.gseq]
        for mid in self.work.members:
            self.stable[mid] = 0
            self.last_seen[mid] = now

    # ================================================================ decisions
    def _append(self, kind: int, mid: MemberId, nseq: int = 0, app_seq: int = 0,
                body: bytes = b"", now: float = 0.0, group: str = "") -> msg.Record:
        r = self.work.next_record(kind, mid, nseq, app_seq, body, group)
        self.work.apply(r, now)
        if kind == msg.APP and self.first_app_gseq is None:
            self.first_app_gseq = r.gseq
        self.log.append((r,))
        if r.gseq:
            self._hold(r, now)
            pending = set(self.work.members)
            if kind in (msg.LEFT, msg.EXPELLED):
                pending.add(mid)  # figure 3 line 19: "members and mid"
            if pending:
                self.norm_buffer[r.gseq] = pending
        return r

    def append_genesis(self, founder: MemberId, sequence: int, now: float) -> msg.Record:
        """The first record of a sequence nobody held before (docs/infra.md, "Hosts
        without a data directory"): its id, which every beacon then carries."""
        return self._append(msg.GENESIS, founder, body=sequence.to_bytes(8, "big"), now=now)

    def append_config(self, kind: int, target: MemberId, now: float) -> msg.Record:
        """Retire or admit a host (docs/infra.md, "Retiring a host"): the caller checked
        that no other change is uncommitted (:func:`m2mc.infra.reconfig.check_change`)."""
        return self._append(kind, target, now=now)

    def handle_forward(self, fwd: msg.Forward, now: float) -> None:
        req = fwd.request
        mid = req.mid
        if isinstance(req, msg.NewReq):
            self._on_new(mid, req.items, now)
        elif isinstance(req, msg.JoinReq):
            self._on_join(mid, req.groups, now)
        elif isinstance(req, msg.LeaveReq):
            self._on_leave(mid, now)
        else:
            self._on_leaveok(mid, now)
        if mid in self.work.members:
            self.last_seen[mid] = now
        self.out.append((fwd.host, msg.FwdAck(self.epoch, fwd.fseq, self.work.lsn)))

    def _on_join(self, mid: MemberId, groups: tuple[str, ...], now: float) -> None:
        w = self.work
        if mid in w.members or mid in w.rows or mid in w.mcache:  # A6
            self.stats.discarded_a6 += 1
            return
        if len(w.members) >= self.cfg.max_members:
            self.stats.refused_full += 1
            return
        accepted: list[str] = []
        new = 0
        for name in dict.fromkeys(groups):  # the groups it may join (the rest: refused)
            fresh = not (name in w.groups and w.groups[name].members)
            if not _good_name(name) or len(accepted) >= self.cfg.max_member_groups or (
                    fresh and w.live_groups() + new >= self.cfg.max_groups):
                self.stats.groups_refused += 1
                continue
            accepted.append(name)
            new += fresh
        counts = [(g, w.groups[g].count if g in w.groups else 0) for g in accepted]
        self._append(msg.JOINED, mid, body=pack_groups(counts), now=now)  # figure 3 2-12
        self.stable[mid] = 0
        self.last_seen[mid] = now

    def _on_leave(self, mid: MemberId, now: float) -> None:
        if mid not in self.work.members:  # A5
            self.stats.discarded_a5 += 1
            return
        self._append(msg.LEFT, mid, now=now)  # figure 3 lines 14-19
        self._drop_early(mid)

    def _on_leaveok(self, mid: MemberId, now: float) -> None:
        row = self.work.rows.get(mid)
        if row is None or mid in self.work.members:  # a duplicate ("if present")
            return
        self._free_member(mid, row.first, row.last)
        self._append(msg.CLEANUP, mid, now=now)  # figure 3 lines 21-27

    def _free_member(self, mid: MemberId, first: int, last: int) -> None:
        """Figure 3 lines 22-26: remove mid from every pending set."""
        low = max(first, self.stable.get(mid, 0) + 1)
        for g in range(low, (last or self.work.gseq) + 1):
            pending = self.norm_buffer.get(g)
            if pending is not None:
                pending.discard(mid)
                if not pending:
                    del self.norm_buffer[g]
        self.stable.pop(mid, None)
        self.last_seen.pop(mid, None)
        self._drop_early(mid)

    def _drop_early(self, mid: MemberId) -> None:
        gone = self.early.pop(mid, None)
        if gone is not None:
            self.early_total -= len(gone.items)

    def _on_new(self, mid: MemberId, items: tuple[msg.NewItem, ...], now: float) -> None:
        w = self.work
        if mid not in w.members:  # A5
            self.stats.discarded_a5 += 1
            return
        row = w.rows[mid]
        for item in items:
            if item.nseq == row.recv + 1:
                self._take(mid, item, now)
            elif item.nseq <= row.recv:
                self.stats.duplicates += 1
            else:
                early = self.early.setdefault(mid, _Early())
                if item.nseq in early.items:
                    self.stats.duplicates += 1
                elif len(early.items) >= self.cfg.early_new_limit \
                        or self.early_total >= self.cfg.max_early_total:
                    self.stats.early_dropped += 1  # the member resends it
                else:
                    early.items[item.nseq] = item
                    self.early_total += 1
                    self.stats.early_buffered += 1
        early_buf = self.early.get(mid)
        if early_buf is not None:
            while (nxt := early_buf.items.pop(row.recv + 1, None)) is not None:
                self.early_total -= 1
                self._take(mid, nxt, now)
            for stale in [n for n in early_buf.items if n <= row.recv]:
                del early_buf.items[stale]
                self.early_total -= 1
            if not early_buf.items:
                del self.early[mid]

    def _take(self, mid: MemberId, item: msg.NewItem, now: float) -> None:
        """Sequence the member's next NEW item: its message, or its joining or leaving a
        group; a NOOP record in its place when it may not (docs/infra.md, "Groups")."""
        w = self.work
        mine = w.groups_of(mid)
        kind = item.kind
        if kind == msg.APP or kind == msg.GLEFT:
            ok = item.group in mine
        else:
            g = w.groups.get(item.group)
            room = (g is not None and bool(g.members)) or w.live_groups() < self.cfg.max_groups
            ok = (_good_name(item.group) and item.group not in mine
                  and len(mine) < self.cfg.max_member_groups and room)
            if not ok and item.group not in mine:
                self.stats.groups_refused += 1
        if not ok:
            kind = msg.NOOP
            self.stats.noops += 1
        body = item.body if kind == msg.APP else b""
        self._append(kind, mid, item.nseq, item.app_seq, body, now, item.group)
        self.stats.sequenced += 1

    def handle_stabinfo(self, pairs: tuple[tuple[MemberId, int], ...]) -> None:
        for mid, s in pairs:
            s = min(s, self.work.gseq)
            old = self.stable.get(mid)
            if mid not in self.work.members or old is None or old >= s:  # step (1)
                continue
            self.stable[mid] = s  # step (2)
            row = self.work.rows[mid]
            nb = self.norm_buffer
            low = max(old + 1, row.first)
            if nb:
                low = max(low, next(iter(nb)))
            for g in range(low, s + 1):  # step (3)
                pending = nb.get(g)
                if pending is not None:
                    pending.discard(mid)
                    if not pending:
                        del nb[g]

    def stable_watermark(self) -> int:
        """Every multicast up to this one is stable (out of the norm-buffer)."""
        if self.norm_buffer:
            return next(iter(self.norm_buffer)) - 1
        return self.work.gseq

    def expel(self, mid: MemberId, now: float) -> None:
        """seeds/004 4.5 "Messenger crash": a leave and its LEAVEOK on its behalf."""
        if mid not in self.work.members:
            return
        self._append(msg.EXPELLED, mid, now=now)
        row = self.work.rows[mid]
        self._free_member(mid, row.first, row.last)
        self._append(msg.CLEANUP, mid, now=now)
        self.stats.expelled += 1

    def saw_members(self, mids: tuple[MemberId, ...], now: float) -> None:
        for mid in mids:
            if mid in self.work.members:
                self.last_seen[mid] = now

    # ================================================================ replication
    def peer(self, host: str) -> Peer:
        p = self.peers.get(host)
        if p is None:
            p = self.peers[host] = Peer()
        return p

    def handle_accepted(self, a: msg.Accepted, now: float) -> None:
        if a.epoch != self.epoch:
            return
        p = self.peer(a.host)
        p.heard = True
        if a.gap:  # it needs a Sync from a.high (its log is good up to there)
            p.synced = False
            p.applied = a.high
            return
        p.synced = True
        if a.high > p.acked:
            p.acked = a.high
            p.last_progress = now

    def note_status(self, st: msg.Status, now: float) -> None:
        p = self.peer(st.host)
        p.applied = st.commit
        p.heard = True
        if st.log_epoch != self.epoch:
            p.synced = False
        self.saw_members(st.local_m, now)

    def update_commit(self, quorum: int, live: set[str]) -> bool:
        """Advance the commit point to what ``quorum`` hosts hold; True if it moved.
        With 4.1 only the keepers count: a host that may free its tables is no copy."""
        keepers = self.keepers
        highs = sorted((self.peers[h].acked for h in live
                        if h != self.host and h in self.peers and self.peers[h].synced
                        and (not self.cfg.subscribe or keepers.counts(h))),
                       reverse=True)
        highs.insert(0, self.log.high)
        highs.sort(reverse=True)
        if len(highs) < quorum:
            return False
        candidate = highs[quorum - 1]
        if candidate > self.commit:
            self.commit = candidate
            self._commit_dirty = True
            return True
        return False

    def targets(self, live: list[str]) -> list[str]:
        """Hosts that get every record: all of them, or with 4.1 the keepers plus the
        subscribed gateways."""
        others = [h for h in live if h != self.host]
        if not self.cfg.subscribe:
            return sorted(others)
        return sorted(h for h in others if self.keepers.counts(h) or h in self.subscribers)

    def _update_keepers(self, live: list[str], quorum: int) -> None:
        def holds(h: str) -> int:
            p = self.peers.get(h)
            return p.acked if p is not None and p.synced else 0
        self.keepers.update(Keepers.wanted(self.host, live, quorum), holds, self.log.high,
                            self.commit, quorum)

    def flush(self, live: list[str], quorum: int, now: float,
              everyone: Iterable[str] = ()) -> None:
        """Queue Replicate/Sync messages so every target catches up with the log;
        ``everyone``: every host known (the keepers until the set first shrinks)."""
        log = self.log
        if self.cfg.subscribe:
            self._update_keepers(live, quorum)
        for h in self.targets(live):
            p = self.peer(h)
            if not p.synced:
                # A snapshot waits until the host's applied point is known: one heard
                # of only as alive looks empty, and a snapshot cuts its history short.
                if (p.heard or log.has_from(1)) \
                        and now - p.last_sync >= self.cfg.replicate_retry:
                    self._sync(h, p, now)
                continue
            if p.acked < p.sent and now - p.last_progress > self.cfg.replicate_retry:
                p.sent = p.acked  # nothing heard for a while: resend what is unaccepted
                p.last_progress = now
            while p.sent < log.high:
                last = min(log.high, p.sent + self.cfg.batch_records)
                records = log.range_with_history(p.sent + 1, last)
                if records is None:  # freed and no longer kept: the tables instead
                    p.synced = False
                    self._sync(h, p, now)
                    break
                self.out.append((h, msg.Replicate(self.epoch, self.commit, records)))
                p.sent = last
        if self._commit_dirty:
            self._commit_dirty = False
            replicas = self.keepers.announce((*everyone, *live)) if self.cfg.subscribe else ()
            c = msg.Commit(self.epoch, self.commit, self.stable_watermark(), replicas)
            for h in live:
                if h != self.host:
                    self.out.append((h, c))

    def _sync(self, h: str, p: Peer, now: float) -> None:
        """Bring host h onto this epoch's log from its applied point."""
        log = self.log
        p.last_sync = now
        p.last_progress = now
        base = p.applied
        snapshot = None
        limit = self.cfg.batch_records * 4
        last = min(log.high, base + limit)
        # A host that holds a log (a restart, not an empty host) and lacks records our
        # log freed gets them from this host's history (a durable host's store keeps
        # every record, by position) when there are not too many: it then keeps its
        # own history whole, which a snapshot cuts short (docs/infra.md, "Failover").
        records: tuple[msg.Record, ...] | None = None
        if base >= log.high:
            records = () if base == log.high else None
        elif log.has_from(base + 1):
            records = log.range(base + 1, last)
        elif base > 0 and log.low - 1 - base <= limit * HISTORY_SYNC_SYNCS:
            records = log.range_with_history(base + 1, last)
        if records is None:
            # Our committed tables, and the committed records we still hold below them:
            # they are not stable (members may still NACK them), so the host must keep
            # them too (or a later takeover by it frees them for good). At most
            # ``limit`` records in all, the newest below the snapshot first.
            snapshot = log.state.snapshot()
            base = max(log.low - 1, log.applied - limit)
            last = min(log.high, base + limit)
            records = log.range(base + 1, last) if last > base else ()
        self.out.append((h, msg.Sync(self.epoch, self.commit, base, snapshot, records)))
        p.sent = last
        p.acked = min(p.acked, base)
        p.synced = True  # optimistic: Replicates may follow the Sync in FIFO order

    def handle_subscribe(self, host: str, applied: int, now: float) -> None:
        """seeds/001 4.1: SUBSCOK is a Sync carrying the rows (first, last)."""
        self.subscribers.add(host)
        p = self.peer(host)
        p.applied = max(p.applied, applied)
        p.heard = True
        p.synced = False
        p.last_sync = -1e9

    def handle_unsubscribe(self, host: str) -> None:
        self.subscribers.discard(host)

    def handle_read(self, m: msg.Fetch | msg.HistoryAsk) -> None:
        """A gateway asks for copies of older records (for a transfer, or for history)."""
        if isinstance(m, msg.Fetch):
            self.handle_fetch(m)
        else:
            self.handle_history(m)

    def handle_fetch(self, f: msg.Fetch) -> None:
        """Copies from the norm-buffer for a gateway's state transfer (3.2)."""
        top = min(f.hi, self.log.committed_gseq(), f.lo + self.cfg.fetch_limit - 1)
        recs = []
        for g in range(f.lo, top + 1):
            r = self.log.by_gseq(g)
            if r is not None:
                recs.append(r)
        if recs:
            self.out.append((f.host, msg.Fetched(tuple(recs))))

    def handle_history(self, ask: msg.HistoryAsk) -> None:
        """A gateway passes a member's history request on: answer from this log."""
        if not history.may_read(self.log, ask.mid, ask.groups):
            return
        a = history.answer(self.log, ask, self.cfg.fetch_limit, self.cfg.max_datagram)
        members = history.members_of(self.log, ask.groups[0]) if len(ask.groups) == 1 else ()
        self.out.append((ask.host, msg.HistoryAnswer(self.host, ask.node, ask.mid, ask.req, a.lo,
                                                     a.hi, a.floor, a.records, members)))

    def _hold(self, r: msg.Record, now: float) -> None:
        if not self._held:
            self._held_base = r.gseq
        elif r.gseq != self._held_base + len(self._held):
            return  # (gseqs are contiguous: never from an honest log)
        self._held.append((now, self._held_bytes))
        self._held_bytes += record_size(r)

    def check_backlogs(self, now: float) -> list[MemberId]:
        """Expel the members whose backlog passed a bound; return them."""
        cfg = self.cfg
        held = self._held
        drop = self.stable_watermark() + 1 - self._held_base  # stable: nobody waits for it
        if drop > 0:
            del held[:drop]
            self._held_base += drop
        if not held or (cfg.max_backlog_bytes <= 0 and cfg.max_backlog_age <= 0):
            return []
        out = []
        for mid in sorted(self.work.members):
            first = max(self.stable.get(mid, 0), self.work.rows[mid].first - 1) + 1
            i = first - self._held_base
            if i < 0 or i >= len(held):
                continue
            since, before = held[i]
            too_big = 0 < cfg.max_backlog_bytes < self._held_bytes - before
            if too_big or 0 < cfg.max_backlog_age < now - since:
                out.append(mid)
        for mid in out:
            self.expel(mid, now)
            self.stats.expelled_backlog += 1
        return out

    def check_members(self, now: float) -> None:
        self.work.mcache.expire(now)
        timeout = self.cfg.member_timeout
        if timeout <= 0:
            return
        for mid in [m for m, t in self.last_seen.items() if now - t > timeout]:
            self.expel(mid, now)

    def drain(self) -> list[Out]:
        out, self.out = self.out, []
        return out
