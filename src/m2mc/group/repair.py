"""Loss repair for one group, beyond the seeds: NACKs modelled on NORM (RFC 5740).

MOP assumes a reliable broadcast (seeds/000 III.A.5); M2MP loses packets. Each
node tracks, per sender, the highest seqno it has heard of (``hw``: from data,
from status messages, from stamps). Holes below it, parents that held messages
wait for, and (total order) missing gseqs are *needed*.

Requester: a hole must be ``nack_delay`` old (reordering is not loss); then a
NACK is scheduled after a random back-off: uniform in ``[0, nack_backoff]`` in a
group of up to ``repair_everyone`` members; in a larger one NORM's truncated
exponential for the group's size over a window ``ln(members) + 1`` times as wide
(group/backoff.py), so that most of the members that lost the same message draw
late and hear the first NACK before theirs. A NACK
overheard from another node for the same ranges suppresses ours (those ranges
are held off for ``nack_holdoff``), so a loss seen by many costs one NACK. After
sending, a range is held off for ``nack_holdoff``, doubling (up to
``nack_holdoff_max``) while nobody repairs it.

Responder: in a group of up to ``repair_everyone`` holders (the members but the
requester) every holder retransmits a requested message after a random back-off in
``[0, repair_backoff]``, fast and redundant. In a larger one, the message's own
sender does so, and other holders are backups, so that the repairs of one NACK
do not grow with the group: they are ranked per requester (a hash of the requester's
and the holder's pids orders the members, the same at every node that knows the same
members) and taken in bands of ``repair_band``. A requester's NACK naming a message is
its *first* ask for it when it comes more than ``2 * nack_holdoff_max`` after its
previous one (at most ``max_pending_repairs`` (requester, message) pairs are counted;
past that an ask counts as a second); its n-th ask (after n - 1 that were not answered
in time) calls on band n - 2 while the message's
sender is a member heard from lately (``sender_alive``), band n - 1 otherwise, cycling
through the bands; a holder of the band called retransmits after ``repair_backoff *
(2 + 2 * place)`` plus a random ``[0, repair_backoff]``, ``place`` its place in the
band, so the sender's copy (or the band's first) is usually heard first. A copy of
that message overheard meanwhile (data, repair or sync response) cancels any
retransmission (docs/decisions.md, "Repairs of one NACK do not grow with the group").

Bounds: ``max_nack_intervals`` intervals per NACK, over all its senders (plus
one interval of gseqs; the rest is ignored, counted ``nack_intervals_ignored``),
``max_pending_repairs`` messages waiting to be retransmitted (a NACK that finds
the table full is not served beyond it, counted ``repairs_refused``), hold-offs
for at most ``max_senders`` senders (an overheard NACK naming more is not
remembered for them, counted ``holdoffs_refused``: at worst we NACK those ranges
ourselves), and status high-waters more than ``max_seq_jump`` past what we know
are ignored.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from m2mc.group.backoff import suppression_backoff
from m2mc.group.codec import Digest, Entries, LogEntry, Nack
from m2mc.group.config import GroupConfig
from m2mc.group.seqsets import Intervals, holes, normalize, subtract
from m2mc.ordering import Message, MessageId
from m2mc.store import GroupStore
from m2mc.trace.schema import detail_json

_Holdoff = list[tuple[int, int, float]]  # (lo, hi, until)


@dataclass(slots=True)
class RepairStats:
    nacks_sent: int = 0
    nacks_suppressed: int = 0
    nacks_received: int = 0
    retransmitted: int = 0
    repairs_suppressed: int = 0
    repairs_refused: int = 0
    absurd_high_water: int = 0
    absurd_seq: int = 0
    senders_refused: int = 0
    nack_intervals_ignored: int = 0  # intervals of a NACK past max_nack_intervals
    holdoffs_refused: int = 0  # overheard NACK ranges of senders past the hold-off bound
    status_truncated: int = 0  # our status messages cut to max_status_senders high-waters
    status_entries_ignored: int = 0  # high-waters of a status past max_status_senders
    holder_nacks: int = 0  # NACKs made at once: a SyncReq named messages we lacked


@dataclass(frozen=True, slots=True)
class Needs:
    ranges: Digest
    gseqs: Intervals

    def __bool__(self) -> bool:
        return bool(self.ranges or self.gseqs)


class Repair:
    def __init__(self, pid: str, gid: str, config: GroupConfig, rng: random.Random,
                 store: GroupStore) -> None:
        self.pid = pid
        self.gid = gid
        self.config = config
        self.rng = rng
        self.store = store
        self.hw: dict[str, int] = {}
        # Members (membership is bounded itself) are tracked even past max_senders, so
        # a flood of forged sender ids cannot lock a real member out.
        self.known: Callable[[str], bool] = lambda pid: False
        # Total order: decided log entries in lo..hi that stored records do not carry
        # (membership records; positions whose data we lack too), answered by DECIDED.
        self.decided: Callable[[int, int], Entries] = lambda lo, hi: []
        self.pending_decided: dict[int, LogEntry] = {}
        self._ready_decided: Entries = []
        self._check_at: float | None = None
        self._nack_at: float | None = None
        self._holdoff: dict[str, _Holdoff] = {}
        self._gseq_holdoff: _Holdoff = []
        self.tries: dict[str, int] = {}
        # Every retransmission waiting; those in _backup (our rank's turn, not our own
        # messages) wait for _backup_at, the others for _repair_at.
        self.pending: dict[MessageId, Message] = {}
        self._backup: set[MessageId] = set()
        self._repair_at: float | None = None
        self._backup_at: float | None = None
        # The group's members (the rank of a backup holder is counted among them) and
        # whether a member was heard from lately (its own repairs can be waited for).
        self.members: Callable[[], Sequence[str]] = lambda: ()
        self.sender_alive: Callable[[str, float], bool] = lambda pid, now: False
        # (requester, message) -> (its asks in a row, when we heard the last): which
        # band it calls (at most max_pending_repairs remembered)
        self._asks: dict[tuple[str, MessageId], tuple[int, float]] = {}
        # _place's answers per requester, for the members they were counted among
        self._places: dict[str, tuple[int, int]] = {}
        self._places_among: Sequence[str] = ()
        self.stats = RepairStats()

    # ------------------------------------------------------- what we know of
    def plausible(self, pid: str, seq: int) -> bool:
        """False for a record to drop: a seqno absurdly far past what we know of its
        sender, or a new sender past the ``max_senders`` bound."""
        h = self.hw.get(pid)
        if h is None:
            if len(self.hw) >= self.config.max_senders and not self.known(pid):
                self.stats.senders_refused += 1
                return False
            h = 0
        if seq - h > self.config.max_seq_jump:
            self.stats.absurd_seq += 1
            return False
        return True

    def note(self, pid: str, seq: int, now: float) -> None:
        """A record of ``pid`` numbered ``seq`` was seen (new or duplicate)."""
        h = self.hw.get(pid, 0)
        if seq > h:
            self.hw[pid] = seq
            if seq > h + 1:
                self.suspect(now)

    def note_high_water(self, pid: str, seq: int, now: float) -> None:
        """A status message says ``pid`` sent up to ``seq``."""
        h = self.hw.get(pid)
        if h is None and len(self.hw) >= self.config.max_senders and not self.known(pid):
            self.stats.senders_refused += 1
            return
        h = h or 0
        if seq <= h:
            return
        if seq - h > self.config.max_seq_jump:
            self.stats.absurd_high_water += 1
            return
        self.hw[pid] = seq
        self.suspect(now)

    def progress(self, pid: str, now: float) -> None:
        """A new message of ``pid`` arrived: its ranges are being repaired. Ranges of
        ``pid`` held off longer (while nobody answered) are asked for again after
        ``nack_holdoff`` at most: one answer lost on the way must not cost
        ``nack_holdoff_max`` (a NACK is answered by few holders: see the responder)."""
        if self.tries.pop(pid, None) is None:
            return
        entries = self._holdoff.get(pid)
        if entries:
            cap = now + self.config.nack_holdoff
            if any(until > cap for _, _, until in entries):
                self._holdoff[pid] = [(lo, hi, min(until, cap)) for lo, hi, until in entries]
                if self._check_at is None or self._check_at > cap:
                    self._check_at = cap

    def suspect(self, now: float) -> None:
        """Something may be missing: look in ``nack_delay``."""
        at = now + self.config.nack_delay
        if self._check_at is None or at < self._check_at:
            self._check_at = at

    def defer(self, until: float) -> None:
        """Look for holes no earlier than ``until`` (a catch-up is under way)."""
        self._check_at = max(until, self._check_at or until)

    # ------------------------------------------------------------ requester
    def needs(self, digest: Digest, missing: list[MessageId], gseq_holes: Intervals,
              now: float) -> Needs:
        """What we lack now, minus ranges held off."""
        wanted: dict[str, Intervals] = {}
        for pid in sorted(self.hw):
            if pid == self.pid:
                continue
            gaps = holes(digest.get(pid, []), self.hw[pid])
            if gaps:
                wanted[pid] = gaps
        for mid in missing:
            if mid.pid != self.pid:
                wanted.setdefault(mid.pid, []).append((mid.seq, mid.seq))
        ranges: Digest = {}
        for pid in sorted(wanted):
            ivs = normalize(wanted[pid])
            held = self._active_holdoff(self._holdoff.get(pid), now)
            if held is not None:
                self._holdoff[pid] = held
                ivs = subtract(ivs, normalize((lo, hi) for lo, hi, _ in held))
            elif pid in self._holdoff:
                del self._holdoff[pid]
            if ivs:
                ranges[pid] = ivs
        gseqs = gseq_holes
        if gseqs:
            held = self._active_holdoff(self._gseq_holdoff, now) or []
            self._gseq_holdoff = held
            gseqs = subtract(gseqs, normalize((lo, hi) for lo, hi, _ in held))
        return Needs(ranges, gseqs)

    @staticmethod
    def _active_holdoff(entries: _Holdoff | None, now: float) -> _Holdoff | None:
        if not entries:
            return None
        live = [e for e in entries if e[2] > now]
        return live or None

    def check(self, needs: Needs, now: float) -> None:
        """Timer: schedule a NACK for what is needed, or look again when a holdoff ends."""
        self._check_at = None
        if needs:
            if self._nack_at is None:
                self._nack_at = now + self._backoff()
            return
        # Look again when the first live holdoff ends (a range still missing then
        # is asked for again); forget the expired ones.
        self._expire_holdoffs(now)
        self._gseq_holdoff = self._active_holdoff(self._gseq_holdoff, now) or []
        ends = [e[2] for entries in self._holdoff.values() for e in entries]
        ends += [e[2] for e in self._gseq_holdoff]
        if ends:
            self._check_at = min(ends)

    def _backoff(self) -> float:
        config = self.config
        return suppression_backoff(self.rng, config.nack_backoff, len(self.members()),
                                   config.repair_everyone, widen=True)

    def nack_due(self, now: float) -> bool:
        return self._nack_at is not None and now >= self._nack_at

    def make_nack(self, needs: Needs, now: float) -> Nack | None:
        """Timer: the NACK for what is still needed (None if others' NACKs covered it)."""
        self._nack_at = None
        if not needs:
            self.stats.nacks_suppressed += 1
            self.check(needs, now)
            return None
        budget = self.config.max_nack_intervals
        ranges: Digest = {}
        for pid, ivs in needs.ranges.items():
            if budget <= 0:
                break
            ivs = ivs[:budget]
            budget -= len(ivs)
            ranges[pid] = ivs
            tries = self.tries.get(pid, 0)
            self.tries[pid] = tries + 1
            until = now + min(self.config.nack_holdoff * (2 ** min(tries, 16)),
                              self.config.nack_holdoff_max)
            self._holdoff.setdefault(pid, []).extend((lo, hi, until) for lo, hi in ivs)
        gseqs = needs.gseqs[:max(budget, 1)]
        if gseqs:
            until = now + self.config.nack_holdoff
            self._gseq_holdoff.extend((lo, hi, until) for lo, hi in gseqs)
        self.stats.nacks_sent += 1
        self.check(Needs({}, []), now)
        return Nack(self.pid, ranges, gseqs)

    def requester_holds(self, digest: Digest, mine: Digest, now: float) -> bool:
        """MSP both ways (docs/decisions.md): a member's SyncReq says what it holds. What
        it holds and we lack (sent while it was away, or lost) is asked for at once: its
        high-waters are noted and a NACK is scheduled after the usual random back-off but
        without ``nack_delay``, so that a NACK overheard from another member still
        suppresses ours and n members lacking the same messages cost one request. The
        requester's repair answers it. Ranges we asked for twice or more in vain (nobody
        in range had them: hold-offs doubled) are asked for again at once; a range asked
        for once stays held off, so that a crowd of requesters costs one NACK, not one
        each. Returns True if the requester holds anything we lack."""
        lacking = ask = False
        for pid, ivs in digest.items():
            if pid == self.pid or not ivs:
                continue
            self.note_high_water(pid, max(hi for _, hi in ivs), now)  # bounded as a status
            cap = self.hw.get(pid, 0)
            theirs = normalize((lo, min(hi, cap)) for lo, hi in ivs if lo <= cap)
            gaps = subtract(theirs, normalize(mine.get(pid, [])))
            if not gaps:
                continue
            lacking = True
            held = self._holdoff.get(pid)
            if held and self.tries.get(pid, 0) >= 2:
                self.tries.pop(pid)
                held = [(a, b, until) for lo, hi, until in held
                        for a, b in subtract([(lo, hi)], gaps)]
                self._holdoff[pid] = held
            live = self._active_holdoff(held, now) or []
            if subtract(gaps, normalize((lo, hi) for lo, hi, _ in live)):
                ask = True
        if ask:
            self.stats.holder_nacks += 1
            at = now + self._backoff()
            if self._nack_at is None or at < self._nack_at:
                self._nack_at = at
        return lacking

    def bounded_nack(self, nack: Nack,
                      count: bool = True) -> tuple[list[tuple[str, Intervals]], Intervals]:
        """The part of ``nack`` we look at: ``max_nack_intervals`` intervals over all its
        senders, in order, and as many gseq intervals as are left (at least one, as
        :meth:`make_nack` sends); the rest is counted in ``nack_intervals_ignored``."""
        budget = self.config.max_nack_intervals
        ranges: list[tuple[str, Intervals]] = []
        ignored = 0
        for pid, ivs in nack.ranges.items():
            take = ivs[:budget] if budget > 0 else []
            budget -= len(take)
            ignored += len(ivs) - len(take)
            if take:
                ranges.append((pid, take))
        gseqs = nack.gseqs[:max(budget, 1)]
        ignored += len(nack.gseqs) - len(gseqs)
        if ignored and count:
            self.stats.nack_intervals_ignored += ignored
        return ranges, gseqs

    def overheard_nack(self, nack: Nack, now: float) -> None:
        """Another node asked for these: hold our own request for them off."""
        until = now + self.config.nack_holdoff
        cap = 4 * self.config.max_nack_intervals
        ranges, gseqs = self.bounded_nack(nack, count=False)  # on_nack counts them
        holdoff = self._holdoff
        for pid, ivs in ranges:
            if pid == self.pid:
                continue
            entries = holdoff.get(pid)
            if entries is None:
                if len(holdoff) >= self.config.max_senders:
                    self._expire_holdoffs(now)
                    if len(holdoff) >= self.config.max_senders:
                        self.stats.holdoffs_refused += 1
                        continue
                entries = holdoff[pid] = []
            entries.extend((lo, hi, until) for lo, hi in ivs)
            if len(entries) > cap:
                del entries[:len(entries) - cap]
        if gseqs:
            self._gseq_holdoff.extend((lo, hi, until) for lo, hi in gseqs)
            del self._gseq_holdoff[:-cap]

    def _expire_holdoffs(self, now: float) -> None:
        for pid in list(self._holdoff):
            live = self._active_holdoff(self._holdoff[pid], now)
            if live is None:
                del self._holdoff[pid]
            else:
                self._holdoff[pid] = live

    @property
    def holdoff_senders(self) -> int:
        return len(self._holdoff)

    @property
    def holdoff_ranges(self) -> int:
        """The most ranges held off for one sender, or for total-order positions
        (each bounded by 4 x ``max_nack_intervals``; the fuzzer checks it)."""
        return max([len(self._gseq_holdoff), *map(len, self._holdoff.values())])

    # ------------------------------------------------------------ responder
    def on_nack(self, nack: Nack, now: float, counted: bool = True) -> None:
        """Schedule retransmission of what we hold among the requested messages
        (``counted`` False: not a NACK, a GONE naming messages we may hold)."""
        if counted:
            self.stats.nacks_received += 1
        ranges, gseqs = self.bounded_nack(nack, count=counted)
        room = self.config.max_pending_repairs - len(self.pending)
        found: list[Message] = []
        full = False
        store, gid = self.store, self.gid
        fetches = [partial(store.seq_range, gid, pid, lo, hi) for pid, ivs in ranges
                   for lo, hi in ivs]
        fetches += [partial(store.gseq_range, gid, lo, hi) for lo, hi in gseqs]
        for fetch in fetches:
            want = room - len(found)
            if want <= 0:
                full = True
                break
            got = fetch(want + 1)  # one more than there is room for: is the table full?
            if len(got) > want:
                full = True
                found.extend(got[:want])
                break
            found.extend(got)
        # Total order: decided entries (membership records, positions whose data the
        # asker may lack) in the gseq ranges asked for, bounded like the messages.
        for lo, hi in gseqs:
            for pos, entry in self.decided(lo, hi):
                if len(self.pending_decided) < self.config.max_pending_repairs:
                    self.pending_decided[pos] = entry
        if full:  # the NACK asked for more than the table had room for
            self.stats.repairs_refused += 1
        if not found:
            if self.pending_decided and self._repair_at is None:
                self._repair_at = now + self.rng.uniform(0.0, self.config.repair_backoff)
            return
        requester = nack.sender
        place = self._place(requester) if counted else None
        if place is not None and place[1] <= self.config.repair_everyone:
            place = None  # a small group: every holder answers at once, as before
        backoff = self.config.repair_backoff
        pending, backup = self.pending, self._backup
        fast = bool(self.pending_decided)
        late = False
        for m in found:
            mid = m.mid
            if place is None or mid.pid == self.pid:  # a GONE's, or our own: at once
                fast = True
                pending[mid] = m
                backup.discard(mid)
                continue
            turn = self._ask(requester, mid, now) - 1 - self.sender_alive(mid.pid, now)
            if turn < 0 or not self._called(turn, place):
                continue  # not our band's turn: another holder answers this ask
            if mid not in pending:
                pending[mid] = m
                backup.add(mid)
            late = True
        if fast and self._repair_at is None:
            self._repair_at = now + self.rng.uniform(0.0, backoff)
        if late and self._backup_at is None and place is not None:
            self._backup_at = (now + backoff * (2 + 2 * (place[0] % self.config.repair_band))
                               + self.rng.uniform(0.0, backoff))

    def _ask(self, requester: str, mid: MessageId, now: float) -> int:
        """Count an ask of ``requester`` for ``mid``: its asks in a row (1: a first)."""
        asks = self._asks
        memory = 2 * self.config.nack_holdoff_max
        # An ask older than ``memory`` no longer counts, so it is forgotten at once: the
        # dict is kept in the order of the last asks (an ask moves its key to the end),
        # and its front is the oldest. Waiting for the bound to prune let every node of
        # a long-lived group hold max_pending_repairs of them (issue 35 item 4).
        while asks:
            oldest = next(iter(asks))
            if now - asks[oldest][1] <= memory:
                break
            del asks[oldest]
        key = (requester, mid)
        last = asks.pop(key, None)
        if last is None and len(asks) >= self.config.max_pending_repairs:
            return 2  # not remembered: answered as a second ask (backups called)
        count = last[0] + 1 if last is not None else 1
        asks[key] = (count, now)
        return count

    def _place(self, requester: str) -> tuple[int, int]:
        """Our rank among the members other than ``requester`` for its asks, and how
        many we are (with no members known, we are alone: every band is ours). Kept per
        requester until the members change: a CRC per member and NACK is a lot in a
        group of a thousand."""
        members = self.members()
        if members is not self._places_among and members != self._places_among:
            self._places.clear()
            self._places_among = members
        place = self._places.get(requester)
        if place is None:
            if len(self._places) >= 256:
                self._places.clear()
            place = self._places[requester] = self._count_place(requester, members)
        return place

    def _count_place(self, requester: str, members: Sequence[str]) -> tuple[int, int]:
        others = [pid for pid in members if pid != requester and pid != self.pid]
        salt = requester.encode() + b"\0"
        mine = zlib.crc32(salt + self.pid.encode())
        rank = 0
        for pid in others:
            h = zlib.crc32(salt + pid.encode())
            if h < mine or (h == mine and pid < self.pid):
                rank += 1
        return rank, len(others) + 1

    def _called(self, turn: int, place: tuple[int, int]) -> bool:
        """Is our band the one called on ``turn`` (0: the first band)?"""
        rank, holders = place
        band = self.config.repair_band
        bands = -(-holders // band)
        return rank // band == turn % bands

    def overheard(self, mid: MessageId) -> None:
        """A copy of ``mid`` went by: no need to retransmit it."""
        if self.pending and self.pending.pop(mid, None) is not None:
            self.stats.repairs_suppressed += 1
            self._backup.discard(mid)

    def sent_again(self, messages: list[Message]) -> None:
        """We sent ``messages`` again unasked (group/repeats.py): a retransmission of
        one of them that waits on a NACK would be a second copy."""
        if self.pending:
            for m in messages:
                if self.pending.pop(m.mid, None) is not None:
                    self._backup.discard(m.mid)

    def overheard_decided(self, entries: Entries) -> None:
        """Decided entries went by: no need to send them again."""
        if self.pending_decided:
            for pos, _ in entries:
                self.pending_decided.pop(pos, None)

    def repair_due(self, now: float) -> list[Message]:
        pending, backup = self.pending, self._backup
        out: list[Message] = []
        if self._backup_at is not None and now >= self._backup_at:
            self._backup_at = None
            # (in the order they were asked for: a set's order depends on string hashing,
            # and a simulation must be the same in every process)
            out = [m for mid, m in pending.items() if mid in backup]
            for m in out:
                del pending[m.mid]
            backup.clear()
        if self._repair_at is not None and now >= self._repair_at:
            self._repair_at = None
            if backup:
                out += [m for mid, m in pending.items() if mid not in backup]
                for m in out:
                    pending.pop(m.mid, None)
            else:
                out += pending.values()
                pending.clear()
            if self.pending_decided:
                self._ready_decided = sorted(self.pending_decided.items())
                self.pending_decided.clear()
        self.stats.retransmitted += len(out)
        return out

    def take_decided(self) -> Entries:
        """The decided entries due with the last repair_due (total order)."""
        out, self._ready_decided = self._ready_decided, []
        return out

    @property
    def repair_deadline(self) -> float | None:
        if self._repair_at is None or self._backup_at is None:
            return self._repair_at if self._backup_at is None else self._backup_at
        return min(self._repair_at, self._backup_at)

    @property
    def pending_repairs(self) -> int:
        return len(self.pending)

    # ---------------------------------------------------------------- timers
    def check_due(self, now: float) -> bool:
        return self._check_at is not None and now >= self._check_at

    def next_deadline(self) -> float | None:
        best = self._check_at
        for d in (self._nack_at, self._repair_at, self._backup_at):
            if d is not None and (best is None or d < best):
                best = d
        return best


def nack_detail(nack: Nack) -> str:
    """A sent NACK's trace detail (its ranges: what the pipeline's time to repair starts
    from)."""
    return detail_json(senders=sorted(nack.ranges), intervals=sum(map(len, nack.ranges.values())),
                       gseqs=len(nack.gseqs), ranges=nack.ranges, gseq_ranges=nack.gseqs)
