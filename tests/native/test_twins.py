"""The compiled hot path (m2mc.native._speedups) against the pure-Python one.

Where a C compiler is at hand, ``pip install`` builds the extension and every
receiver decodes its data records in C. These tests hold the two paths to the same
behaviour: the same messages (equal, of the same classes, sharing a parent's identity
object the same way), the same DecodeError for the same bad input, nothing leaked on
either path. Whether the compiled path is in use, and ``M2MC_PURE``: test_loader.py.
"""

from __future__ import annotations

import struct
import sys
import tempfile
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc import native
from m2mc.api import inbox as inbox_module
from m2mc.api.inbox import Inbox
from m2mc.api.message import GroupMessage
from m2mc.errors import DecodeError
from m2mc.group import codec, node_output
from m2mc.group.codec import Data, Gone, Repair, SyncResp, decode_body, encode, group_tag
from m2mc.group.stream_codec import STREAM_MAGIC
from m2mc.group.wire_bounds import MAX_SEQ
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import sqlite
from m2mc.store.sqlite import SqliteStore
from m2mc.wire import packet, segments

Records = Callable[[Any, int], list[Message]]
NATIVE: Records | None = None if native.NATIVE is None else native.NATIVE.records

needs_native = pytest.mark.skipif(NATIVE is None, reason=f"the compiled loops are not in use "
                                  f"({native.STATUS.reason}); test_loader.py says if they must be")


def _outcome(records: Records, raw: Any, max_seq: int) -> tuple[str, Any]:
    try:
        out = records(raw, max_seq)
    except DecodeError as exc:
        return "error", str(exc)
    shape = [(type(m), type(m.mid), type(m.parent),
              i > 0 and m.parent is out[i - 1].mid, m.parent is ROOT) for i, m in enumerate(out)]
    return "ok", (out, shape)


# Records near the valid ones: every field right, or wrong in one of the ways a
# hostile or broken sender could make it.
pids = st.one_of(st.sampled_from(["a", "b", "node-1"]), st.text(max_size=70), st.just(""),
                 st.integers(), st.binary(max_size=3), st.none())
seqs = st.one_of(st.integers(0, 6), st.integers(-3, 2**70), st.sampled_from([MAX_SEQ - 1, MAX_SEQ]),
                 st.booleans(), st.floats(allow_nan=False), st.text(max_size=2), st.none())
payloads = st.one_of(st.binary(max_size=8), st.text(max_size=3), st.integers(), st.none())
gseqs = st.one_of(st.none(), seqs)
vclocks = st.one_of(st.dictionaries(pids.filter(lambda p: type(p) is str), seqs, max_size=3),
                    st.lists(st.integers(), max_size=2), st.none(), st.integers())
records_raw = st.lists(
    st.one_of(
        st.tuples(pids, seqs, pids, seqs, payloads).map(list),
        st.tuples(pids, seqs, pids, seqs, payloads, gseqs).map(list),
        st.tuples(pids, seqs, pids, seqs, payloads, gseqs, vclocks).map(list),
        st.lists(st.integers(), max_size=9),
        st.integers(), st.none(), st.binary(max_size=2)),
    max_size=8)


def _chain(pid: str, start: int, count: int, roots: set[int]) -> list[list[Any]]:
    """Valid records, each the reply to the one before but those in ``roots``."""
    out: list[list[Any]] = []
    for i in range(count):
        seq = start + i
        parent = ["", 0] if i in roots or i == 0 else [pid, seq - 1]
        out.append([pid, seq, *parent, b"p%d" % seq])
    return out


@needs_native
@settings(max_examples=400, deadline=None)
@given(raw=st.one_of(records_raw, st.integers(), st.none(), st.dictionaries(st.text(), st.none())),
       max_seq=st.sampled_from([MAX_SEQ, 5, 2**62]))
def test_compiled_and_python_records_agree_on_any_input(raw: Any, max_seq: int) -> None:
    assert NATIVE is not None
    assert _outcome(NATIVE, raw, max_seq) == _outcome(codec.records_py, raw, max_seq)


@needs_native
@settings(max_examples=200, deadline=None)
@given(pid=st.text(min_size=1, max_size=64), start=st.integers(1, MAX_SEQ - 50),
       count=st.integers(0, 40), roots=st.sets(st.integers(0, 40)),
       extra=st.sampled_from([(), (None,), (7,), (7, {"a": 1})]))
def test_compiled_and_python_records_agree_on_valid_chains(
        pid: str, start: int, count: int, roots: set[int], extra: tuple[Any, ...]) -> None:
    assert NATIVE is not None
    raw = [[*r, *extra] for r in _chain(pid, start, count, roots)]
    native, python = _outcome(NATIVE, raw, MAX_SEQ), _outcome(codec.records_py, raw, MAX_SEQ)
    assert native == python
    assert native[0] == "ok"


@needs_native
def test_the_compiled_path_leaks_no_reference_on_success_or_error() -> None:
    assert NATIVE is not None
    pid, payload = "leak-probe-pid", b"leak-probe-payload"
    good = [[pid, 1, "", 0, payload], [pid, 2, pid, 1, payload], [pid, 3, "x", 9, payload, 4]]
    bad_late = [*good, [pid, 0, "", 0, payload]]  # fails after building three
    bad_vclock = [[pid, 1, "", 0, payload, None, {pid: -1}]]
    before = sys.getrefcount(pid), sys.getrefcount(payload)
    for _ in range(1000):
        NATIVE(good, MAX_SEQ)
        for raw in (bad_late, bad_vclock):
            with pytest.raises(DecodeError):
                NATIVE(raw, MAX_SEQ)
    assert (sys.getrefcount(pid), sys.getrefcount(payload)) == before


@needs_native
def test_the_compiled_path_takes_max_seq_as_given() -> None:
    assert NATIVE is not None
    with pytest.raises(OverflowError):
        NATIVE([], 2**70)
    with pytest.raises(TypeError):
        NATIVE([], "7")  # type: ignore[arg-type]


def _use(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Have the codec decode records on ``path``: "python" or "compiled"."""
    if path == "compiled":
        if NATIVE is None:
            pytest.skip("m2mc.native._speedups not built")
        monkeypatch.setattr(codec, "_records", NATIVE)
    else:
        monkeypatch.setattr(codec, "_records", codec.records_py)


both_paths = pytest.mark.parametrize("path", ["python", "compiled"])


def _messages() -> list[Message]:
    a1, a2 = MessageId("alpha", 1), MessageId("alpha", 2)
    return [Message(a1, ROOT, b"one"), Message(a2, a1, b"two"),
            Message(MessageId("beta", 9), a2, b"", None, 17),
            Message(MessageId("gamma", 3), ROOT, b"\x00" * 300, {"gamma": 3, "alpha": 2}, 18)]


@both_paths
def test_every_body_with_records_round_trips_on_both_paths(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _use(path, monkeypatch)
    tag = group_tag("speedups")
    messages = _messages()
    for body in (Data("alpha", messages), Repair("beta", messages),
                 Gone("gamma", {"alpha": [(1, 2)]}, [(3, 4)], messages),
                 SyncResp("alpha", "beta", 5, messages, 2)):
        frame = codec.split_frame(encode(tag, body))
        assert decode_body(frame.kind, frame.body) == body


@both_paths
def test_a_bad_record_refuses_the_whole_body_on_both_paths(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _use(path, monkeypatch)
    good = ["alpha", 1, "", 0, b"x"]
    for record, error in (([*good[:4], "text"], "bad data record"),
                          (["alpha", 1, "alpha", 0, b"x"], "bad parent seqno"),
                          (["alpha", 1, "", 3, b"x"], "bad parent seqno"),
                          ([*good, 0], "integer out of range"),
                          ([*good, None, []], "bad vector clock")):
        body = msgpack.packb(["alpha", [good, record]], use_bin_type=True)
        with pytest.raises(DecodeError, match=error):
            decode_body(codec.Kind.DATA, body)


# ---------------------------------------------------------------- the log's puts
LARGE = 64  # payloads this long or longer go to payload files (the Python's part)

put_messages = st.lists(
    st.builds(
        lambda pid, seq, parent, size, vclock, gseq: Message(
            MessageId(pid, seq), parent, bytes(size), vclock, gseq),
        st.sampled_from(["a", "b"]), st.integers(1, 6),
        st.sampled_from([ROOT, MessageId("a", 1), MessageId("c", 9)]),
        st.sampled_from([0, 5, LARGE - 1, LARGE, 300]),
        st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 9),
                                             max_size=2)),
        st.one_of(st.none(), st.integers(1, 99))),
    max_size=12)


def _store_after(puts: list[tuple[list[Message], bool]], native: bool) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as patch:
        if not native:
            patch.setattr(sqlite, "_PUT_RECORDS", None)
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteStore(Path(tmp) / "log.db", large_payload=LARGE)
            try:
                for messages, delivered in puts:
                    if len(messages) == 1 and delivered is False:
                        store.put("g", messages[0], delivered)
                    else:
                        store.put_delivered("g", tuple(messages) if delivered else messages)
                state = (store._pending, store._written, store._pending_gseqs,
                         store._pending_refs)
                store.commit()
                return (*state, store.load_messages("g"))
            finally:
                store.close()


@needs_native
@settings(max_examples=150, deadline=None)
@given(puts=st.lists(st.tuples(put_messages, st.booleans()), max_size=4))
def test_compiled_and_python_puts_leave_the_same_records(
        puts: list[tuple[list[Message], bool]]) -> None:
    assert sqlite._PUT_RECORDS is not None
    assert _store_after(puts, True) == _store_after(puts, False)


@needs_native
def test_the_compiled_put_stops_where_the_python_must_go_on() -> None:
    assert NATIVE is not None and native.NATIVE is not None
    put = native.NATIVE.put_records
    small, large = (Message(MessageId("a", s), ROOT, bytes(n)) for s, n in ((1, 3), (2, 99)))
    by_pid: dict[str, dict[int, list[Any]]] = {}
    assert put(by_pid, [small, large, small], 0, True, 10, 64) == (11, 1, False)
    assert by_pid == {"a": {1: [11, 1, "", 0, bytes(3), None, None, True]}}
    assert put(by_pid, [small, large, small], 2, False, 11, 64) == (11, 3, False)
    assert by_pid["a"][1][0] == 11 and by_pid["a"][1][7] is False  # same write number
    odd = Message(MessageId("a", 3), ROOT, bytearray(3))  # type: ignore[arg-type]
    assert put(by_pid, [odd], 0, True, 11, 64)[1] == 0


# ---------------------------------------------------------------- delivery
def _inbox_after(batches: list[list[Message]], takes: list[int], native: bool
                 ) -> tuple[list[GroupMessage], list[Any], int, int]:
    with pytest.MonkeyPatch.context() as patch:
        if not native:
            patch.setattr(inbox_module, "TAKE_MESSAGES", None)
        inbox = Inbox("me", own_limit=1 << 20)
        out: list[GroupMessage] = []
        for batch, take in zip(batches, takes, strict=True):
            inbox.add(batch)
            inbox.take("g", min(take, len(inbox)), out)
        return out, list(inbox.messages), inbox.own, inbox.own_bytes


delivered = st.lists(st.builds(
    lambda pid, seq, size, gseq: Message(MessageId(pid, seq), ROOT, bytes(size), None, gseq),
    st.sampled_from(["me", "other", "third"]), st.integers(1, 50), st.integers(0, 9),
    st.one_of(st.none(), st.integers(1, 50))), max_size=10)


@needs_native
@settings(max_examples=200, deadline=None)
@given(batches=st.lists(delivered, max_size=5), takes=st.lists(st.integers(0, 12), min_size=5,
                                                                 max_size=5))
def test_compiled_and_python_inboxes_hand_out_the_same_messages(
        batches: list[list[Message]], takes: list[int]) -> None:
    assert inbox_module.TAKE_MESSAGES is not None
    takes = takes[:len(batches)]
    assert _inbox_after(batches, takes, True) == _inbox_after(batches, takes, False)


@needs_native
def test_the_compiled_take_stops_at_an_own_message_and_puts_it_back() -> None:
    take = inbox_module.TAKE_MESSAGES
    assert take is not None
    first = Message(MessageId("a", 1), ROOT, b"x", None, 4)
    own = (2, "", 0, b"mine", None)
    queue: deque[Any] = deque([first, own, first])
    out: list[GroupMessage] = []
    assert take(queue, 3, "g", out) == 1
    assert list(queue) == [own, first]
    assert out == [GroupMessage("g", first.mid, ROOT, b"x", 4)]
    assert type(out[0]) is GroupMessage


@needs_native
@settings(max_examples=200, deadline=None)
@given(payloads=st.lists(st.one_of(st.binary(max_size=20), st.builds(
    lambda tail: STREAM_MAGIC + tail, st.binary(max_size=4)),
    st.just(STREAM_MAGIC[:-1])), max_size=8))
def test_compiled_and_python_find_the_same_stream_heads(payloads: list[bytes]) -> None:
    assert node_output._STREAM_HEADS is not None
    messages = [Message(MessageId("a", i + 1), ROOT, p) for i, p in enumerate(payloads)]
    heads = node_output._STREAM_HEADS(messages, STREAM_MAGIC)
    assert heads == [m for m in messages if m.payload.startswith(STREAM_MAGIC)]
    odd = [*messages, GroupMessage("g", MessageId("a", 99), ROOT, STREAM_MAGIC)]
    assert node_output._STREAM_HEADS(odd, STREAM_MAGIC) is None  # (the listcomp answers)


# ---------------------------------------------------------------- msgpack, written
PACK = None if native.NATIVE is None else native.NATIVE.pack

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**65),
    st.sampled_from([0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63,
                     2**64 - 1, 2**64, -1, -32, -33, -128, -129, -32768, -32769, -(2**31),
                     -(2**31) - 1, -(2**63), -(2**63) - 1]),
    st.text(max_size=40), st.sampled_from(["\ud800", "é" * 20, "x" * 31, "x" * 32, "x" * 256]),
    st.binary(max_size=300), st.floats(allow_nan=False))
packables = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=18), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=5), st.integers(0, 9)), inner, max_size=17)),
    max_leaves=40)


def _msgpack(obj: object) -> bytes | None:
    try:
        data: bytes = msgpack.packb(obj, use_bin_type=True)
    except (OverflowError, ValueError, TypeError, UnicodeEncodeError):
        return None
    return data


@needs_native
@settings(max_examples=500, deadline=None)
@given(obj=packables)
def test_the_compiled_writer_writes_msgpack_s_bytes_or_leaves_it_to_msgpack(obj: object) -> None:
    assert PACK is not None
    packed = PACK(obj)
    if packed is not None:
        assert packed == msgpack.packb(obj, use_bin_type=True)
    else:  # (a type it does not write, or what msgpack itself refuses)
        assert _has_other_types(obj) or _msgpack(obj) is None


def _has_other_types(obj: object, depth: int = 0) -> bool:
    if depth > 8:
        return True
    if isinstance(obj, list | tuple):
        return any(_has_other_types(o, depth + 1) for o in obj)
    if isinstance(obj, dict):
        return any(_has_other_types(k, depth + 1) or _has_other_types(v, depth + 1)
                   for k, v in obj.items())
    return type(obj) is float or (type(obj) is int and not -(2**63) <= obj < 2**64) or (
        type(obj) is str and _msgpack(obj) is None)


@needs_native
def test_the_compiled_writer_takes_long_lists_and_big_containers() -> None:
    assert PACK is not None
    for obj in (list(range(70_000)), {str(i): i for i in range(70_000)}, b"x" * 70_000,
                "y" * 70_000, [[[[[[[[1]]]]]]]], [[[[[[[[[[1]]]]]]]]]]):
        packed = PACK(obj)
        assert packed is None or packed == msgpack.packb(obj, use_bin_type=True)
    assert PACK([[[[[[[[1]]]]]]]]) is not None and PACK([[[[[[[[[[1]]]]]]]]]]) is None


record_messages = st.lists(st.builds(
    lambda pid, seq, parent, payload, vclock, gseq: Message(
        MessageId(pid, seq), parent, payload, vclock, gseq),
    st.sampled_from(["a", "node-é", "x" * 64]), st.integers(1, 2**40 - 1),
    st.sampled_from([ROOT, MessageId("a", 1), MessageId("b" * 40, 2**33)]),
    st.binary(max_size=600),
    st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 2**40 - 1),
                                         max_size=2)),
    st.one_of(st.none(), st.integers(1, 2**40 - 1))), max_size=20)


@needs_native
@settings(max_examples=300, deadline=None)
@given(sender=st.sampled_from(["a", "node-é"]), messages=record_messages,
       repair=st.booleans())
def test_compiled_and_python_encode_the_same_data_frames(
        sender: str, messages: list[Message], repair: bool) -> None:
    body = Repair(sender, messages) if repair else Data(sender, messages)
    tag = group_tag("g")
    with pytest.MonkeyPatch.context() as patch:
        compiled = encode(tag, body)
        patch.setattr(native, "_PACK", None)
        patch.setattr(codec, "_PACK_RECORDS", None)
        assert encode(tag, body) == compiled
    frame = codec.split_frame(compiled)
    assert decode_body(frame.kind, frame.body) == body


class _Subclass(Message):
    __slots__ = ()


@needs_native
def test_the_compiled_record_writer_leaves_other_objects_to_msgpack() -> None:
    assert native.NATIVE is not None
    pack_records = native.NATIVE.pack_records
    plain = Message(MessageId("a", 1), ROOT, b"x")
    assert pack_records("a", [plain]) is not None
    assert pack_records("a", [plain, _Subclass(MessageId("a", 2), ROOT, b"y")]) is None
    assert pack_records(7, [plain]) is None  # type: ignore[arg-type]
    assert pack_records("a", (plain,)) is None  # type: ignore[arg-type]
    odd_clock = Message(MessageId("a", 3), ROOT, b"z", MappingProxyType({"a": 3}))
    assert pack_records("a", [odd_clock]) is None
    body = Data("a", [plain, odd_clock])
    frame = codec.split_frame(encode(group_tag("g"), body))  # (msgpack wrote it)
    assert decode_body(frame.kind, frame.body) == body


# ---------------------------------------------------------------- sizes and builders
sized_messages = st.builds(
    lambda pid, seq, ppid, pseq, size, vclock, gseq: Message(
        MessageId(pid, seq), MessageId(ppid, pseq), bytes(size), vclock, gseq),
    st.text(max_size=70), st.integers(-(2**65), 2**65), st.text(max_size=5),
    st.sampled_from([0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, -5, 2**70]),
    st.sampled_from([0, 255, 256, 65535, 65536]),
    st.one_of(st.none(), st.dictionaries(st.text(max_size=4), st.integers(-5, 2**40), max_size=3)),
    st.one_of(st.none(), st.integers(-(2**64), 2**64)))


@needs_native
@settings(max_examples=300, deadline=None)
@given(message=sized_messages)
def test_compiled_and_python_record_sizes_agree(message: Message) -> None:
    assert codec.record_size is not codec.record_size_py
    assert codec.record_size(message) == codec.record_size_py(message)


@needs_native
def test_the_compiled_record_size_leaves_other_objects_to_the_python() -> None:
    odd = [_Subclass(MessageId("a", 1), ROOT, b"xy"),
           Message(MessageId("a", 1), ROOT, b"z", MappingProxyType({"a": 1})),
           Message(MessageId("a", 1), ROOT, bytearray(b"xyz"))]  # type: ignore[arg-type]
    for message in odd:
        assert codec.record_size(message) == codec.record_size_py(message)


@needs_native
def test_a_compiled_builder_refuses_what_it_cannot_build() -> None:
    assert native.NATIVE is not None
    build = native.NATIVE.slot_builder(MessageId, ("pid", "seq"))
    assert build("a", 1) == MessageId("a", 1) and type(build("a", 1)) is MessageId
    with pytest.raises(TypeError):
        build("a")
    with pytest.raises(TypeError):
        build("a", seq=1)
    for cls, names in ((MessageId, ("seq", "pid")), (MessageId, ("pid",)), (dict, ()),
                       (_Subclass, ("mid", "parent", "payload", "vclock", "gseq"))):
        with pytest.raises(TypeError):
            native.NATIVE.slot_builder(cls, names)
    pid = "builder-probe"
    before = sys.getrefcount(pid)
    for _ in range(1000):
        build(pid, 1)
    assert sys.getrefcount(pid) == before


# ---------------------------------------------------------------- M2MP runs
@st.composite
def gro_blocks(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    """A joined GRO block of ``count`` M2MP packets, most of them a message's run of
    fragments, some broken in one place, some plain noise."""
    count = draw(st.integers(1, 6))
    message_id = draw(st.sampled_from([0, 7, 2**32 - 1]))
    word = draw(st.sampled_from([0, 1, 2**31 - 3, 2**31 - 1, 2**31]))
    final_size = draw(st.sampled_from([0, 4, 7, 8, 9, 100, 508]))
    last = draw(st.booleans())
    headers = [[message_id, (word + i) % 2**32] for i in range(count)]
    if last:
        headers[-1][1] = (headers[-1][1] | 0x8000_0000) % 2**32
    if draw(st.booleans()):  # broken in one place
        i, field = draw(st.integers(0, count - 1)), draw(st.integers(0, 1))
        headers[i][field] = draw(st.integers(0, 2**32 - 1))
    block = b"".join(struct.pack(">II", *h) + bytes(500) for h in headers[:-1])
    block += (struct.pack(">II", *headers[-1]) + bytes(500))[:final_size]
    if draw(st.booleans()):
        block = draw(st.binary(max_size=1100))
    return block, count, message_id, word


@needs_native
@settings(max_examples=500, deadline=None)
@given(case=gro_blocks())
def test_compiled_and_python_check_a_run_of_fragments_alike(
        case: tuple[bytes, int, int, int]) -> None:
    assert segments.consecutive is native.consecutive is not native.consecutive_py
    block, count, message_id, word = case
    assert native.consecutive(block, count, message_id, word) == native.consecutive_py(
        block, count, message_id, word)
    joined = segments.Segments(block)  # (what the channel hands the M2MP layer)
    assert native.consecutive(joined, count, message_id, word) == native.consecutive_py(
        joined, count, message_id, word)


def _packets_or_error(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:  # the error's type is what must match
        return type(exc)


@needs_native
@settings(max_examples=300, deadline=None)
@given(message_id=st.one_of(st.sampled_from([0, 1, 2**31, 2**32 - 1]),
                            st.integers(-2, 2**33), st.just(1.5), st.just(None)),
       payload=st.one_of(st.binary(max_size=2100),
                         st.integers(0, 70_000).map(lambda n: bytes(range(256)) * (n // 256)
                                                    + bytes(n % 256))),
       kind=st.sampled_from([bytes, bytearray, memoryview, str]))
def test_compiled_and_python_cut_a_message_into_the_same_packets(
        message_id: Any, payload: bytes, kind: type) -> None:
    """Every packet byte for byte (and each a bytes), or the same error where the
    Python refuses (an id out of 32 bits, a payload that is not bytes-like)."""
    assert native._FRAGMENTS is not None and packet.fragment_list is native.fragment_list
    given_payload: Any = payload.hex() if kind is str else kind(payload)
    compiled = _packets_or_error(lambda: native.fragment_list(message_id, given_payload))
    python = _packets_or_error(lambda: native.fragment_list_py(message_id, given_payload))
    assert compiled == python
    if isinstance(compiled, list):
        assert all(type(p) is bytes and len(p) <= packet.MAX_PACKET for p in compiled)
        assert b"".join(p[packet.HEADER_SIZE:] for p in compiled) == payload
