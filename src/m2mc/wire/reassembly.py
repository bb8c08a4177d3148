"""Reassembly of M2MP messages from packets, with the message timeout and bounds.

seeds/002 section 5 ("Message Transfer Sublayer"): after a fragment of a message
arrives, the receiver waits ``message_timeout`` for the next one; if it is late
the message is abandoned and the reader is told. We accept fragments in any
order (the simulator and real Wi-Fi reorder) and reset the timer on each new
fragment; a message completes when fragments 0..last are all present.

Every table here can be filled by an outsider, so each is bounded:
``max_partial_messages`` and ``max_partial_bytes`` (at the bound the partial
message idle the longest is abandoned with reason ``"bound"``),
``max_message_bytes`` (a fragment beyond it, by number or by the bytes held,
abandons its message, reason ``"too_large"``: fragments may be larger than 500
bytes where a sender set a larger packet size) and the completed-ID cache that
discards redundant copies (oldest entries forgotten first; entries are also
forgotten once they expire, a message timeout after the last copy, so a long-lived
receiver keeps a timeout's worth).
"""

from __future__ import annotations

import builtins
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import count

from m2mc.wire.packet import MAX_FRAGMENT, MAX_PACKET, Packet
from m2mc.wire.segments import segment_data


@dataclass(frozen=True, slots=True)
class Abandoned:
    """A partial message given up: ``timeout``, ``bound``, ``too_large`` or ``malformed``."""

    message_id: int
    reason: str
    fragments: int
    bytes: int
    head: builtins.bytes  # first fragment if it arrived, else b"" (lets filters decide relevance)


@dataclass(slots=True)
class _Partial:
    deadline: float
    parts: dict[int, bytes] = field(default_factory=dict)
    size: int = 0
    last: int = -1  # fragment number of the last fragment, once seen
    contiguous: int = 0  # fragments 0 .. contiguous-1 are all here (streams start on it)


@dataclass(slots=True)
class ReassemblyLimits:
    message_timeout: float = 5.0
    max_partial_messages: int = 1024
    max_partial_bytes: int = 16 * 1024 * 1024
    max_message_bytes: int = 64 * 1024 * 1024
    completed_cache: int = 65536


class Reassembler:
    """Sans-IO reassembler. Feed decoded packets with :meth:`receive`."""

    def __init__(self, limits: ReassemblyLimits | None = None) -> None:
        self.limits = limits = limits or ReassemblyLimits()
        # max_message_bytes as receive_fragment checks it, once per fragment: the highest
        # fragment number (as if every fragment had 500 bytes), and the bytes a partial
        # message may hold (what bounds it when fragments are larger, packet=N).
        self._top_fragment = limits.max_message_bytes // MAX_FRAGMENT
        self._max_held = limits.max_message_bytes + MAX_FRAGMENT
        # Insertion order == order of last activity (we move_to_end on each fragment),
        # so the first entry is both the oldest deadline and the idlest message.
        self._partial: OrderedDict[int, _Partial] = OrderedDict()
        self._partial_bytes = 0
        # message id -> expiry; redundant copies of a completed or ignored message are
        # dropped. A plain dict plus a FIFO of IDs and one of expiries (in expiry order) is
        # much cheaper per message than an OrderedDict, and adds no tuple for the garbage
        # collector to count; a FIFO entry whose expiry no longer matches the dict's (the
        # ID was refreshed or forgotten) is stale and skipped.
        self._done: dict[int, float] = {}
        self._done_ids: deque[int] = deque()
        self._done_expiries: deque[float] = deque()
        self.duplicates = 0
        self.abandoned: list[Abandoned] = []

    @property
    def partial_messages(self) -> int:
        return len(self._partial)

    @property
    def partial_bytes(self) -> int:
        return self._partial_bytes

    def is_done(self, message_id: int, now: float) -> bool:
        expiry = self._done.get(message_id)
        return expiry is not None and expiry > now

    def mark_done(self, message_id: int, now: float) -> None:
        """Remember ``message_id`` so later copies are discarded (also used for ignored ones)."""
        partial = self._partial.pop(message_id, None)
        if partial is not None:
            self._partial_bytes -= partial.size
        self._remember(message_id, now + self.limits.message_timeout)

    @property
    def done_ids(self) -> Mapping[int, float]:
        """Completed (or ignored) message IDs -> expiry; a live view, for fast paths."""
        return self._done

    @property
    def partial_ids(self) -> Mapping[int, object]:
        """IDs of the messages being assembled; a live view, for fast paths."""
        return self._partial

    def remember_done(self, message_id: int, expiry: float) -> None:
        """Record ``message_id`` as completed until ``expiry`` (``now`` + message timeout).

        For a caller's fast path that found the ID in neither :attr:`done_ids` nor
        :attr:`partial_ids`; everything else goes through :meth:`receive_fragment`.
        """
        self._done[message_id] = expiry
        ids = self._done_ids
        ids.append(message_id)
        expiries = self._done_expiries
        expiries.append(expiry)
        # Expiries are in FIFO order (now + one timeout, now never going back): the
        # oldest entry has expired once its expiry is a timeout before this one's.
        if len(ids) > self.limits.completed_cache or (
                expiries[0] <= expiry - self.limits.message_timeout):
            self._trim_done(expiry - self.limits.message_timeout)

    _remember = remember_done

    def _trim_done(self, now: float) -> None:
        done, ids, expiries = self._done, self._done_ids, self._done_expiries
        cache = self.limits.completed_cache
        # Forget the oldest while too many are kept (every live ID has an entry) or the
        # oldest has expired: a long-lived receiver keeps a message timeout's worth.
        while ids and (len(done) > cache or expiries[0] <= now):
            old_id, old_expiry = ids.popleft(), expiries.popleft()
            if done.get(old_id) == old_expiry:
                del done[old_id]
        if len(ids) > 2 * cache + 64:
            # Refreshes (copies of an ignored message) left stale entries: drop them.
            live = [(i, e) for i, e in zip(ids, expiries, strict=True) if done.get(i) == e]
            self._done_ids = deque(i for i, _ in live)
            self._done_expiries = deque(e for _, e in live)

    def receive(self, packet: Packet, now: float) -> bytes | None:
        """Add one packet; return the whole message when it completes, else None."""
        return self.receive_fragment(packet.message_id, packet.fragment, packet.last,
                                     packet.data, now)

    def receive_fragment(self, message_id: int, fragment: int, last: bool, data: bytes,
                         now: float) -> bytes | None:
        """:meth:`receive` without a :class:`Packet` (the layer's hot path)."""
        done = self._done
        expiry = done.get(message_id)
        if expiry is not None:
            if expiry > now:
                self.duplicates += 1
                # Keep ignoring a message while its copies keep coming: a long filtered
                # message may outlast one message timeout.
                self._remember(message_id, now + self.limits.message_timeout)
                return None
            del done[message_id]  # expired: its FIFO entry is stale from now on
        limits = self.limits
        partials = self._partial
        partial = partials.get(message_id)
        if partial is None:
            if last and fragment == 0:  # a one-packet message nobody was assembling
                self._remember(message_id, now + limits.message_timeout)
                return data
            if fragment > self._top_fragment:
                self._abandon(message_id, "too_large")
                self.mark_done(message_id, now)
                return None
            partial = _Partial(deadline=now + limits.message_timeout)
            partials[message_id] = partial
        elif fragment in partial.parts:
            self.duplicates += 1
            return None
        elif fragment > self._top_fragment:
            self._abandon(message_id, "too_large")
            self.mark_done(message_id, now)
            return None
        else:
            partial.deadline = now + limits.message_timeout
            partials.move_to_end(message_id)
        size = len(data)
        if partial.size + size > self._max_held:
            # Fragments over 500 bytes (a sender's larger packet size): the bound on the
            # fragment number above no longer bounds the bytes, this does.
            self._abandon(message_id, "too_large")
            self.mark_done(message_id, now)
            return None
        parts = partial.parts
        if last:
            if partial.last not in (-1, fragment) or (parts and max(parts) > fragment):
                # Two different "last" fragments: not a message anyone sent. Drop it.
                self._abandon(message_id, "malformed")
                self.mark_done(message_id, now)
                return None
            partial.last = fragment
        elif partial.last != -1 and fragment > partial.last:
            self._abandon(message_id, "malformed")
            self.mark_done(message_id, now)
            return None
        parts[fragment] = data
        if fragment == partial.contiguous:
            following = fragment + 1
            while following in parts:
                following += 1
            partial.contiguous = following
        partial.size += size
        self._partial_bytes += size
        final = partial.last
        if final != -1 and len(parts) == final + 1:
            message = b"".join(map(parts.__getitem__, range(final + 1)))
            self.mark_done(message_id, now)
            return message
        if len(partials) > limits.max_partial_messages or (
                self._partial_bytes > limits.max_partial_bytes):
            self._enforce_bounds()
        return None

    # ------------------------------------------------ in-order runs (the layer's fast path)
    def run_stop(self, message_id: int, first: int, stop: int) -> int:
        """The fragment number (at most ``stop``) before which a run of ``message_id``
        beginning at fragment ``first`` can be taken whole by :meth:`add_run` and
        :meth:`complete_run`: as long as these tables are not changed meanwhile, its
        fragments would only be added (each at most MAX_FRAGMENT bytes), no bound
        passed. At most ``first`` (no run) if the message is done, or partial when
        ``first`` is 0, or not assembled in order up to ``first`` otherwise."""
        if self._run_base(message_id, first, 0) is None:
            return 0
        room = (self.limits.max_partial_bytes - self._partial_bytes) // MAX_FRAGMENT
        return min(stop, first + room)

    def add_run(self, message_id: int, first: int, packets: list[bytes], skip: int,
                now: float) -> bool:
        """Add fragments ``first``, ``first`` + 1, ... (none of them the last) at once.

        ``packets`` are whole packets whose first ``skip`` bytes are a header, or
        Segments of several (wire/segments.py), each packet of which is. ``first``
        is 0 for a message neither done nor partial, else the message must have
        exactly fragments 0 .. ``first`` - 1 here (see :meth:`run_stop`). The result
        is exactly what as many calls of :meth:`receive_fragment` would leave. If
        those calls would have had to do more than add (the message is no longer as
        expected, or a bound would be passed and something given up), nothing is
        done and False is returned: the caller then makes those calls itself.
        """
        data = _fragment_data(packets, skip)
        size = sum(map(len, data))
        partial = self._run_base(message_id, first, size)
        if partial is None:
            return False
        partial.deadline = now + self.limits.message_timeout
        if first == 0:
            self._partial[message_id] = partial
        else:
            self._partial.move_to_end(message_id)
        partial.parts.update(zip(count(first), data))
        partial.contiguous = first + len(data)
        partial.size += size
        self._partial_bytes += size
        return True

    def complete_run(self, message_id: int, first: int, packets: list[bytes], skip: int,
                     now: float) -> bytes | None:
        """The whole message, from fragments ``first`` .. the last (the final item of
        ``packets``) and the ones before ``first`` already here. None, with nothing
        done, whenever :meth:`add_run` would return False."""
        data = _fragment_data(packets, skip)
        partial = self._run_base(message_id, first, sum(map(len, data)) - len(data[-1]))
        if partial is None:
            return None
        if first == 0:
            message = b"".join(data)
        else:
            parts = partial.parts
            message = b"".join([*map(parts.__getitem__, range(first)), *data])
            del self._partial[message_id]
            self._partial_bytes -= partial.size
        self._remember(message_id, now + self.limits.message_timeout)
        return message

    def _run_base(self, message_id: int, first: int, adding: int) -> _Partial | None:
        """For a run adding ``adding`` bytes: the partial message it continues (a new,
        empty one, not yet registered, if ``first`` is 0), or None if the run cannot be
        taken whole (see :meth:`add_run`)."""
        limits = self.limits
        if self._partial_bytes + adding > limits.max_partial_bytes:
            return None
        if first == 0:
            if adding > limits.max_message_bytes + MAX_FRAGMENT:
                return None
            if (message_id in self._partial or message_id in self._done
                    or len(self._partial) >= limits.max_partial_messages):
                return None
            return _Partial(deadline=0.0)
        partial = self._partial.get(message_id)
        if (partial is None or partial.last != -1 or partial.contiguous != first
                or len(partial.parts) != first
                or partial.size + adding > limits.max_message_bytes + MAX_FRAGMENT):
            return None
        return partial

    def contiguous(self, message_id: int) -> int:
        """Fragments 0, 1, ... of a partial message that are all here (0 if none)."""
        partial = self._partial.get(message_id)
        return partial.contiguous if partial is not None else 0

    def take_partial(self, message_id: int) -> tuple[dict[int, bytes], int]:
        """Hand a partial message over (to be read as a stream): its fragments by
        number and its last fragment's number (-1 if not seen yet); it is no longer
        assembled here."""
        partial = self._partial.pop(message_id)
        self._partial_bytes -= partial.size
        return partial.parts, partial.last

    def on_timer(self, now: float) -> None:
        """Abandon every partial message whose next fragment is late."""
        while self._partial:
            message_id, partial = next(iter(self._partial.items()))
            if partial.deadline > now:
                break
            self._abandon(message_id, "timeout")
        # Expired completed IDs are dropped lazily in receive(); trim the front here.
        done, ids, expiries = self._done, self._done_ids, self._done_expiries
        while expiries:
            if expiries[0] > now:
                break
            message_id, expiry = ids.popleft(), expiries.popleft()
            if done.get(message_id) == expiry:
                del done[message_id]

    def next_deadline(self) -> float | None:
        if not self._partial:
            return None
        return next(iter(self._partial.values())).deadline

    def abandon(self, message_id: int, reason: str, now: float) -> None:
        """Give up ``message_id`` (whether being assembled or not yet seen) and ignore
        its later fragments."""
        self._abandon(message_id, reason)
        self.mark_done(message_id, now)

    def take_abandoned(self) -> list[Abandoned]:
        abandoned, self.abandoned = self.abandoned, []
        return abandoned

    def _enforce_bounds(self) -> None:
        limits = self.limits
        while self._partial and (
            len(self._partial) > limits.max_partial_messages
            or self._partial_bytes > limits.max_partial_bytes
        ):
            self._abandon(next(iter(self._partial)), "bound")

    def _abandon(self, message_id: int, reason: str) -> None:
        partial = self._partial.pop(message_id, None)
        if partial is None:
            self.abandoned.append(Abandoned(message_id, reason, 0, 0, b""))
            return
        self._partial_bytes -= partial.size
        self.abandoned.append(Abandoned(message_id, reason, len(partial.parts), partial.size,
                                        partial.parts.get(0, b"")))


def _fragment_data(packets: list[bytes], skip: int) -> list[bytes]:
    """The data of each fragment in ``packets`` (its first ``skip`` bytes a header),
    a Segments' packets each taken apart (wire/segments.py)."""
    if max(map(len, packets)) <= MAX_PACKET:
        return [packet[skip:] for packet in packets]
    data: list[bytes] = []
    for packet in packets:
        if len(packet) > MAX_PACKET:
            data += segment_data(packet, skip)
        else:
            data.append(packet[skip:])
    return data
