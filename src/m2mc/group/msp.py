"""MSP, the Member Synchronization Protocol of one group (seeds/000 VI, IX.D).

Requester: ``SyncReq = <SyncMsgId = (pid, syncSeqno, gid), digest>``. The seed
sends the whole SyncMsgList; we send the ordering core's digest (intervals of
seqnos per sender), which names the same set in a few pairs.

Responder, for the latest request of each process (the PSSIT): a MIR (Message
Identities Repository, here intervals per sender) = what our GrpMsgList holds
minus the digest, kept in the MIRIndexTable under the SyncMsgId; a counter with
a random start (``sync_backoff``); every SyncResp overheard for the same
SyncMsgId removes its messages from the MIR and, if its sender still has more
to send, pushes our counter back; when the counter runs out we send what is
left, split into messages of at most ``sync_chunk_bytes``. A response that
arrives before its request creates the MIR without starting the counter, as
the seed's SyncRespRecv state does. A responder with nothing to add sends one
empty response unless it heard another, so the requester learns it is up to date.

Only current members are answered (``is_member``, set by the group instance):
a request of any other process is refused and counted (``requests_refused``),
and a response to one creates no MIR (``responses_ignored``). So an outsider
cannot make the members multicast their history. A joining node is a member as
soon as its JOIN, which it sends just before its request, is processed; should
the request overtake the JOIN (datagrams reordered, or the JOIN lost and the
joiner's status bringing the news), the latest refused request of each of
``max_mirs`` processes is kept for ``sync_timeout`` and answered when the
process is admitted (:meth:`admitted`, counted ``requests_admitted_late``).

Bounds: PSSIT rows (``max_pssit``, least recently used forgotten), concurrent
MIRs (``max_mirs``, further requests refused and counted ``mirs_refused``),
what one request can cause: a response series stops at ``max_sync_messages``
messages or ``max_sync_bytes`` bytes of records (counted ``sync_truncated``;
the requester's gap repair fetches the rest), and the digest of a request, ours
or another's, is cut to ``max_digest_intervals`` intervals (``digests_truncated``).
"""

from __future__ import annotations

import random
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush

from m2mc.group.backoff import suppression_backoff
from m2mc.group.codec import Digest, SyncReq, SyncResp, record_size
from m2mc.group.config import GroupConfig
from m2mc.group.seqsets import count, normalize, subtract
from m2mc.ordering import Message
from m2mc.store import GroupStore

SyncMsgId = tuple[str, int]  # (pid, syncSeqno); the gid is the MSP instance's own


@dataclass(slots=True)
class Mir:
    missing: Digest
    deadline: float | None  # None: made from a response, its request not seen yet
    heard: bool = False  # someone answered this request already


@dataclass(slots=True)
class CatchUp:
    """The requester's view of its current synchronization."""

    sync_seqno: int
    attempts: int
    deadline: float
    recovered: int = 0
    remaining: int = 0
    responses: int = 0
    done: bool = False
    peer_heard: bool = False  # live group traffic arrived while this request was unanswered


@dataclass(slots=True)
class MspStats:
    requests_sent: int = 0
    requests_answered: int = 0
    responses_sent: int = 0
    responses_suppressed: int = 0
    stale_discarded: int = 0
    mirs_refused: int = 0
    requests_refused: int = 0  # from processes that are not current members
    requests_admitted_late: int = 0  # refused ones answered when their JOIN came after
    responses_ignored: int = 0  # responses to requests of non-members: no MIR made
    sync_truncated: int = 0  # series cut at max_sync_messages or max_sync_bytes
    digests_truncated: int = 0  # digests (ours or a request's) cut to max_digest_intervals
    messages_sent: int = 0
    requests_ahead: int = 0  # requests naming messages we lacked: NACKed at once (both ways)
    extra: dict[str, int] = field(default_factory=dict)


class Msp:
    def __init__(self, pid: str, gid: str, config: GroupConfig, rng: random.Random,
                 store: GroupStore, digest: Callable[[], Digest],
                 high_waters: Callable[[], dict[str, int]] | None = None) -> None:
        self.pid = pid
        self.gid = gid
        self.config = config
        self.rng = rng
        self.store = store
        self._digest = digest
        self._meta_key = f"sync_seqno/{gid}"
        self.sync_seqno = int(store.get_meta(self._meta_key) or 0)
        self.pssit: OrderedDict[str, int] = OrderedDict()
        self.mirs: dict[SyncMsgId, Mir] = {}
        # Kept beside ``mirs`` so that nothing per message takes time in their number:
        # the syncSeqnos of each requester's MIRs, and a heap of (deadline, pid,
        # syncSeqno) with an entry for every deadline a MIR was given (an entry whose MIR
        # is gone or has another deadline now is stale, dropped when it comes to the top).
        self._mir_seqnos: dict[str, set[int]] = {}
        self._deadlines: list[tuple[float, str, int]] = []
        # Responses of a series held back after its first one (see :meth:`due`):
        # SyncMsgId -> (release time, the rest of the series).
        self.series: dict[SyncMsgId, tuple[float, list[SyncResp]]] = {}
        self.catchup: CatchUp | None = None
        self.waiting = False  # a request of ours is unanswered and no peer heard since
        self.requested_at = float("-inf")  # when we last sent a request
        self.stats = MspStats()
        self._high_waters = high_waters
        # Whose requests are answered: current members (GroupInstance sets it), and
        # how many they are (a response's back-off grows with them: group/backoff.py).
        self.is_member: Callable[[str], bool] = lambda pid: True
        self.group_size: Callable[[], int] = lambda: 0
        # The latest refused request per process (max_mirs, oldest forgotten): answered
        # if its JOIN arrives within sync_timeout (see admitted()).
        self.refused: OrderedDict[str, tuple[float, SyncReq]] = OrderedDict()
        # Per requester, when it came into our view and the high-water of every sender
        # then (see :meth:`mark`): a catch-up answers for history before that point.
        self.marks: OrderedDict[str, tuple[float, dict[str, int]]] = OrderedDict()
        # Records broadcast lately in responses and repairs, ours or overheard (see
        # :meth:`broadcast`): (when, their digest), kept for 2 * sync_backoff.
        self._recent: deque[tuple[float, Digest]] = deque()

    # ------------------------------------------------------------- requester
    def request(self, now: float) -> SyncReq:
        """SendSyncReq: a new syncSeqno (persisted, so a restarted node is not
        taken for a stale one), and the digest of what we hold."""
        self.sync_seqno += 1
        self.requested_at = now
        self.store.set_meta(self._meta_key, str(self.sync_seqno))
        attempts = self.catchup.attempts + 1 if self.catchup and not self.catchup.done else 1
        previous = self.catchup
        self.catchup = CatchUp(self.sync_seqno, attempts, now + self.config.sync_timeout)
        if previous is not None and not previous.done:
            self.catchup.recovered = previous.recovered
        self.stats.requests_sent += 1
        self.waiting = True
        digest = self._digest()
        bounded = self._bounded(digest)
        return SyncReq(self.pid, self.sync_seqno, bounded)

    def _bounded(self, digest: Digest) -> Digest:
        limit = self.config.max_digest_intervals
        if sum(len(ivs) for ivs in digest.values()) <= limit:
            return digest
        self.stats.digests_truncated += 1
        return _bounded(digest, limit)

    def on_own_response(self, resp: SyncResp, new_records: int, now: float) -> bool:
        """A response to one of our requests; returns True if progress changed."""
        c = self.catchup
        if c is None:
            return False
        c.recovered += new_records
        c.responses += 1
        self.waiting = False
        if resp.sync_seqno == c.sync_seqno:
            c.remaining = resp.remaining
            c.deadline = now + self.config.sync_timeout
            if resp.remaining == 0 and not c.done:
                c.done = True
        return True

    def retry_due(self, now: float) -> bool:
        """True if the current request timed out and should be sent again."""
        c = self.catchup
        if c is None or c.done or now < c.deadline:
            return False
        if c.attempts >= self.config.sync_attempts or c.responses or c.peer_heard:
            # Gap repair (NACKs against status high-waters) does the rest. A member we
            # hear live tells us its high-water, so a blind repeat is not needed: made
            # while data streams in, it would ask for everything still in flight to us
            # and every responder would send it all again.
            c.done = True
            return False
        return True

    def peer_traffic(self) -> None:
        """Data or status from another member arrived (see :meth:`retry_due`)."""
        c = self.catchup
        if c is not None and not c.responses and not c.done:
            c.peer_heard = True
        self.waiting = False

    # ------------------------------------------------------------- responder
    def _latest(self, pid: str, seqno: int) -> int:
        """Compare with PSSIT[pid]: -1 stale, 0 same request, 1 newer (recorded)."""
        known = self.pssit.get(pid, 0)
        if seqno < known:
            return -1
        self.pssit[pid] = seqno
        self.pssit.move_to_end(pid)
        while len(self.pssit) > self.config.max_pssit:
            old, _ = self.pssit.popitem(last=False)
            for seqno in sorted(self._mir_seqnos.get(old, ())):
                self._drop_mir((old, seqno))
            for key in [k for k in self.series if k[0] == old]:
                del self.series[key]
        return 0 if seqno == known else 1

    def on_request(self, req: SyncReq, now: float) -> None:
        """SyncReqRecv, for a request of a current member (others are refused)."""
        if not self.is_member(req.sender):
            self.stats.requests_refused += 1
            refused = self.refused
            # Kept with its digest cut as if answered: at most max_mirs requests of
            # max_digest_intervals intervals each.
            refused[req.sender] = (now, SyncReq(req.sender, req.sync_seqno,
                                                self._bounded(req.digest)))
            refused.move_to_end(req.sender)
            while len(refused) > self.config.max_mirs:
                refused.popitem(last=False)
            return
        key = (req.sender, req.sync_seqno)
        latest = self._latest(req.sender, req.sync_seqno)
        if latest < 0:
            self.stats.stale_discarded += 1
            return
        self._drop_older(req.sender, req.sync_seqno)
        have = {pid: normalize(ivs) for pid, ivs in self._bounded(req.digest).items()}
        mir = self.mirs.get(key)
        if mir is None:
            if latest == 0:
                return  # answered already (the MIR is gone): a repeated copy of the request
            if len(self.mirs) >= self.config.max_mirs:
                self.stats.mirs_refused += 1
                return
            mir = self._add_mir(key, Mir(self._subtract(self._subtract(
                self._history(req.sender, now), have), self._recently_broadcast(now)), None))
        else:
            mir.missing = self._subtract(mir.missing, have)
        if mir.deadline is None:
            self._set_deadline(key, mir, now + suppression_backoff(
                self.rng, self.config.sync_backoff, self.group_size(), self.config.repair_everyone))
        self.stats.requests_answered += 1

    def admitted(self, pid: str, now: float) -> None:
        """``pid`` became a current member: answer its request refused just before."""
        held = self.refused.pop(pid, None) if self.refused else None
        if held is None or now - held[0] > self.config.sync_timeout:
            return
        self.stats.requests_admitted_late += 1
        self.on_request(held[1], now)

    def on_response(self, resp: SyncResp, now: float) -> None:
        """SyncRespRecv / UpdateMIR for a response to someone else's request."""
        if not self.is_member(resp.requester):  # we would not answer that request
            self.stats.responses_ignored += 1
            return
        key = (resp.requester, resp.sync_seqno)
        latest = self._latest(resp.requester, resp.sync_seqno)
        if latest < 0:
            self.stats.stale_discarded += 1
            return
        self._drop_older(resp.requester, resp.sync_seqno)
        held = self.series.get(key)
        if held is not None and resp.sender < self.pid:
            # Two responders started at once: the lower pid goes on, we stop here.
            del self.series[key]
            self.stats.responses_suppressed += len(held[1])
        sent = _digest_of(resp.records)
        mir = self.mirs.get(key)
        if mir is None:
            if len(self.mirs) >= self.config.max_mirs:
                self.stats.mirs_refused += 1
                return
            self._add_mir(key, Mir(self._subtract(self._subtract(
                self._history(resp.requester, now), sent), self._recently_broadcast(now)),
                None, heard=True))
            return
        mir.missing = self._subtract(mir.missing, sent)
        mir.heard = True
        if resp.remaining > 0 and mir.deadline is not None:
            # Another member is still sending: let it finish before we repeat what it
            # has not sent by then (allowing about 100 microseconds per message).
            later = now + self.config.sync_backoff + min(resp.remaining * 1e-4, 10.0) \
                + self.rng.uniform(0.0, 0.05)
            if later > mir.deadline:
                self._set_deadline(key, mir, later)

    def broadcast(self, records: list[Message], now: float) -> None:
        """Records went to every member (a SyncResp for any requester, or a REPAIR; ours
        or overheard): no MIR needs them any more, and a request that crossed them in
        flight is not answered with them either (for ``2 * sync_backoff``). The seed's
        UpdateMIR does this for responses to the same request only; on a broadcast medium
        every requester hears every response, so a crowd of requesters (many nodes back
        in range at once) costs each message once, not once per request. A requester that
        lost them fetches them by gap repair, as it does after UpdateMIR."""
        if not records:
            return
        sent = _digest_of(records)
        for mir in self.mirs.values():
            if mir.missing:
                mir.missing = self._subtract(mir.missing, sent)
        self._recent.append((now, sent))
        self._expire_recent(now)

    def _expire_recent(self, now: float) -> None:
        recent, horizon = self._recent, now - 2 * self.config.sync_backoff
        while recent and (recent[0][0] < horizon or len(recent) > 4 * self.config.max_mirs):
            recent.popleft()

    def _recently_broadcast(self, now: float) -> Digest:
        self._expire_recent(now)
        merged: dict[str, list[tuple[int, int]]] = {}
        for _, digest in self._recent:
            for pid, ivs in digest.items():
                merged.setdefault(pid, []).extend(ivs)
        return {pid: normalize(ivs) for pid, ivs in merged.items()}

    # ------------------------------------------------------------ horizon
    def mark(self, pid: str, now: float) -> None:
        """``pid`` joined (or asked to catch up): from now on it hears the group's
        traffic live, and gap repair (NACKs) covers what it loses of that. Its
        catch-up answers only for the history before this point. Without the mark a
        request that a busy responder handles late (or a repeated request made while
        data streams) would be answered with every message still in flight to the
        requester, and every member would receive all of them twice."""
        if self._high_waters is None:
            return
        self.marks[pid] = (now, self._high_waters())
        self.marks.move_to_end(pid)
        while len(self.marks) > self.config.max_pssit:
            self.marks.popitem(last=False)

    def _history(self, pid: str, now: float) -> Digest:
        """Our digest, cut at ``pid``'s mark (made now if it has none that is recent)."""
        digest = self._digest()
        if self._high_waters is None:
            return digest
        window = self.config.sync_timeout * (self.config.sync_attempts + 1)
        mark = self.marks.get(pid)
        if mark is None or now - mark[0] > window:
            self.mark(pid, now)
            mark = self.marks[pid]
        top = mark[1]
        out: Digest = {}
        for sender, ivs in digest.items():
            hw = top.get(sender, 0)
            cut = [(lo, min(hi, hw)) for lo, hi in ivs if lo <= hw]
            if cut:
                out[sender] = cut
        return out

    def _drop_older(self, pid: str, seqno: int) -> None:
        seqnos = self._mir_seqnos.get(pid)
        if seqnos is not None:
            for older in sorted(s for s in seqnos if s < seqno):
                self._drop_mir((pid, older))
        if self.series:
            for key in [k for k in self.series if k[0] == pid and k[1] < seqno]:
                del self.series[key]

    def _add_mir(self, key: SyncMsgId, mir: Mir) -> Mir:
        self.mirs[key] = mir
        self._mir_seqnos.setdefault(key[0], set()).add(key[1])
        if mir.deadline is not None:
            self._set_deadline(key, mir, mir.deadline)
        return mir

    def _drop_mir(self, key: SyncMsgId) -> Mir:
        mir = self.mirs.pop(key)
        seqnos = self._mir_seqnos[key[0]]
        seqnos.discard(key[1])
        if not seqnos:
            del self._mir_seqnos[key[0]]
        return mir

    def _set_deadline(self, key: SyncMsgId, mir: Mir, deadline: float) -> None:
        mir.deadline = deadline
        heap = self._deadlines
        if len(heap) > 2 * len(self.mirs) + 64:  # mostly stale entries: rebuilt
            heap[:] = [(m.deadline, k[0], k[1]) for k, m in self.mirs.items()
                       if m.deadline is not None]
            heapify(heap)
        heappush(heap, (deadline, key[0], key[1]))

    def _first_deadline(self) -> float | None:
        """The earliest deadline of a MIR (stale heap entries dropped on the way)."""
        heap = self._deadlines
        mirs = self.mirs
        while heap:
            at, pid, seqno = heap[0]
            mir = mirs.get((pid, seqno))
            if mir is not None and mir.deadline == at:
                return at
            heappop(heap)
        return None

    def _subtract(self, mine: Digest, theirs: Digest) -> Digest:
        out: Digest = {}
        for pid in sorted(mine):
            rest = subtract(mine[pid], theirs.get(pid, []))
            if rest:
                out[pid] = rest
        return out

    def due(self, now: float) -> list[SyncResp]:
        """SendSyncResp for every MIR whose counter ran out.

        A series of several responses goes out in two steps: the first response at
        once, the rest ``sync_collision`` later. Two responders whose counters ran
        out together (their random counters less than a one-way delay apart, which
        a busy machine makes likely) hear each other's first response in between,
        and the one with the higher pid drops the rest of its series instead of
        sending the whole history a second time.
        """
        out: list[SyncResp] = []
        for key in [k for k, (at, _) in self.series.items() if at <= now]:
            out.extend(self.series.pop(key)[1])
        first = self._first_deadline()
        expired = ([k for k, m in self.mirs.items() if m.deadline is not None and m.deadline <= now]
                   if first is not None and first <= now else [])
        for key in expired:
            mir = self._drop_mir(key)
            if not mir.missing:
                if mir.heard:
                    self.stats.responses_suppressed += 1
                else:
                    out.append(SyncResp(self.pid, key[0], key[1], [], 0))
                continue
            responses = self._responses(key, mir.missing)
            out.append(responses[0])
            if len(responses) > 1:
                self.series[key] = (now + self.config.sync_collision, responses[1:])
        self.stats.responses_sent += len(out)
        for resp in out:
            self.broadcast(resp.records, now)
        return out

    def _responses(self, key: SyncMsgId, missing: Digest) -> list[SyncResp]:
        limit = self.config.max_sync_messages
        byte_limit = self.config.max_sync_bytes
        records: list[Message] = []
        sizes: list[int] = []
        volume = 0
        cut = False
        for pid, ivs in missing.items():
            for lo, hi in ivs:
                if len(records) >= limit or volume >= byte_limit:
                    cut = True
                    break
                for m in self.store.seq_range(self.gid, pid, lo, hi, limit - len(records)):
                    size = record_size(m)
                    if volume + size > byte_limit and records:
                        cut = True
                        break
                    records.append(m)
                    sizes.append(size)
                    volume += size
            if cut:
                break
        if not cut and len(records) >= limit:  # reached exactly: was anything left?
            cut = sum(count(ivs) for ivs in missing.values()) > limit
        if cut:
            self.stats.sync_truncated += 1
        self.stats.messages_sent += len(records)
        chunks: list[list[Message]] = []
        size = 0
        # The first response fits one packet, so the other responders hear at once
        # that someone is answering (their suppression); the rest are bigger.
        budget = min(400, self.config.sync_chunk_bytes)
        for m, s in zip(records, sizes, strict=True):
            if not chunks or (size + s > budget and chunks[-1]):
                if chunks:
                    budget = self.config.sync_chunk_bytes
                chunks.append([])
                size = 0
            chunks[-1].append(m)
            size += s
        if not chunks:
            return [SyncResp(self.pid, key[0], key[1], [], 0)]
        remaining = len(records)
        out = []
        for chunk in chunks:
            remaining -= len(chunk)
            out.append(SyncResp(self.pid, key[0], key[1], chunk, remaining))
        return out

    def next_deadline(self) -> float | None:
        c = self.catchup
        best = c.deadline if c is not None and not c.done else None
        for at, _ in self.series.values():
            if best is None or at < best:
                best = at
        first = self._first_deadline()
        if first is not None and (best is None or first < best):
            best = first
        return best



def _digest_of(records: list[Message]) -> Digest:
    by_pid: dict[str, list[tuple[int, int]]] = {}
    for m in records:
        by_pid.setdefault(m.mid.pid, []).append((m.mid.seq, m.mid.seq))
    return {pid: normalize(ivs) for pid, ivs in by_pid.items()}


def _bounded(digest: Digest, limit: int) -> Digest:
    """At most ``limit`` intervals in all; dropping some only costs duplicates."""
    out: Digest = {}
    left = limit
    for pid in sorted(digest):
        if left <= 0:
            break
        ivs = digest[pid][-left:]  # keep the newest: old gaps are the likeliest lost for good
        out[pid] = ivs
        left -= len(ivs)
    return out
