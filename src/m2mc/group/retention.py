"""What one group does about messages its members' logs no longer hold (retention,
docs/group.md section 8; docs/decisions.md).

Responder: a NACK or a sync request for messages this node delivered but whose
log evicted them (or that it skipped itself) is answered with a GONE message
naming them (seqnos per sender, total-order positions; in ``ids`` mode with
their stubs: identity, parent, position, clock). It goes out after a random
back-off in ``[0, repair_backoff]``, like a retransmission, and a GONE overheard
meanwhile removes what it covered (suppression: a loss seen by many costs one
answer). A node that overhears a GONE naming messages it still holds sends them
(REPAIR), so a requester hears the copy rather than the "gone".

Requester: a GONE report is remembered per sender with the time it came. A
message still missing ``gone_grace`` after such a report (no copy came from a
member with a longer memory) and while no catch-up is under way is **skipped**:
the ordering core counts it delivered without delivering it, so its replies, the
sender's later messages (FIFO, causal) and the next positions (total order) go
on. Each skip is counted (``skipped``, ``skipped_positions``), written to the
trace (``skip``) and reported to the application (:class:`MessagesSkipped`). A
message nobody reports gone (none of the members that answer ever had it) is
asked for again and again, as before (NACK hold-off up to ``nack_holdoff_max``):
a partition that heals brings it back.

Under ``ids`` mode a requester that holds the stub of a message to skip waits to
skip it until its parent is delivered or skipped, so S_b places it exactly.

Bounds: reports are kept for ``max_senders`` senders (members first), at most
``4 * max_nack_intervals`` intervals each, and dropped ``gone_grace +
nack_holdoff_max`` after they came; at most ``max_held`` stubs are remembered;
one GONE answer names at most ``max_nack_intervals`` intervals of seqnos (the
rest: counted ``gone_truncated``, asked for again by the next NACK) and at most
:data:`MAX_STUBS_PER_ANSWER` stubs (stubs only help a skip place a message
exactly; a message without its stub is skipped all the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from m2mc.group.codec import Gone, Nack, SyncReq, record_size
from m2mc.group.events import MessagesSkipped
from m2mc.group.seqsets import Intervals, count, holes, intersect, normalize, subtract
from m2mc.kinds import Order
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.trace.schema import TraceEvent, detail_json

if TYPE_CHECKING:
    from m2mc.group.port import InstancePort

_Report = list[tuple[int, int, float]]  # (lo, hi, when heard)
MAX_STUBS_PER_ANSWER = 4096  # ids mode: stubs one GONE answer carries (a few messages)
Digest = dict[str, Intervals]


@dataclass(slots=True)
class RetentionStats:
    gone_sent: int = 0  # GONE messages sent
    gone_suppressed: int = 0  # answers dropped: another member's GONE said it first
    gone_truncated: int = 0  # answers cut at max_nack_intervals (the rest: next NACK)
    gone_received: int = 0  # GONE messages heard
    gone_contradicted: int = 0  # GONEs naming messages we hold: we send them
    gone_reports_dropped: int = 0  # reports past the table's bound
    skipped: int = 0  # messages given up (gone everywhere)
    skipped_positions: int = 0  # total-order positions passed over, message unknown
    skips_deferred: int = 0  # ids mode: stubs waiting for their parent's place


class GroupRetention:
    """One group's GONE answers and skips (see the module docstring)."""

    def __init__(self, inst: InstancePort) -> None:
        self.inst = inst
        self.gid = inst.gid
        self.pid = inst.pid
        self.config = inst.config
        self.stats = RetentionStats()
        self._ranges: Digest = {}  # our pending answer
        self._gseqs: Intervals = []
        self._stubs: dict[MessageId, Message] = {}
        self._send_at: float | None = None
        self._reports: dict[str, _Report] = {}  # requester: what others said is gone
        self._gseq_reports: _Report = []
        self._heard_stubs: dict[MessageId, Message] = {}
        self._check_at: float | None = None

    def observe(self, body: object, now: float) -> bool:
        """Every group message the instance handles comes here first (data has its own
        path): a GONE is handled here (True); a NACK or a sync request also gets our
        answer for what we evicted (False: the instance goes on with it)."""
        kind = type(body)
        if kind is Gone:
            assert isinstance(body, Gone)
            self.on_gone(body, now)
            return True
        if self.inst.lingering_until is not None:
            return False
        if kind is Nack:
            assert isinstance(body, Nack)
            self.on_nack(body, now)
        elif kind is SyncReq:
            assert isinstance(body, SyncReq)
            self.on_request(body, now)
        return False

    # ================================================================ responder
    def on_nack(self, nack: Nack, now: float) -> None:
        """A NACK: answer for what we cannot serve because our log evicted it."""
        inst = self.inst
        ranges, gseqs = inst.repair.bounded_nack(nack, count=False)  # on_nack counts them
        answer = inst.node.store.gone_answer(self.gid, dict(ranges), gseqs,
                                             MAX_STUBS_PER_ANSWER)
        self._queue(answer.ids, self._not_records(answer.gseqs), answer.stubs, now)

    def on_request(self, req: SyncReq, now: float) -> None:
        """A sync request of a member: answer for the history we evicted (MSP sends
        what we hold)."""
        inst = self.inst
        if not inst.msp.is_member(req.sender):
            return
        tops = inst.high_waters()
        wanted = {pid: subtract([(1, top)], normalize(req.digest.get(pid, [])))
                  for pid, top in tops.items() if top > 0}
        wanted = {pid: ivs for pid, ivs in wanted.items() if ivs}
        if not wanted:
            return
        answer = inst.node.store.gone_answer(self.gid, wanted, [], MAX_STUBS_PER_ANSWER)
        self._queue(answer.ids, [], answer.stubs, now)

    def _not_records(self, gseqs: Intervals) -> Intervals:
        """Positions less the membership records we know at them (those are no
        message: DECIDED answers for them)."""
        return self.inst.ordering.records_in(gseqs)

    def _queue(self, ranges: Digest, gseqs: Intervals, stubs: list[Message], now: float) -> None:
        if not ranges and not gseqs:
            return
        for pid, ivs in ranges.items():
            self._ranges[pid] = normalize([*self._ranges.get(pid, []), *ivs])
        self._gseqs = normalize([*self._gseqs, *gseqs])
        room = MAX_STUBS_PER_ANSWER - len(self._stubs)
        for stub in stubs[:max(0, room)]:
            self._stubs[stub.mid] = stub
        if self._send_at is None:
            self._send_at = now + self.inst.node.rng.uniform(0.0, self.config.repair_backoff)

    def due(self, now: float) -> list[Gone]:
        """The GONE answer, when its back-off ran out: the ranges in the first message,
        stubs in messages of at most ``sync_chunk_bytes``."""
        if self._send_at is None or now < self._send_at:
            return []
        self._send_at = None
        ranges, self._ranges = self._ranges, {}
        gseqs, self._gseqs = self._gseqs, []
        stubs = [s for s in self._stubs.values()
                 if any(lo <= s.mid.seq <= hi for lo, hi in ranges.get(s.mid.pid, []))]
        self._stubs = {}
        budget = self.config.max_nack_intervals
        bounded: Digest = {}
        for pid in sorted(ranges):
            ivs = ranges[pid][:max(budget, 0)]
            if len(ivs) < len(ranges[pid]):
                self.stats.gone_truncated += 1
            if ivs:
                bounded[pid] = ivs
                budget -= len(ivs)
        if len(gseqs) > self.config.max_nack_intervals:
            gseqs = gseqs[:self.config.max_nack_intervals]
            self.stats.gone_truncated += 1
        if not bounded and not gseqs:
            return []
        out = [Gone(self.pid, bounded, gseqs, [])]
        size = 0
        for stub in stubs:
            s = record_size(stub)
            if out[-1].stubs and size + s > self.config.sync_chunk_bytes:
                out.append(Gone(self.pid, {}, [], []))
                size = 0
            out[-1].stubs.append(stub)
            size += s
        self.stats.gone_sent += len(out)
        return out

    # ================================================================ requester
    def on_gone(self, gone: Gone, now: float) -> None:
        """A GONE went by: suppress ours, send what we hold of it, note the report."""
        self.stats.gone_received += 1
        inst = self.inst
        if self._send_at is not None:  # someone answered first: drop what it covered
            before = sum(len(v) for v in self._ranges.values()) + len(self._gseqs)
            for pid, ivs in gone.ranges.items():
                if pid in self._ranges:
                    rest = subtract(self._ranges[pid], normalize(ivs))
                    if rest:
                        self._ranges[pid] = rest
                    else:
                        del self._ranges[pid]
            if gone.gseqs:
                self._gseqs = subtract(self._gseqs, normalize(gone.gseqs))
            if not self._ranges and not self._gseqs:
                self._send_at = None
                self._stubs.clear()
            if sum(len(v) for v in self._ranges.values()) + len(self._gseqs) < before:
                self.stats.gone_suppressed += 1
        # Messages we still hold: the requester should have them, not the "gone".
        pending = inst.repair.pending_repairs
        inst.repair.on_nack(Nack(gone.sender, gone.ranges, gone.gseqs), now, counted=False)
        if inst.repair.pending_repairs > pending:
            self.stats.gone_contradicted += 1
        self._note(gone, now)

    def _note(self, gone: Gone, now: float) -> None:
        cap = 4 * self.config.max_nack_intervals
        member = self.inst.row.membership.get
        for pid, ivs in gone.ranges.items():
            if pid == self.pid:
                continue
            entries = self._reports.get(pid)
            if entries is None:
                if len(self._reports) >= self.config.max_senders and member(pid) is None:
                    self.stats.gone_reports_dropped += 1
                    continue
                entries = self._reports[pid] = []
            entries.extend((lo, hi, now) for lo, hi in ivs)
            if len(entries) > cap:
                self.stats.gone_reports_dropped += len(entries) - cap
                del entries[:len(entries) - cap]
        if gone.gseqs:
            self._gseq_reports.extend((lo, hi, now) for lo, hi in gone.gseqs)
            if len(self._gseq_reports) > cap:
                self.stats.gone_reports_dropped += len(self._gseq_reports) - cap
                del self._gseq_reports[:len(self._gseq_reports) - cap]
        for stub in gone.stubs:
            if len(self._heard_stubs) >= self.config.max_held:
                break
            self._heard_stubs[stub.mid] = stub
        at = now + self.config.gone_grace
        if self._check_at is None or at < self._check_at:
            self._check_at = at

    # =================================================================== timer
    def on_timer(self, now: float) -> None:
        """Send our GONE answer when due; skip what is ripe."""
        inst = self.inst
        for body in self.due(now):
            inst.node.send_body(inst.tag, body)
        if self._check_at is None or now < self._check_at:
            return
        self._check_at = None
        msp = inst.msp
        if msp.catchup is not None and not msp.catchup.done:
            self._check_at = max(now + self.config.gone_grace, msp.catchup.deadline)
            return
        self._skip_ripe(now)

    def next_deadline(self) -> float | None:
        a, b = self._send_at, self._check_at
        if a is None:
            return b
        return a if b is None or a < b else b

    def _ripe(self, entries: _Report, now: float) -> tuple[Intervals, _Report, float | None]:
        """Of the reports ``entries``: the intervals ripe now, those kept, and when the
        next one ripens."""
        grace = self.config.gone_grace
        forget = now - grace - self.config.nack_holdoff_max
        ripe: Intervals = []
        kept: _Report = []
        nxt: float | None = None
        for lo, hi, when in entries:
            if when < forget:
                continue
            kept.append((lo, hi, when))
            if when + grace <= now:
                ripe.append((lo, hi))
            elif nxt is None or when + grace < nxt:
                nxt = when + grace
        return normalize(ripe), kept, nxt

    def _skip_ripe(self, now: float) -> None:
        inst = self.inst
        mop = inst.mop
        next_at: list[float] = []
        ripe_ids: Digest = {}
        for pid in list(self._reports):
            ripe, kept, nxt = self._ripe(self._reports[pid], now)
            if kept:
                self._reports[pid] = kept
            else:
                del self._reports[pid]
            if ripe:
                ripe_ids[pid] = ripe
            if nxt is not None:
                next_at.append(nxt)
        ripe_gseqs, self._gseq_reports, nxt = self._ripe(self._gseq_reports, now)
        if nxt is not None:
            next_at.append(nxt)
        skip_ids: Digest = {}
        if ripe_ids:
            digest = mop.digest()
            hw = inst.repair.hw
            wanted: dict[str, list[tuple[int, int]]] = {
                pid: holes(digest.get(pid, []), hw.get(pid, 0)) for pid in ripe_ids}
            for mid in mop.missing():
                if mid.pid in wanted:
                    wanted[mid.pid].append((mid.seq, mid.seq))
            for pid, ivs in ripe_ids.items():
                part = intersect(normalize(wanted[pid]), ivs)
                if part:
                    skip_ids[pid] = part
            self._defer_orphans(skip_ids)
        skip_gseqs = intersect(normalize(mop.missing_gseqs()), ripe_gseqs) if ripe_gseqs else []
        if skip_ids or skip_gseqs:
            self._skip(skip_ids, skip_gseqs, now)
            next_at.append(now + self.config.nack_delay)  # what the skip released may miss more
        if (self._reports or self._gseq_reports) and next_at:
            self._check_at = min(next_at)

    def _defer_orphans(self, skip: Digest) -> None:
        """``ids`` mode: a stub whose parent is neither delivered nor skipped with it
        waits (S_b places it right after its parent)."""
        if not self._heard_stubs:
            return
        core = self.inst.mop.core
        for mid, stub in list(self._heard_stubs.items()):
            ivs = skip.get(mid.pid)
            if not ivs or not any(lo <= mid.seq <= hi for lo, hi in ivs):
                continue
            parent = stub.parent
            if (parent == ROOT or core.delivered(parent)
                    or any(lo <= parent.seq <= hi for lo, hi in skip.get(parent.pid, []))):
                continue
            rest = subtract(ivs, [(mid.seq, mid.seq)])
            if rest:
                skip[mid.pid] = rest
            else:
                del skip[mid.pid]
            self.stats.skips_deferred += 1

    def _skip(self, ids: Digest, gseqs: Intervals, now: float) -> None:
        inst = self.inst
        node = inst.node
        mop = inst.mop
        released, positions = mop.skip(ids, gseqs)
        n_ids = sum(count(ivs) for ivs in ids.values())
        n_pos = count(positions)
        self.stats.skipped += n_ids
        self.stats.skipped_positions += n_pos
        used = [s for s in self._heard_stubs.values()
                if any(lo <= s.mid.seq <= hi for lo, hi in ids.get(s.mid.pid, []))]
        for stub in used:
            self._heard_stubs.pop(stub.mid, None)
        node.store.note_skipped(self.gid, ids, getattr(mop.core, "next_gseq", 1) - 1
                                if inst.order == Order.TOTAL else 0, used)
        self._trace(ids, positions, {s.mid: s for s in used}, now)
        # A total-order group passes over positions (one message each, its identity
        # known or not); the identities given up there are those same messages.
        node.emit(MessagesSkipped(self.gid, ids, positions,
                                    n_pos if inst.order == Order.TOTAL else n_ids))
        for m in released:
            inst.deliver(m)

    def _trace(self, ids: Digest, gseqs: Intervals, stubs: dict[MessageId, Message],
               now: float) -> None:
        """One ``skip`` event per message given up (``parent`` when its stub told it),
        and one per run of positions passed over without a known message."""
        node = self.inst.node
        if not node.tracing:
            return
        order = self.inst.order
        out: list[TraceEvent] = []
        for pid in sorted(ids):
            for lo, hi in ids[pid]:
                for seq in range(lo, hi + 1):
                    mid = MessageId(pid, seq)
                    stub = stubs.get(mid)
                    out.append(TraceEvent(
                        node.run_id, self.pid, now, "skip", self.gid, str(mid),
                        str(stub.parent) if stub is not None else None, order,
                        stub.gseq if stub is not None and order == Order.TOTAL else None, None,
                        None, detail_json(reason="gone")))
        for lo, hi in gseqs:
            out.append(TraceEvent(node.run_id, self.pid, now, "skip", self.gid, None, None,
                                  order, lo, None, None,
                                  detail_json(reason="gone", positions=[lo, hi])))
        node.record_traces(out)


def earliest(*deadlines: float | None) -> float | None:
    """The earliest of the deadlines that are set (None if none is)."""
    best = None
    for d in deadlines:
        if d is not None and (best is None or d < best):
            best = d
    return best
