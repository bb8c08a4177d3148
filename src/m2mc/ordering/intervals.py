"""Ordering lists: a set of sequence numbers kept as sorted, disjoint, non-adjacent
inclusive intervals (seeds/003 VI.B, Fig 9).

The seed keeps each list as a linked list of ``(L, H)`` nodes scanned linearly.
We keep two parallel Python lists, ``lows`` and ``highs``, and search them with
:func:`bisect.bisect_right`, so membership is O(log m) and the usual insertion
(the next sequence number of a sender, extending the last interval) is O(1).
Corrections to the seed's Algorithms 1 and 2 are listed in docs/decisions.md.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

__all__ = ["IntervalList", "merge_intervals"]


class IntervalList:
    """Sorted disjoint inclusive intervals ``[lows[i], highs[i]]`` with
    ``highs[i] + 1 < lows[i + 1]`` (adjacent intervals are always merged)."""

    __slots__ = ("highs", "lows")

    def __init__(self, values: Iterable[int] = ()) -> None:
        self.lows: list[int] = []
        self.highs: list[int] = []
        for value in values:
            self.add(value)

    def __contains__(self, value: object) -> bool:
        """Algorithm 1 (IsPresentInOL), corrected: find the interval with the
        greatest ``L <= value`` and answer ``value <= H``."""
        if not isinstance(value, int):
            return False
        i = bisect_right(self.lows, value) - 1
        return i >= 0 and value <= self.highs[i]

    def add(self, value: int) -> bool:
        """Algorithm 2 (InsertInOL), corrected. Returns False if already present."""
        lows = self.lows
        highs = self.highs
        # Fast path: the sender's next sequence number extends the last interval.
        if highs and value == highs[-1] + 1:
            highs[-1] = value
            return True
        k = bisect_right(lows, value)  # lows[k] is the least L greater than value
        if k and value <= highs[k - 1]:
            return False  # already present
        joins_prev = k > 0 and highs[k - 1] == value - 1
        joins_next = k < len(lows) and lows[k] == value + 1
        if joins_prev and joins_next:
            highs[k - 1] = highs[k]
            del lows[k]
            del highs[k]
        elif joins_next:
            lows[k] = value
        elif joins_prev:
            highs[k - 1] = value
        else:
            lows.insert(k, value)
            highs.insert(k, value)
        return True

    def discard(self, value: int) -> None:
        """Remove ``value`` if present (the interval holding it shrinks or splits)."""
        lows = self.lows
        highs = self.highs
        i = bisect_right(lows, value) - 1
        if i < 0 or value > highs[i]:
            return
        lo, hi = lows[i], highs[i]
        if lo == hi:
            del lows[i]
            del highs[i]
        elif value == lo:
            lows[i] = value + 1
        elif value == hi:
            highs[i] = value - 1
        else:
            highs[i] = value - 1
            lows.insert(i + 1, value + 1)
            highs.insert(i + 1, hi)

    def add_range(self, lo: int, hi: int) -> None:
        """Add every value of ``lo..hi`` (merged with the intervals it touches)."""
        if lo > hi:
            return
        lows = self.lows
        highs = self.highs
        i = bisect_left(highs, lo - 1)  # the first interval ending at or after lo - 1
        j = bisect_right(lows, hi + 1)  # the first interval starting after hi + 1
        if i < j:
            lo = min(lo, lows[i])
            hi = max(hi, highs[j - 1])
        lows[i:j] = [lo]
        highs[i:j] = [hi]

    def prefix(self, start: int = 1) -> int:
        """The greatest ``h`` such that ``start..h`` are all present (``start - 1`` if none)."""
        lows = self.lows
        i = bisect_right(lows, start) - 1
        if i >= 0 and start <= self.highs[i]:
            return self.highs[i]
        return start - 1

    def intervals(self) -> list[tuple[int, int]]:
        return list(zip(self.lows, self.highs, strict=True))

    def gaps(self, start: int, stop: int, limit: int) -> list[int]:
        """Up to ``limit`` values in ``start..stop`` (inclusive) that are absent, ascending."""
        out: list[int] = []
        lows = self.lows
        highs = self.highs
        n = len(lows)
        value = start
        i = bisect_right(lows, value)  # lows[i] is the first interval starting after value
        if i and value <= highs[i - 1]:
            value = highs[i - 1] + 1
        while value <= stop:
            end = min(stop, lows[i] - 1) if i < n else stop
            while value <= end:
                if len(out) >= limit:
                    return out
                out.append(value)
                value += 1
            if i >= n:
                break
            value = highs[i] + 1
            i += 1
        return out

    def count(self) -> int:
        """How many values are present."""
        return sum(h - lo + 1 for lo, h in zip(self.lows, self.highs, strict=True))

    def __len__(self) -> int:
        """How many intervals (nodes of the seed's linked list)."""
        return len(self.lows)

    def __iter__(self) -> Iterator[int]:
        for lo, h in zip(self.lows, self.highs, strict=True):
            yield from range(lo, h + 1)

    def __repr__(self) -> str:
        return f"IntervalList({self.intervals()!r})"


def merge_intervals(base: IntervalList | None, extra: Iterable[int]) -> list[tuple[int, int]]:
    """The intervals of ``base`` together with the values ``extra`` (any order, may overlap)."""
    merged = IntervalList()
    if base is not None:
        merged.lows = list(base.lows)
        merged.highs = list(base.highs)
    for value in sorted(extra):
        merged.add(value)
    return merged.intervals()
