"""Arithmetic on sorted lists of disjoint inclusive intervals ``[(lo, hi), ...]``.

Digests (what a node holds, per sender), NACK ranges and MIRs are all sets of
sequence numbers kept this way, so a gap of ten thousand messages costs one pair.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

Intervals = list[tuple[int, int]]


def normalize(intervals: Iterable[tuple[int, int]]) -> Intervals:
    """Sorted, merged (overlapping or adjacent pairs joined), empty pairs dropped."""
    out: Intervals = []
    for lo, hi in sorted(iv for iv in intervals if iv[0] <= iv[1]):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """``a - b`` for normalized inputs."""
    out: Intervals = []
    j = 0
    nb = len(b)
    for lo, hi in a:
        cur = lo
        while j < nb and b[j][1] < cur:
            j += 1
        k = j
        while k < nb and b[k][0] <= hi:
            blo, bhi = b[k]
            if blo > cur:
                out.append((cur, blo - 1))
            cur = max(cur, bhi + 1)
            if cur > hi:
                break
            k += 1
        if cur <= hi:
            out.append((cur, hi))
    return out


def intersect(a: Intervals, b: Intervals) -> Intervals:
    out: Intervals = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def count(intervals: Intervals) -> int:
    return sum(hi - lo + 1 for lo, hi in intervals)


def contains(intervals: Intervals, value: int) -> bool:
    return any(lo <= value <= hi for lo, hi in intervals)


def values(intervals: Intervals, limit: int) -> Iterator[int]:
    """At most ``limit`` values, ascending."""
    n = 0
    for lo, hi in intervals:
        for v in range(lo, hi + 1):
            if n >= limit:
                return
            yield v
            n += 1


def holes(have: Intervals, high: int) -> Intervals:
    """Values in ``1..high`` missing from ``have``."""
    if high < 1:
        return []
    return subtract([(1, high)], have)


def truncate(intervals: Intervals, limit: int) -> Intervals:
    return intervals[:limit]
