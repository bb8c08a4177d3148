"""Group messages of any size, sent and read as streams (docs/group.md section 12).

A streamed message has a *head*, an ordinary data record whose payload is a
descriptor (:mod:`m2mc.group.stream_codec`): it takes an identity, a parent, a place
in the group's order and a row in the log like any message, so ordering, MSP,
retention and repair treat it as one. Its *body* goes beside the ordering, in
STREAM messages of one chunk each (``stream_chunk_bytes``, 16,000 bytes: 33 M2MP
packets), which every member writes at its offset into its body store (a file
beside the log, :mod:`m2mc.store.bodies`) as it arrives. Nobody holds a body in
memory: a member keeps, per stream in progress, the indexes of the chunks that came
early (at most ``stream_window``) and a running SHA-256.

Loss repair, as for records (docs/group.md section 7) but per chunk: a member that
sees a hole (a chunk after a missing one), or hears nothing of a stream in progress
for ``nack_holdoff`` (a lost tail), sends a STREAM_NACK for the missing chunks of its
window after a random back-off (one overheard for the same stream holds ours off);
any member that holds those chunks (the sender, any member that received them)
sends them again after its own back-off, cancelled if it overhears them. A stream
that makes no progress for ``stream_timeout`` fails (``timeout``); one whose last
chunk's size or SHA-256 disagree with the chunks fails (``corrupt``); one its
sender gave up fails (``aborted``); one the body store cannot hold fails
(``store_full``). A reader is told (:class:`StreamUpdate`), never handed a short
body as if whole.

Pacing (:mod:`m2mc.group.stream_pace`): every receiver tells the sender, by
STREAM_ACK, how far it holds the body in order, and the sender's chunks wait until
they are within a window of the slowest receiver it waits for.

A reader of a stream whose body this node does not hold (a late joiner, a body
evicted from the store) asks for it (:meth:`GroupStreams.want`): the probe fetches it
from whoever still holds it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from m2mc.errors import BufferFullError, DecodeError, UsageError
from m2mc.group.events import StreamUpdate
from m2mc.group.stream_codec import (
    ABORTED,
    LAST,
    MORE,
    Descriptor,
    StreamAck,
    StreamData,
    StreamNack,
    decode_descriptor,
    encode_descriptor,
    is_head,
)
from m2mc.group.stream_pace import Silent, StreamPace, ack_every, pace_window
from m2mc.group.stream_stats import StreamStats, StreamStatus
from m2mc.ordering import Message, MessageId
from m2mc.store.bodies import BodyInfo, BodyStore, Key

if TYPE_CHECKING:
    import random
    from collections.abc import Mapping

    from m2mc.group.config import GroupConfig
    from m2mc.group.events import GroupEvent
    from m2mc.group.instance import GroupInstance
    from m2mc.group.messages import Body

__all__ = ["GroupStreams", "StreamStats", "StreamStatus", "StreamUpdate"]

_FAILED_KEPT = 4096  # failed streams remembered (their late chunks ignored)


@dataclass(slots=True)
class _Out:
    tag: bytes
    chunk: int
    index: int = 0
    tail: bytes = b""
    size: int = 0
    sha: Any = field(default_factory=hashlib.sha256)
    pace: StreamPace | None = None


@dataclass(slots=True)
class _In:
    tag: bytes
    chunk: int  # 0 until a chunk or the head says
    progress: float  # when it last advanced (or started)
    next: int = 0  # chunks 0 .. next-1 are in the store, hashed
    have: set[int] = field(default_factory=set)  # chunks past next in the store
    seen: int = 0  # 1 + the highest chunk index heard of
    last: int = -1
    size: int = -1
    digest: bytes = b""
    sha: Any = field(default_factory=hashlib.sha256)
    nack_at: float | None = None
    asked_at: float = float("-inf")
    holdoff: float = 0.0
    every: int = 1  # acknowledge each time next moved this many chunks (stream_pace)
    acked: int = 0  # the next we last acknowledged
    acked_at: float = float("-inf")


class StreamsPort(Protocol):
    """The node as its streams see it."""

    @property
    def pid(self) -> str: ...
    @property
    def config(self) -> GroupConfig: ...
    @property
    def rng(self) -> random.Random: ...
    @property
    def groups(self) -> Mapping[str, GroupInstance]: ...
    @property
    def window_bytes(self) -> int: ...

    def send_head(self, gid: str, payload: bytes, now: float,
                  reply_to: MessageId | str | None) -> MessageId:
        """Send a stream's head now (taken in at once, its batch flushed: it leaves
        before the first chunk)."""

    def send_body(self, tag: bytes, body: Body, *, repair: bool = False) -> None:
        """Send ``body`` to the group of ``tag`` (sealed if the group is keyed; a
        ``repair`` of more than one packet: each packet twice)."""

    def emit(self, event: GroupEvent) -> None:
        """Hand an event to the application."""


class GroupStreams:
    """The streams of one node, sent and received, over all its groups (sans-IO)."""

    def __init__(self, node: StreamsPort, store: BodyStore) -> None:
        self.node = node
        self.config = node.config
        self.store = store
        self.outgoing: dict[Key, _Out] = {}
        self.incoming: dict[Key, _In] = {}
        self.failed: OrderedDict[Key, str] = OrderedDict()
        self.repairs: dict[tuple[Key, int], float] = {}  # chunk -> when we send it again
        # Bodies to fetch once fewer than max_streams are in progress: key -> (chunk, since).
        self.waiting: OrderedDict[Key, tuple[int, float]] = OrderedDict()
        self.stats = StreamStats()
        self.silent = Silent()  # members that never acknowledged a stream of ours

    def window(self) -> int:
        """Our pacing window in chunks (stream_pace.pace_window)."""
        cfg = self.config
        return pace_window(cfg.stream_window, self.node.window_bytes, cfg.stream_chunk_bytes)

    # ============================================================ sending
    def open(self, gid: str, now: float, reply_to: MessageId | str | None,
             size: int | None = None) -> MessageId:
        """Send the head of a new streamed message (ordered like any message) and
        make ready for its body; return its identity."""
        cfg = self.config
        window = self.window()
        payload = encode_descriptor(Descriptor(cfg.stream_chunk_bytes, size, window))
        node = self.node
        mid = node.send_head(gid, payload, now, reply_to)  # it leaves before its first chunk
        inst = node.groups[gid]
        members = [m for m in inst.row.membership.current() if m != node.pid]
        pace = StreamPace(window, 2 * cfg.send_window_wait, members, now,
                          self.silent.of(gid), self.stats)
        self.outgoing[(gid, mid.pid, mid.seq)] = _Out(inst.tag, cfg.stream_chunk_bytes,
                                                      pace=pace)
        self.stats.stream_sent += 1
        return mid

    def write(self, gid: str, mid: MessageId, data: bytes, now: float) -> None:
        """The next bytes of a stream we send: whole chunks go out at once."""
        key = (gid, mid.pid, mid.seq)
        out = self._out(key)
        buf = out.tail + data
        chunk = out.chunk
        whole = len(buf) // chunk
        for i in range(whole):
            self._chunk(key, out, buf[i * chunk:(i + 1) * chunk], MORE, now)
        out.tail = buf[whole * chunk:]

    def close(self, gid: str, mid: MessageId, now: float) -> None:
        """The end of a stream we send: its last chunk, with the body's size and hash."""
        key = (gid, mid.pid, mid.seq)
        out = self._out(key)
        self._chunk(key, out, out.tail, LAST, now)
        del self.outgoing[key]
        self.store.finish(key, BodyInfo(out.size, out.sha.digest(), out.chunk))
        self.node.emit(StreamUpdate(gid, mid, out.size, done=True))

    def abort(self, gid: str, mid: MessageId, now: float) -> None:
        """Give a stream we send up: its receivers' readers get an error at once."""
        key = (gid, mid.pid, mid.seq)
        out = self.outgoing.pop(key, None)
        if out is None:
            return
        self.node.send_body(out.tag, StreamData(mid.pid, mid.pid, mid.seq, out.index, out.chunk,
                                            b"", ABORTED))
        self._fail(key, "aborted")

    def paced(self, gid: str, mid: MessageId, now: float) -> bool:
        """True while the next chunk of a stream we send must wait for its receivers
        (stream_pace): a StreamUpdate of ``mid`` says when to ask again."""
        out = self._out((gid, mid.pid, mid.seq))
        pace = out.pace
        if pace is None or pace.may_send(out.index, now):
            return False
        inst = self.node.groups.get(gid)
        if inst is not None:  # members that left since: not waited for
            for m in pace.members():
                if not inst.row.membership.is_member(m):
                    pace.forget(m)
        self.silent.add(gid, pace.silent(), self.config.max_members)
        return not pace.may_send(out.index, now)

    def _pace_heard(self, key: Key, member: str, next_chunk: int, now: float) -> None:
        out = self.outgoing.get(key)
        if out is None or out.pace is None:
            return
        self.silent.spoke(key[0], member)
        pace = out.pace
        if pace.heard(member, next_chunk, now) and pace.blocked_since is not None \
                and pace.may_send(out.index, now):
            self.node.emit(StreamUpdate(key[0], MessageId(key[1], key[2]), out.size))

    def _out(self, key: Key) -> _Out:
        out = self.outgoing.get(key)
        if out is None:
            raise UsageError(f"no stream {key[1]}:{key[2]} being sent in group {key[0]!r}")
        return out

    def _chunk(self, key: Key, out: _Out, data: bytes, state: int, now: float) -> None:
        gid, pid, seq = key
        if data and not self.store.write(key, out.index * out.chunk, data):
            self.stats.stream_store_full += 1
            self.abort(gid, MessageId(pid, seq), now)
            raise BufferFullError(f"stream {pid}:{seq} is larger than stream_store_bytes "
                                  f"({self.store.limit}); it was given up")
        out.sha.update(data)
        out.size += len(data)
        last = state == LAST
        self.node.send_body(out.tag, StreamData(pid, pid, seq, out.index, out.chunk, data, state,
                                            out.size if last else 0,
                                            out.sha.digest() if last else b""))
        out.index += 1
        self.stats.stream_chunks_sent += 1
        if not last:
            self.node.emit(StreamUpdate(gid, MessageId(pid, seq), out.size))

    # ========================================================== receiving
    def on_body(self, inst: GroupInstance, body: StreamData | StreamNack | StreamAck,
                now: float) -> None:
        if isinstance(body, StreamData):
            self._on_data(inst, body, now)
        elif isinstance(body, StreamNack):
            self._on_nack(inst, body, now)
        elif inst.row.membership.is_member(body.sender):
            self._pace_heard((inst.gid, body.pid, body.seq), body.sender, body.next, now)

    def _on_data(self, inst: GroupInstance, body: StreamData, now: float) -> None:
        key = (inst.gid, body.pid, body.seq)
        stats = self.stats
        self._overheard(key, body.index)
        if (body.pid == self.node.pid or key in self.failed or key in self.outgoing
                or self.store.info(key) is not None):
            stats.stream_chunk_duplicates += 1
            return
        st = self.incoming.get(key)
        if st is None:
            membership = inst.row.membership
            if membership.get(body.pid) is None or membership.get(body.sender) is None:
                stats.stream_refused += 1
                return
            if len(self.incoming) >= self.config.max_streams:
                stats.stream_refused += 1
                return
            st = self.incoming[key] = _In(inst.tag, body.chunk_bytes, now,
                                          every=ack_every(self.window()))
        if body.state == ABORTED:
            self._fail(key, "aborted")
            return
        if st.chunk != body.chunk_bytes:
            if st.chunk:
                self._fail(key, "malformed")
                return
            st.chunk = body.chunk_bytes
        index = body.index
        if index < st.next or index in st.have:
            stats.stream_chunk_duplicates += 1
            return
        if body.state == LAST:
            if (st.last not in (-1, index) or st.seen > index + 1
                    or (st.have and max(st.have) > index)):
                self._fail(key, "malformed")
                return
            st.last, st.size, st.digest = index, body.size, body.sha256
        elif st.last >= 0 and index >= st.last:
            self._fail(key, "malformed")
            return
        st.seen = max(st.seen, index + 1)
        if index >= st.next + self.config.stream_window:
            stats.stream_chunks_refused += 1  # asked for again once the window moves on
            self._nack_soon(st, now)
            return
        data = body.data
        if data and not self.store.write(key, index * st.chunk, data):
            stats.stream_store_full += 1
            self._fail(key, "store_full")
            return
        stats.stream_chunks_received += 1
        st.progress = now
        st.holdoff = 0.0
        if index != st.next:
            st.have.add(index)
            self._nack_soon(st, now)
            return
        st.sha.update(data)
        st.next += 1
        while st.next in st.have:  # early chunks now in order: hash them from the store
            st.have.discard(st.next)
            piece = self.store.read(key, st.next * st.chunk, st.chunk)
            if piece is None:
                self._fail(key, "store_full")
                return
            st.sha.update(piece if st.next != st.last else piece[:st.size - st.next * st.chunk])
            st.next += 1
        mid = MessageId(body.pid, body.seq)
        if st.last >= 0 and st.next > st.last:
            if st.sha.digest() != st.digest:
                self._fail(key, "corrupt")
                return
            del self.incoming[key]
            self.store.finish(key, BodyInfo(st.size, st.digest, st.chunk))
            self._ack(key, st, now)  # complete: the sender waits for us no more
            stats.stream_received += 1
            self._next_waiting(now)
            self.node.emit(StreamUpdate(inst.gid, mid, st.size, done=True))
        else:
            if st.next - st.acked >= st.every:
                self._ack(key, st, now)
            self.node.emit(StreamUpdate(inst.gid, mid, st.next * st.chunk))

    def _ack(self, key: Key, st: _In, now: float) -> None:
        """Tell the sender how far we hold the body in order (stream_pace)."""
        st.acked, st.acked_at = st.next, now
        self.node.send_body(st.tag, StreamAck(self.node.pid, key[1], key[2], st.next))
        self.stats.stream_acks_sent += 1

    def _nack_soon(self, st: _In, now: float) -> None:
        if st.nack_at is None and now >= st.asked_at + st.holdoff:
            cfg = self.config
            st.nack_at = now + cfg.nack_delay + self.node.rng.uniform(0, cfg.nack_backoff)

    def _fail(self, key: Key, reason: str) -> None:
        self.incoming.pop(key, None)
        self.store.drop(key)
        self.failed[key] = reason
        self.failed.move_to_end(key)
        if len(self.failed) > _FAILED_KEPT:
            self.failed.popitem(last=False)
        self.stats.stream_failed += 1
        gid, pid, seq = key
        self.node.emit(StreamUpdate(gid, MessageId(pid, seq), 0, error=reason))

    # ============================================================ repair
    def _on_nack(self, inst: GroupInstance, body: StreamNack, now: float) -> None:
        key = (inst.gid, body.pid, body.seq)
        st = self.incoming.get(key)
        cfg = self.config
        if st is not None and st.nack_at is not None:  # someone asked for it: hold ours off
            st.nack_at = None
            st.asked_at = now
            st.holdoff = max(st.holdoff, cfg.nack_holdoff)
            self.stats.stream_nacks_suppressed += 1
        held = self._held_chunks(key)
        if held is None:
            return
        low, high, has = held
        rng = self.node.rng
        for lo, hi in body.chunks[:cfg.max_nack_intervals]:
            for index in range(max(lo, low), min(hi, high) + 1):
                if (key, index) in self.repairs or not has(index):
                    continue
                if len(self.repairs) >= cfg.max_stream_repairs:
                    self.stats.stream_repairs_refused += 1
                    return
                self.repairs[(key, index)] = now + rng.uniform(0, cfg.repair_backoff)

    def _held_chunks(self, key: Key) -> tuple[int, int, Any] | None:
        """The range of chunk indexes this node could send of ``key``, and a test of
        each; None if it holds none."""
        out = self.outgoing.get(key)
        if out is not None:
            return (0, out.index - 1, lambda i: True) if out.index else None
        info = self.store.info(key)
        if info is not None:  # chunks 0 .. size // chunk (the last one maybe empty)
            return 0, info.size // info.chunk_bytes, lambda i: True
        st = self.incoming.get(key)
        if st is not None and (st.next or st.have):
            return 0, max([st.next - 1, *st.have]), lambda i: i < st.next or i in st.have
        return None

    def _overheard(self, key: Key, index: int) -> None:
        if self.repairs.pop((key, index), None) is not None:
            self.stats.stream_repairs_suppressed += 1

    def _repair(self, key: Key, index: int) -> None:
        gid, pid, seq = key
        inst = self.node.groups.get(gid)
        if inst is None:
            return
        out = self.outgoing.get(key)
        info = self.store.info(key)
        st = self.incoming.get(key)
        chunk = out.chunk if out is not None else info.chunk_bytes if info is not None else (
            st.chunk if st is not None else 0)
        if not chunk:
            return
        data = self.store.read(key, index * chunk, chunk)
        if data is None:
            return
        state, size, digest = MORE, 0, b""
        if info is not None and index == info.size // chunk:
            state, size, digest = LAST, info.size, info.sha256
        elif len(data) != chunk:
            return  # not all of it here (a body still arriving): someone else has it
        self.node.send_body(inst.tag, StreamData(self.node.pid, pid, seq, index, chunk, data, state,
                                             size, digest), repair=True)
        self.stats.stream_chunks_repaired += 1

    # ============================================================ timers
    def on_timer(self, now: float) -> None:
        if self.waiting:
            self._next_waiting(now)
        for item, due in list(self.repairs.items()):
            if due <= now:
                del self.repairs[item]
                self._repair(*item)
        cfg = self.config
        for key, out in self.outgoing.items():
            pace = out.pace
            if pace is not None and pace.blocked_since is not None \
                    and not self.paced(key[0], MessageId(key[1], key[2]), now):
                self.node.emit(StreamUpdate(key[0], MessageId(key[1], key[2]), out.size))
        repeat = cfg.send_window_wait / 2
        for key, st in list(self.incoming.items()):
            if st.progress + cfg.stream_timeout <= now:  # (as next_deadline: no rounding gap)
                self._fail(key, "timeout")
                continue
            if st.acked_at + repeat <= now:  # (as next_deadline computes it: no rounding gap)
                self._ack(key, st, now)  # (again: a lost one, or we wait for repairs)
            if st.nack_at is None and st.progress + cfg.nack_holdoff <= now:
                self._nack_soon(st, now)  # nothing for a while: a lost tail, or a stall
            if st.nack_at is not None and st.nack_at <= now:
                self._send_nack(key, st, now)

    def _send_nack(self, key: Key, st: _In, now: float) -> None:
        cfg = self.config
        st.nack_at = None
        window_end = st.next + cfg.stream_window  # exclusive
        stalled = st.progress + cfg.nack_holdoff <= now
        end = window_end if stalled else min(st.seen, window_end)
        if st.last >= 0:
            end = min(end, st.last + 1)
        ranges: list[tuple[int, int]] = []
        index = st.next
        while index < end and len(ranges) < cfg.max_nack_intervals:
            if index in st.have:
                index += 1
                continue
            start = index
            while index < end and index not in st.have:
                index += 1
            ranges.append((start, index - 1))
        if not ranges:
            return
        _, pid, seq = key
        self.node.send_body(st.tag, StreamNack(self.node.pid, pid, seq, ranges))
        self.stats.stream_nacks_sent += 1
        st.asked_at = now
        st.holdoff = min(max(st.holdoff * 2, cfg.nack_holdoff), cfg.nack_holdoff_max,
                         cfg.stream_timeout / 4)

    def next_deadline(self) -> float | None:
        best: float | None = None
        if self.repairs:
            best = min(self.repairs.values())
        cfg = self.config
        for out in self.outgoing.values():
            pace = out.pace
            d = None if pace is None else pace.deadline(out.index)
            if d is not None and (best is None or d < best):
                best = d
        repeat = cfg.send_window_wait / 2
        for st in self.incoming.values():
            d = min(st.progress + cfg.stream_timeout, st.acked_at + repeat)
            if st.nack_at is not None:
                d = min(d, st.nack_at)
            else:
                d = min(d, max(st.progress + cfg.nack_holdoff, st.asked_at + st.holdoff))
            if best is None or d < best:
                best = d
        return best

    # =========================================================== readers
    def status(self, gid: str, mid: MessageId) -> StreamStatus:
        """How much of a stream's body this node holds, and whether it is complete."""
        key = (gid, mid.pid, mid.seq)
        out = self.outgoing.get(key)
        if out is not None:
            return StreamStatus(out.size, False, None, None)
        info = self.store.info(key)
        if info is not None:
            return StreamStatus(info.size, True, info.size, None)
        st = self.incoming.get(key)
        if st is not None:
            return StreamStatus(st.next * st.chunk, False, st.size if st.last >= 0 else None,
                                None)
        error = self.failed.get(key)
        return StreamStatus(0, False, None, error)

    def delivered(self, gid: str, messages: list[Message], now: float) -> None:
        """Messages delivered that may be stream heads (their payload starts with a
        NUL): every member gets the body of every streamed message it delivers, as it
        gets every message, whether it saw any of its chunks or not."""
        for m in messages:
            if is_head(m.payload) and m.mid.pid != self.node.pid:
                self.want(gid, m.mid, m.payload, now, quietly=True)

    def want(self, gid: str, mid: MessageId, head: bytes, now: float, *,
             quietly: bool = False) -> None:
        """Fetch the body of ``mid`` (its head's payload ``head``) unless this node holds
        it, receives it or sends it. At ``max_streams`` bodies in progress it waits its
        turn (at most ``max_streams_waiting`` do; past that the oldest waiting is
        dropped, and fetched again when a reader asks). ``quietly``: on a delivery (a
        reader asks again if it was given up before)."""
        key = (gid, mid.pid, mid.seq)
        inst = self.node.groups.get(gid)
        if (inst is None or key in self.incoming or key in self.outgoing
                or self.store.info(key) is not None or mid.pid == self.node.pid
                or (quietly and key in self.failed)):
            return
        try:
            descriptor = decode_descriptor(head)
        except DecodeError:
            return  # a payload that only looks like a head: a message like any other
        chunk = descriptor.chunk_bytes
        if len(self.incoming) >= self.config.max_streams:
            self.waiting[key] = (chunk, now)
            self.waiting.move_to_end(key)
            if len(self.waiting) > self.config.max_streams_waiting:
                self.waiting.popitem(last=False)
            return
        self.failed.pop(key, None)
        # As if it had stalled already: the probe asks for its first window soon.
        self.incoming[key] = _In(inst.tag, chunk, now - self.config.nack_holdoff,
                                 every=ack_every(descriptor.window or self.window()))

    def _next_waiting(self, now: float) -> None:
        """A slot is free: start fetching the body that waited longest."""
        while self.waiting and len(self.incoming) < self.config.max_streams:
            key, (chunk, _) = self.waiting.popitem(last=False)
            inst = self.node.groups.get(key[0])
            if (inst is not None and key not in self.incoming and key not in self.failed
                    and self.store.info(key) is None):
                self.incoming[key] = _In(inst.tag, chunk, now - self.config.nack_holdoff,
                                         every=ack_every(self.window()))

    def counters(self) -> dict[str, int]:
        out = {name: getattr(self.stats, name) for name in self.stats.__dataclass_fields__}
        out.update(streams_open=len(self.incoming), streams_sending=len(self.outgoing),
                   streams_waiting=len(self.waiting), stream_store_bytes=self.store.held_bytes,
                   stream_store_evicted=self.store.evicted)
        return out
