"""Display names on the wire (docs/group.md, "Display names"): optional trailing elements
of JOIN, STATUS and GRPS_INFO entries. A frame without them decodes as before, an
unnamed node's frames are byte for byte what they were, a name out of bounds makes
the frame malformed, and elements a later version adds after them are ignored."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.api import Node, NodeConfig
from m2mc.errors import DecodeError, UsageError
from m2mc.group.codec import (
    DISCOVERY_TAG,
    HEADER_SIZE,
    MAX_BODY_ELEMENTS,
    MAX_NAME,
    GrpInfo,
    GrpsInfo,
    Join,
    Kind,
    LogState,
    MemberEntry,
    Status,
    decode_body,
    encode,
    group_tag,
    split_frame,
)
from m2mc.group.names import MemberNames, check_name

TAG = group_tag("g")
MEMBERS = (MemberEntry("a", 1, True), MemberEntry("b", 2, True), MemberEntry("c", 3, False))


def body_of(frame: bytes) -> list[object]:
    wire: list[object] = msgpack.unpackb(frame[HEADER_SIZE:], raw=False)
    return wire


def decode(kind: Kind, wire: list[object]) -> object:
    return decode_body(int(kind), msgpack.packb(wire, use_bin_type=True))


def roundtrip(body: object) -> object:
    frame = split_frame(encode(TAG, body))  # type: ignore[arg-type]
    return decode_body(frame.kind, frame.body)


# ------------------------------------------------------------------ old format
def test_frames_without_names_decode_as_unnamed() -> None:
    assert decode(Kind.JOIN, ["a", 1, "sb", "team"]) == Join("a", 1, "sb", "team")
    assert decode(Kind.JOIN, ["a", 1, "sb", "team"]).name == ""  # type: ignore[attr-defined]
    status = decode(Kind.STATUS, ["a", 3, {"b": 2}, [["a", 1, True]], None, 0])
    assert status == Status("a", 3, {"b": 2}, (MemberEntry("a", 1, True),), None, 0, "")
    old = decode(Kind.GRPS_INFO, ["a", [["g", "d", "sb", [["a", 1, True]]],
                                        ["k", "d", "total", [], True]]])
    assert old == GrpsInfo("a", (GrpInfo("g", "d", "sb", (MemberEntry("a", 1, True),)),
                                 GrpInfo("k", "d", "total", (), True)))
    assert all(g.names == () for g in old.groups)  # type: ignore[attr-defined]


def test_an_unnamed_node_sends_exactly_what_it_sent_before_names() -> None:
    assert body_of(encode(TAG, Join("a", 1, "sb", "team"))) == ["a", 1, "sb", "team"]
    assert body_of(encode(TAG, Status("a", 3, {"b": 2}, MEMBERS, None, 0))) == [
        "a", 3, {"b": 2}, [["a", 1, True], ["b", 2, True], ["c", 3, False]], None, 0]
    info = GrpsInfo("a", (GrpInfo("g", "d", "sb", MEMBERS[:1]), GrpInfo("k", "", "sb", (), True)))
    assert body_of(encode(DISCOVERY_TAG, info)) == [
        "a", [["g", "d", "sb", [["a", 1, True]]], ["k", "", "sb", [], True]]]


def test_names_are_trailing_elements_written_only_when_set() -> None:
    assert body_of(encode(TAG, Join("a", 1, "sb", "team", "Alice")))[4:] == ["Alice"]
    status = Status("a", 3, {}, MEMBERS, LogState(1, "a", 1, "a", 4), 4, "Alice")
    assert body_of(encode(TAG, status))[6:] == ["Alice"]
    named = GrpInfo("g", "d", "sb", MEMBERS, False, (("a", "Alice"), ("b", "Bob")))
    entry = body_of(encode(DISCOVERY_TAG, GrpsInfo("a", (named,))))[1][0]  # type: ignore[index]
    assert entry[4:] == [False, {"a": "Alice", "b": "Bob"}]


# ------------------------------------------------------------------ round trips
_pids = st.text("abcdefgh", min_size=1, max_size=8)
_names = st.text(min_size=1, max_size=32).filter(lambda s: len(s.encode()) <= MAX_NAME)


@settings(max_examples=200, deadline=None)
@given(_pids, st.integers(1, 2**40 - 1), st.sampled_from(["sb", "causal", "fifo", "total"]),
       st.text(max_size=40), st.just("") | _names)
def test_join_round_trips(pid: str, version: int, order: str, desc: str, name: str) -> None:
    join = Join(pid, version, order, desc, name)
    assert roundtrip(join) == join


@settings(max_examples=200, deadline=None)
@given(_pids, st.dictionaries(_pids, st.integers(0, 1000), max_size=4),
       st.lists(st.tuples(_pids, st.integers(0, 9), st.booleans()), max_size=4),
       st.just("") | _names, st.booleans())
def test_status_round_trips(pid: str, summary: dict[str, int],
                            members: list[tuple[str, int, bool]], name: str, total: bool) -> None:
    seqr = LogState(2, pid, 2, pid, 7) if total else None
    status = Status(pid, 5, summary, tuple(MemberEntry(*m) for m in members), seqr,
                    7 if total else 0, name)
    assert roundtrip(status) == status


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_pids, _names, max_size=5), st.booleans())
def test_grps_info_round_trips(names: dict[str, str], keyed: bool) -> None:
    members = tuple(MemberEntry(pid, 1, True) for pid in sorted(names))
    info = GrpInfo("g", "team", "sb", members, keyed, tuple(sorted(names.items())))
    body = GrpsInfo("a", (info, GrpInfo("h", "", "fifo", ())))
    frame = split_frame(encode(DISCOVERY_TAG, body))
    assert decode_body(frame.kind, frame.body) == body


def test_grps_info_names_decode_sorted_without_empty_ones() -> None:
    got = decode(Kind.GRPS_INFO, ["a", [["g", "", "sb", [], False,
                                         {"c": "Carol", "a": "Alice", "b": ""}]]])
    assert got.groups[0].names == (("a", "Alice"), ("c", "Carol"))  # type: ignore[attr-defined]
    assert got.groups[0].name_of("c") == "Carol"  # type: ignore[attr-defined]
    assert got.groups[0].name_of("b") == ""  # type: ignore[attr-defined]


# ------------------------------------------------------------------ bounds
def test_a_name_of_128_bytes_passes_and_one_of_129_makes_the_frame_malformed() -> None:
    longest = "é" * 64  # two bytes each in UTF-8
    assert len(longest.encode()) == MAX_NAME == 128
    assert decode(Kind.JOIN, ["a", 1, "sb", "", longest]).name == longest  # type: ignore[attr-defined]
    for bad in ("é" * 65, "x" * 129, 7, b"Alice", None, ["Alice"]):
        with pytest.raises(DecodeError):
            decode(Kind.JOIN, ["a", 1, "sb", "", bad])
        with pytest.raises(DecodeError):
            decode(Kind.STATUS, ["a", 3, {}, [], None, 0, bad])
        with pytest.raises(DecodeError):
            decode(Kind.GRPS_INFO, ["a", [["g", "", "sb", [], False, {"a": bad}]]])


def test_bad_names_maps_and_flags_are_malformed() -> None:
    for names in (["a", "Alice"], "Alice", {"": "Nobody"}, {"x" * 65: "Long"}, {1: "One"}):
        with pytest.raises(DecodeError):
            decode(Kind.GRPS_INFO, ["a", [["g", "", "sb", [], False, names]]])
    with pytest.raises(DecodeError):  # the keyed flag before the names is still a flag
        decode(Kind.GRPS_INFO, ["a", [["g", "", "sb", [], None, {"a": "Alice"}]]])


def test_elements_after_the_names_are_a_later_versions_and_ignored() -> None:
    assert decode(Kind.JOIN, ["a", 1, "sb", "", "Alice", {"later": 1}, 2]) == \
        Join("a", 1, "sb", "", "Alice")
    assert decode(Kind.STATUS, ["a", 3, {}, [], None, 0, "Alice", "later"]) == \
        Status("a", 3, {}, (), None, 0, "Alice")
    got = decode(Kind.GRPS_INFO, ["a", [["g", "", "sb", [], True, {"a": "Alice"}, "later"]]])
    assert got == GrpsInfo("a", (GrpInfo("g", "", "sb", (), True, (("a", "Alice"),)),))
    too_long = ["a", 1, "sb", "", "Alice"] + [0] * (MAX_BODY_ELEMENTS - 4)
    with pytest.raises(DecodeError):
        decode(Kind.JOIN, too_long)
    with pytest.raises(DecodeError):  # kinds without names keep their exact length
        decode(Kind.LEAVE, ["a", 1, "Alice"])


# ------------------------------------------------------------------ the API's check
def test_check_name_says_what_is_wrong() -> None:
    assert check_name("") == "" and check_name("é" * 64) == "é" * 64
    with pytest.raises(UsageError, match="at most 128 bytes"):
        check_name("é" * 65)
    with pytest.raises(UsageError, match="must be a string"):
        check_name(b"Alice")
    with pytest.raises(UsageError, match="valid text"):
        check_name("\udc80")
    with pytest.raises(UsageError, match="at most 128 bytes"):
        Node(NodeConfig(channel="mem://names-check", name="x" * 129))


def test_member_names_keep_a_processes_own_word_over_relayed_news() -> None:
    names = MemberNames(max_entries=2)
    assert names.relayed("a", "Alice") and names.get("a") == "Alice"
    assert names.relayed("a", "Alicia")  # relayed over relayed: the newest
    assert names.said("a", "Al") and names.get("a") == "Al"
    assert not names.relayed("a", "Alice") and names.get("a") == "Al"
    assert not names.said("a", "Al")  # the same word: no change
    assert names.said("a", "") and names.get("a") == ""  # it says it has none
    assert not names.relayed("a", "Alice") and names.get("a") == ""
    assert not names.relayed("b", "")  # a relayed "" says nothing
    assert names.said("b", "Bob")
    assert not names.said("c", "Carol") and not names.relayed("c", "Carol")  # the bound
    assert names.refused == 2 and len(names) == 2
    assert names.of(["c", "b", "a"]) == (("b", "Bob"),)
