"""One decoding of a group message for all the simulated nodes that receive it.

A datagram broadcast on a domain of n nodes reaches n - 1 of them, and each would
parse the same bytes into the same frozen message objects. Decoding is a pure
function of the bytes (and of the receiver's ``max_seq`` bound), so the simulator's
``group`` stack gives every node one shared :class:`DecodeMemo` in place of
:func:`m2mc.group.codec.decode_body` (``NodeReceive.decode_body``, on a node's
``receiver``): the first receiver decodes, the others get the same objects. Nothing
a receiver does changes a decoded body (tests/sim/test_decode_memo.py decodes every
memoized body again at the end of a run and compares), and a body that fails to
decode fails again, with the same message, at every receiver, so each still counts
it (``malformed``) itself.

The memo keeps the last ``limit`` bodies: the copies of one datagram arrive within
its delays of one another, and memory stays bounded whatever the run's length. A hit
or a miss changes nothing but time, so a run is the same with it and without it.
"""

from __future__ import annotations

from m2mc.errors import DecodeError
from m2mc.group.codec import MAX_SEQ, Body, decode_body

LIMIT = 4096  # bodies kept


class DecodeMemo:
    """``decode(kind, body, max_seq=...)``: :func:`~m2mc.group.codec.decode_body`,
    once per distinct input among the last ``limit``."""

    __slots__ = ("_found", "hits", "limit", "misses")

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        # (kind, max_seq, body bytes) -> the body, or the DecodeError's message
        self._found: dict[tuple[int, int, bytes], Body | str] = {}
        self.hits = self.misses = 0

    def decode(self, kind: int, body: bytes | memoryview, *, max_seq: int = MAX_SEQ) -> Body:
        key = (kind, max_seq, body if type(body) is bytes else bytes(body))
        found = self._found.get(key)
        if found is None:
            self.misses += 1
            try:
                found = decode_body(kind, key[2], max_seq=max_seq)
            except DecodeError as exc:
                found = str(exc)
            memo = self._found
            if len(memo) >= self.limit:
                del memo[next(iter(memo))]  # the oldest
            memo[key] = found
        else:
            self.hits += 1
        if type(found) is str:
            raise DecodeError(found)
        return found  # type: ignore[return-value]

    def entries(self) -> list[tuple[int, int, bytes, Body | str]]:
        """What is memoized: (kind, max_seq, bytes, body or error message)."""
        return [(*key, found) for key, found in self._found.items()]


SHARED = DecodeMemo()  # the one the group stack's nodes share (a pure function's memo)
