"""Acknowledged hops (seeds/001 A1-A3; seeds/004 5.3).

* :class:`ReliableSender`: a mobile computer's uplink. One frame outstanding at a
  time (A1), except that up to ``uplink_window`` NEW frames may be outstanding
  together; each is resent every ``retransmit`` seconds until its ack (A1), the
  oldest first;
  duplicate acks are ignored (A3); nothing is resent while out of coverage (A1
  footnote).
* :class:`Outbox`: a gateway's requests forwarded to the coordinator. Each is kept
  until the coordinator acknowledged it *and* the log position it reported is
  committed, and is forwarded again to a new coordinator (docs/infra.md,
  "Failover": nothing a member handed over is lost with the coordinator).

seeds/004 5.3 gives up after three retries; we do not, because giving up loses a
message the protocol promises to deliver (docs/decisions.md).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from m2mc.infra import messages as msg
from m2mc.infra.ids import Epoch


@dataclass(slots=True)
class _Outstanding:
    rseq: int
    frame: msg.UplinkMessage
    sent_at: float


class ReliableSender:
    """The uplink's frames outstanding; the caller builds frames on demand.

    Up to ``window`` NEW frames may be outstanding together (docs/decisions.md, "The
    uplink keeps a window of NEW frames"), and a NACK may start beside them
    (:meth:`room_for_new`); any other frame (JOIN, LEAVE, LEAVEOK) goes alone: it
    starts only when nothing is outstanding, and nothing starts while it is, nor
    while a NACK is. With ``window`` 1 this is seeds/001 A1's one frame at a time."""

    __slots__ = ("_frames", "_next_rseq", "retransmit", "window")

    def __init__(self, retransmit: float, window: int = 1) -> None:
        self.retransmit = retransmit
        self.window = max(1, window)
        self._next_rseq = 1
        self._frames: dict[int, _Outstanding] = {}  # by rseq, the oldest first

    def next_rseq(self) -> int:
        r = self._next_rseq
        self._next_rseq += 1
        return r

    @property
    def busy(self) -> bool:
        """Whether any frame is outstanding."""
        return bool(self._frames)

    @property
    def outstanding(self) -> _Outstanding | None:
        """The oldest outstanding frame (the only one, unless NEW frames share the window)."""
        frames = self._frames
        return next(iter(frames.values())) if frames else None

    def frames(self) -> list[msg.UplinkMessage]:
        """Every outstanding frame, the oldest first."""
        return [o.frame for o in self._frames.values()]

    def in_flight(self) -> tuple[msg.NewItem, ...]:
        """The NEWs of the outstanding frames, in the order they left."""
        return tuple(item for o in self._frames.values() if isinstance(o.frame, msg.NewReq)
                     for item in o.frame.items)

    def in_flight_count(self) -> int:
        return sum(len(o.frame.items) for o in self._frames.values()
                   if isinstance(o.frame, msg.NewReq))

    def room_for_new(self) -> bool:
        """Whether one more NEW frame, or a NACK, may start beside those outstanding
        (a NACK asks, it orders nothing, so it need not wait for our own messages to
        be acked: a member that waited for its whole window to empty repaired nothing
        while it sent on a lossy cell)."""
        frames = self._frames
        if not frames:
            return True
        if len(frames) >= self.window:
            return False
        return all(isinstance(o.frame, msg.NewReq) for o in frames.values())

    def abandon_nacks(self) -> None:
        """Forget the outstanding NACK (a newer one supersedes it)."""
        for rseq in [r for r, o in self._frames.items() if isinstance(o.frame, msg.NackReq)]:
            del self._frames[rseq]

    def start(self, rseq: int, frame: msg.UplinkMessage, now: float) -> msg.UplinkMessage:
        self._frames[rseq] = _Outstanding(rseq, frame, now)
        return frame

    def on_ack(self, rseq: int) -> msg.UplinkMessage | None:
        """The acknowledged frame, or None for a duplicate or stale ack (A3)."""
        o = self._frames.pop(rseq, None)
        return None if o is None else o.frame

    def due(self, now: float, readdress: Callable[[msg.UplinkMessage], msg.UplinkMessage]
            ) -> list[msg.UplinkMessage]:
        """The frame to resend now (readdressed to the current gateway): the oldest, once
        its timer ran out. Every outstanding frame's timer then starts again, so a
        gateway that is slow, not deaf, costs one frame per ``retransmit``, not the
        whole window; a frame really lost is resent once those before it are acked."""
        frames = self._frames
        if not frames:
            return []
        o = next(iter(frames.values()))
        if now < o.sent_at + self.retransmit:
            return []
        o.frame = readdress(o.frame)
        for other in frames.values():
            other.sent_at = now
        return [o.frame]

    def resend_now(self, now: float,
                   readdress: Callable[[msg.UplinkMessage], msg.UplinkMessage]
                   ) -> list[msg.UplinkMessage]:
        """Every outstanding frame, at once (a new gateway is in reach)."""
        out = []
        for o in self._frames.values():
            o.frame = readdress(o.frame)
            o.sent_at = now
            out.append(o.frame)
        return out

    def deadline(self) -> float | None:
        frames = self._frames
        if not frames:
            return None
        return next(iter(frames.values())).sent_at + self.retransmit

    def abandon(self) -> None:
        """Forget every outstanding frame."""
        self._frames.clear()


def take_frame(news: deque[msg.NewItem], limit: int) -> tuple[msg.NewItem, ...]:
    """The NEWs of the next frame, taken from ``news``: as many as ``limit`` bytes hold
    (at least one)."""
    items: list[msg.NewItem] = []
    size = 0
    while news and (not items or size + len(news[0].body) + 16 <= limit):
        item = news.popleft()
        items.append(item)
        size += len(item.body) + 16
    return tuple(items)


def frame_full(news: deque[msg.NewItem], limit: int) -> bool:
    """Whether the next NEW frame is full: it cannot take a further message (a frame
    beside others outstanding goes only then, so a light load keeps one at a time)."""
    size = 0
    for n, item in enumerate(news):
        size += len(item.body) + 16
        if n and size > limit:
            return True
    return size + 17 > limit


@dataclass(slots=True)
class _Forwarded:
    request: msg.MemberRequest
    sent_at: float
    upto: int | None = None  # log position the coordinator reported, in `epoch`
    epoch: Epoch | None = None


class Outbox:
    """Requests a gateway forwarded, kept until their effect is committed."""

    __slots__ = ("_entries", "_next", "limit", "retry")

    def __init__(self, limit: int, retry: float) -> None:
        self.limit = limit
        self.retry = retry
        self._next = 1
        self._entries: OrderedDict[int, _Forwarded] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, request: msg.MemberRequest, now: float) -> int | None:
        """The forward number, or None when full (the member's retry brings it back)."""
        if len(self._entries) >= self.limit:
            return None
        fseq = self._next
        self._next += 1
        self._entries[fseq] = _Forwarded(request, now)
        return fseq

    def get(self, fseq: int) -> msg.MemberRequest:
        return self._entries[fseq].request

    def on_ack(self, fseq: int, upto: int, epoch: Epoch) -> None:
        e = self._entries.get(fseq)
        if e is not None:
            e.upto = upto
            e.epoch = epoch

    def release(self, commit: int, epoch: Epoch) -> int:
        """Drop the requests whose effect is committed in ``epoch``.

        The coordinator answers forwards in order over a FIFO link and its log
        only grows, so released requests form a prefix of the outbox.
        """
        entries = self._entries
        n = 0
        while entries:
            fseq, e = next(iter(entries.items()))
            if e.upto is None or e.epoch != epoch or e.upto > commit:
                break
            del entries[fseq]
            n += 1
        return n

    def all_for_new_master(self, now: float) -> list[tuple[int, msg.MemberRequest]]:
        """Everything unreleased, to forward again to a new coordinator."""
        for e in self._entries.values():
            e.upto = None
            e.epoch = None
            e.sent_at = now
        return [(f, e.request) for f, e in self._entries.items()]

    def due(self, now: float) -> list[tuple[int, msg.MemberRequest]]:
        """Unacknowledged requests older than ``retry`` (seeds/004 5.3 retry)."""
        out = []
        for f, e in self._entries.items():
            if e.upto is None and now - e.sent_at >= self.retry:
                e.sent_at = now
                out.append((f, e.request))
        return out
