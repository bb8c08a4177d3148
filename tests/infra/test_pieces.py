"""Cell frames cut into pieces that fit one IP packet, and put together again
(m2mc.infra.pieces; docs/decisions.md, "Cell frames never rely on IP fragmentation")."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from m2mc.errors import DecodeError
from m2mc.infra.pieces import (
    MIN_CELL_MTU,
    PIECE_HEADER,
    Reassembly,
    cut,
    datagram_limit,
    is_piece,
)

SMALLEST = datagram_limit(MIN_CELL_MTU)


def test_a_frame_that_fits_goes_as_it_is() -> None:
    frame = b"IM\x01" + bytes(1000)
    assert cut(frame, 7, 1472) == [frame]
    assert not is_piece(frame)


def test_the_largest_frame_fits_the_smallest_mtu_s_pieces() -> None:
    pieces = cut(bytes(65_507), 1, SMALLEST)
    assert all(len(p) <= SMALLEST and is_piece(p) for p in pieces)
    assert len(pieces) <= 255


@given(st.binary(min_size=1, max_size=20_000), st.integers(SMALLEST, 4000),
       st.randoms(use_true_random=False), st.integers(0, 3))
def test_pieces_in_any_order_with_duplicates_give_back_the_frame_once(
        frame: bytes, limit: int, rnd: random.Random, copies: int) -> None:
    pieces = cut(frame, rnd.getrandbits(32), limit)
    if len(pieces) == 1:
        assert pieces == [frame]
        return
    arrivals = pieces + [rnd.choice(pieces) for _ in range(copies)]
    rnd.shuffle(arrivals)
    r = Reassembly()
    out = [f for p in arrivals if (f := r.feed(("10.0.0.1", 1), p, 0.0)) is not None]
    # once all pieces are in, the frame comes out; a late duplicate starts a partial
    # frame that can never complete, and the timeout takes it away
    assert out == [frame]
    r.expire(10.0)
    assert r.held_frames == 0 and r.held_bytes == 0
    assert r.stats.frames == 1


def test_a_piece_missing_gives_nothing_and_the_partial_frame_times_out() -> None:
    pieces = cut(bytes(5000), 9, 1472)
    r = Reassembly(timeout=2.0)
    for p in pieces[1:]:
        assert r.feed("a", p, 0.0) is None
    assert r.held_frames == 1
    r.expire(1.9)
    assert r.held_frames == 1
    r.expire(2.0)
    assert (r.held_frames, r.held_bytes, r.stats.expired) == (0, 0, 1)


def test_the_same_id_from_two_senders_are_two_frames() -> None:
    a, b = bytes(3000), b"\x01" * 3000
    r = Reassembly()
    got = []
    for pa, pb in zip(cut(a, 5, 1472), cut(b, 5, 1472), strict=True):
        got += [r.feed("one", pa, 0.0), r.feed("two", pb, 0.0)]
    assert [f for f in got if f is not None] == [a, b]


def test_at_the_bounds_the_oldest_partial_frame_goes_and_the_newest_comes_through() -> None:
    # The kernel refuses new fragments once its buffer is full: under steady loss no
    # large datagram gets through any more. Here the oldest is given up instead.
    r = Reassembly(max_frames=4, max_bytes=1 << 20, timeout=60.0)
    for frame_id in range(10):  # ten frames, each missing its last piece
        for p in cut(bytes(4000), frame_id, 1472)[:-1]:
            r.feed("a", p, float(frame_id))
    assert r.held_frames == 4 and r.stats.evicted == 6
    whole = bytes(range(256)) * 20
    out = [r.feed("a", p, 11.0) for p in cut(whole, 99, 1472)]
    assert out[-1] == whole
    r2 = Reassembly(max_frames=100, max_bytes=10_000)
    for frame_id in range(10):
        for p in cut(bytes(4000), frame_id, 1472)[:-1]:
            r2.feed("a", p, 0.0)
    assert r2.held_bytes <= 10_000


@pytest.mark.parametrize("data", [
    b"IM\x02", b"IM\x02" + bytes(6),  # shorter than a header, or nothing after it
    b"IM\x02" + (0).to_bytes(4, "big") + bytes([2, 2]) + b"x",  # index past the count
    b"IM\x02" + (0).to_bytes(4, "big") + bytes([0, 1]) + b"x",  # a frame of one piece
    b"IM\x01" + bytes(20),  # a frame, not a piece
])
def test_a_malformed_piece_is_counted_and_refused(data: bytes) -> None:
    r = Reassembly()
    with pytest.raises(DecodeError):
        r.feed("a", data, 0.0)
    assert r.stats.malformed == 1 and r.held_frames == 0


def test_pieces_that_add_up_past_the_largest_datagram_are_refused() -> None:
    body = bytes(1472 - PIECE_HEADER)
    count = 65_507 // len(body) + 2
    r = Reassembly()
    with pytest.raises(DecodeError):
        for i in range(count):
            r.feed("a", b"IM\x02" + (3).to_bytes(4, "big") + bytes([i, count]) + body, 0.0)
    assert r.stats.malformed == 1 and r.held_frames == 0


def test_a_count_that_changes_under_one_id_starts_the_frame_again() -> None:
    r = Reassembly()
    first = cut(bytes(3000), 4, 1472)  # 3 pieces
    second = cut(b"\x07" * 5000, 4, 1472)  # 4 pieces, the same id
    r.feed("a", first[0], 0.0)
    out = [r.feed("a", p, 0.1) for p in second]
    assert out[-1] == b"\x07" * 5000
