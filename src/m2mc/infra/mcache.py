"""The membership cache of seeds/001 2.3 (A6).

An entry for a member identifier is inserted as soon as it has left the group and
is forgotten after ``ttl`` seconds ("a time sufficiently long to ensure that no
messages related to mid are still in transit"). The cache is bounded: past
``size`` entries the oldest is forgotten first. Forgetting is safe in practice
because join-ids are fresh 32-bit patterns a computer never reuses; the cache only
stops a stale duplicate JOIN from re-admitting a member that left.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from m2mc.infra.ids import MemberId


class MembershipCache:
    __slots__ = ("_entries", "size", "ttl")

    def __init__(self, size: int, ttl: float) -> None:
        self.size = size
        self.ttl = ttl
        self._entries: OrderedDict[MemberId, float] = OrderedDict()

    def add(self, mid: MemberId, now: float) -> None:
        self._entries.pop(mid, None)
        self._entries[mid] = now
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def expire(self, now: float) -> None:
        while self._entries:
            mid, since = next(iter(self._entries.items()))
            if now - since < self.ttl:
                break
            del self._entries[mid]

    def __contains__(self, mid: object) -> bool:
        return mid in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[MemberId]:
        return iter(self._entries)
