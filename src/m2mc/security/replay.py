"""Per-sender sliding replay windows over 64-bit counters, in a bounded LRU table.

Each sender stamps its messages with a counter that increases by one per
message. For each sender we keep the highest counter accepted, ``high``, and a
bitmap of which of the ``window`` counters ``high - window + 1 .. high`` were
accepted (the scheme of IPsec, RFC 4303 section 3.4.3):

- counter > high: accepted; the window slides up.
- high - window < counter <= high: accepted once; a second time it is a replay.
- counter <= high - window: refused as stale (we can no longer tell).

The table holds at most ``max_senders`` senders. Admitting one more evicts the
sender heard least recently, whose window is forgotten: if it speaks again its
next counter is accepted as if it were new. Only authenticated messages reach
this table, so only key holders can fill it; the eviction is counted.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from m2mc.errors import ConfigError

__all__ = ["ReplayTable", "Verdict"]


@dataclass(slots=True)
class _Window:
    high: int
    seen: int  # bit i set <=> counter high - i was accepted


class Verdict:
    """What :meth:`ReplayTable.check` found (string constants, cheap to compare)."""

    FRESH = "fresh"
    REPLAY = "replay"
    STALE = "stale"
    EVICTED = "fresh, evicted another sender"  # only from admit(): accepted


class ReplayTable:
    """Sans-IO replay protection for any number of senders, bounded."""

    __slots__ = ("_mask", "_windows", "evictions", "max_senders", "window")

    def __init__(self, window: int = 1024, max_senders: int = 4096) -> None:
        if window < 1:
            raise ConfigError(f"replay_window must be >= 1, got {window}")
        if max_senders < 1:
            raise ConfigError(f"max_senders must be >= 1, got {max_senders}")
        self.window = window
        self.max_senders = max_senders
        self._mask = (1 << window) - 1
        self._windows: OrderedDict[str, _Window] = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._windows)

    def __contains__(self, sender: object) -> bool:
        return sender in self._windows

    def check(self, sender: str, counter: int) -> str:
        """The verdict for ``counter`` of ``sender``, without recording anything."""
        state = self._windows.get(sender)
        if state is None or counter > state.high:
            return Verdict.FRESH
        offset = state.high - counter
        if offset >= self.window:
            return Verdict.STALE
        return Verdict.REPLAY if state.seen >> offset & 1 else Verdict.FRESH

    def accept(self, sender: str, counter: int) -> bool:
        """Record ``counter`` as accepted (call only after :meth:`check` said FRESH).

        Returns True if admitting a new sender evicted another one.
        """
        windows = self._windows
        state = windows.get(sender)
        if state is None:
            windows[sender] = _Window(counter, 1)
            if len(windows) > self.max_senders:
                windows.popitem(last=False)
                self.evictions += 1
                return True
            return False
        windows.move_to_end(sender)
        high = state.high
        if counter > high:
            shift = counter - high
            state.seen = ((state.seen << shift) | 1) & self._mask if shift < self.window else 1
            state.high = counter
        else:
            state.seen |= 1 << (high - counter)
        return False

    def admit(self, sender: str, counter: int) -> str:
        """:meth:`check` then, if FRESH, :meth:`accept`, in one step (the hot path).

        Returns FRESH (recorded), EVICTED (recorded; a least recent sender was
        forgotten to make room), REPLAY or STALE (nothing recorded).
        """
        state = self._windows.get(sender)
        if state is not None:
            high = state.high
            if counter == high + 1:  # the usual case: the sender's next message
                self._windows.move_to_end(sender)
                state.seen = ((state.seen << 1) | 1) & self._mask
                state.high = counter
                return Verdict.FRESH
            if counter <= high:
                offset = high - counter
                if offset >= self.window:
                    return Verdict.STALE
                if state.seen >> offset & 1:
                    return Verdict.REPLAY
        return Verdict.EVICTED if self.accept(sender, counter) else Verdict.FRESH

    def high(self, sender: str) -> int | None:
        """Highest counter accepted from ``sender`` (None if unknown or evicted)."""
        state = self._windows.get(sender)
        return None if state is None else state.high
