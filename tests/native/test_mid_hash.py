"""MessageId's hash and equality in C (m2mc.native._speedups, given the class by
``bind_message_classes``) against the dataclass's own: the same answers for every
pair, so that every table keyed by MessageId finds what it found before, in the same
order (the hash is CPython's tuple hash of ``(pid, seq)``). Under ``M2MC_PURE`` the
dataclass's own are in use and these hold trivially."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from m2mc.ordering import ROOT, MessageId

_pids = st.one_of(st.sampled_from(["", "a", "ab", "n00", "peer:7"]),
                  st.text(max_size=12))
_seqs = st.one_of(st.integers(0, 300), st.integers(-(2**70), 2**70))
_mids = st.builds(MessageId, _pids, _seqs)


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class _Twin:
    """MessageId as the dataclass makes it, never given to the C."""

    pid: str
    seq: int


def _twin(mid: MessageId) -> _Twin:
    return _Twin(mid.pid, mid.seq)


@given(_mids)
def test_the_same_hash_as_the_tuple_of_its_fields(mid: MessageId) -> None:
    assert hash(mid) == hash((mid.pid, mid.seq)) == hash(_twin(mid))


@given(_mids, _mids)
def test_the_same_comparisons_as_the_dataclass(a: MessageId, b: MessageId) -> None:
    ta, tb = _twin(a), _twin(b)
    assert (a == b) == (ta == tb)
    assert (a != b) == (ta != tb)
    assert (a < b) == (ta < tb)
    assert (a <= b) == (ta <= tb)
    same = MessageId(a.pid, a.seq)
    assert a == same
    assert (a != same) is False  # (NE in C answers too)


def test_other_types_are_never_equal_and_not_ordered() -> None:
    mid = MessageId("a", 1)
    assert mid != ("a", 1)
    assert (mid == ("a", 1)) is False  # (EQ, not NE, is what is tested)
    assert mid != _Twin("a", 1)
    assert mid.__eq__(("a", 1)) is NotImplemented
    with pytest.raises(TypeError):
        _ = mid < ("a", 1)  # type: ignore[operator]


def test_tables_keyed_by_message_ids_find_equal_ones() -> None:
    table = {MessageId(f"p{i % 7}", i): i for i in range(1000)}
    assert all(table[MessageId(f"p{i % 7}", i)] == i for i in range(1000))
    assert MessageId("", 0) == ROOT and hash(MessageId("", 0)) == hash(ROOT)
    assert list({MessageId("b", 2), MessageId("a", 1)} | {MessageId("a", 1)}) == list(
        {MessageId("b", 2), MessageId("a", 1)})


def test_a_half_built_id_raises_as_the_dataclass_does() -> None:
    blank = object.__new__(MessageId)  # (no slot set: as a bad pickle could leave it)
    with pytest.raises(AttributeError):
        hash(blank)
    with pytest.raises(AttributeError):
        _ = blank == MessageId("a", 1)
