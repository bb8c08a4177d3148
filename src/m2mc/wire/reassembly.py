"""Reassembly of M2MP messages from packets, with the message timeout and bounds.

seeds/002 section 5 ("Message Transfer Sublayer"): after a fragment of a message
arrives, the receiver waits ``message_timeout`` for the next one; if it is late
the message is abandoned and the reader is told. We accept fragments in any
order (the simulator and real Wi-Fi reorder) and reset the timer on each new
fragment; a message completes when fragments 0..last are all present.

Every table here can be filled by an outsider, so each is bounded:
``max_partial_messages`` and ``max_partial_bytes`` (at the bound the partial
message idle the longest is abandoned with reason ``"bound"``),
``max_message_bytes`` (a fragment beyond it abandons its message, reason
``"too_large"``) and the completed-ID cache that discards redundant copies
(oldest entries forgotten first; entries also expire after the message timeout).
"""

from __future__ import annotations

import builtins
from collections import OrderedDict
from dataclasses import dataclass, field

from m2mc.wire.packet import MAX_FRAGMENT, Packet


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
        self.limits = limits or ReassemblyLimits()
        # Insertion order == order of last activity (we move_to_end on each fragment),
        # so the first entry is both the oldest deadline and the idlest message.
        self._partial: OrderedDict[int, _Partial] = OrderedDict()
        self._partial_bytes = 0
        # message id -> expiry; redundant copies of a completed or ignored message are dropped.
        self._done: OrderedDict[int, float] = OrderedDict()
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
        done = self._done
        done[message_id] = now + self.limits.message_timeout
        done.move_to_end(message_id)
        while len(done) > self.limits.completed_cache:
            done.popitem(last=False)

    def receive(self, packet: Packet, now: float) -> bytes | None:
        """Add one packet; return the whole message when it completes, else None."""
        return self.receive_fragment(packet.message_id, packet.fragment, packet.last,
                                     packet.data, now)

    def receive_fragment(self, message_id: int, fragment: int, last: bool, data: bytes,
                         now: float) -> bytes | None:
        """:meth:`receive` without a :class:`Packet` (the layer's hot path)."""
        done = self._done
        if message_id in done:
            if done[message_id] > now:
                self.duplicates += 1
                # Keep ignoring a message while its copies keep coming: a long filtered
                # message may outlast one message timeout. Order stays expiry order.
                done[message_id] = now + self.limits.message_timeout
                done.move_to_end(message_id)
                return None
            del done[message_id]
        limits = self.limits
        # Fast path: a one-packet message that nobody was assembling. The ID is not in
        # ``done`` (checked above), so it goes to the end, keeping expiry order.
        if last and fragment == 0 and message_id not in self._partial:
            done[message_id] = now + limits.message_timeout
            if len(done) > limits.completed_cache:
                done.popitem(last=False)
            return data
        if (fragment + 1) * MAX_FRAGMENT > limits.max_message_bytes + MAX_FRAGMENT:
            self._abandon(message_id, "too_large")
            self.mark_done(message_id, now)
            return None
        partial = self._partial.get(message_id)
        if partial is None:
            partial = _Partial(deadline=now + limits.message_timeout)
            self._partial[message_id] = partial
        elif fragment in partial.parts:
            self.duplicates += 1
            return None
        else:
            partial.deadline = now + limits.message_timeout
            self._partial.move_to_end(message_id)
        if last:
            if partial.last not in (-1, fragment) or any(
                number > fragment for number in partial.parts
            ):
                # Two different "last" fragments: not a message anyone sent. Drop it.
                self._abandon(message_id, "malformed")
                self.mark_done(message_id, now)
                return None
            partial.last = fragment
        elif partial.last != -1 and fragment > partial.last:
            self._abandon(message_id, "malformed")
            self.mark_done(message_id, now)
            return None
        partial.parts[fragment] = data
        size = len(data)
        partial.size += size
        self._partial_bytes += size
        if partial.last != -1 and len(partial.parts) == partial.last + 1:
            parts = partial.parts
            message = b"".join(parts[i] for i in range(partial.last + 1))
            self.mark_done(message_id, now)
            return message
        if len(self._partial) > limits.max_partial_messages or (
                self._partial_bytes > limits.max_partial_bytes):
            self._enforce_bounds()
        return None

    def on_timer(self, now: float) -> None:
        """Abandon every partial message whose next fragment is late."""
        while self._partial:
            message_id, partial = next(iter(self._partial.items()))
            if partial.deadline > now:
                break
            self._abandon(message_id, "timeout")
        # Expired completed IDs are dropped lazily in receive(); trim the front here.
        done = self._done
        while done:
            message_id, expiry = next(iter(done.items()))
            if expiry > now:
                break
            del done[message_id]

    def next_deadline(self) -> float | None:
        if not self._partial:
            return None
        return next(iter(self._partial.values())).deadline

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
