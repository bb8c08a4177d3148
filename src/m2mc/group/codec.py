"""Wire format of the group layer: a fixed struct prefix, then a msgpack body.

Every group message is one M2MP message::

    offset  size  field
    0       2     magic  b"MC"
    2       1     version (1)
    3       8     group tag: blake2b-64 of the group id; 8 zero bytes for discovery
    11      1     kind (see ``Kind``)
    12      1     flags (bit 0, FLAG_AUTH: a keyed group's message, sealed)
    13      ...   msgpack body (kind-specific, see docs/group.md)

A sealed message (flag bit 0) carries an authentication header, the body
(encrypted under an AEAD suite) and a tag after these 13 bytes; it is made and
opened by :mod:`m2mc.group.groupwire`, never by this module
(docs/security.md). :func:`split_frame` refuses it.

The first 11 bytes (magic, version, group tag) are what a process registers as
its M2MP message filter for each group it has joined (seeds/002 2.3), so the
M2MP layer drops other groups' traffic before it is reassembled, and a future
version can never be mistaken for this one. Flags sit after the filter prefix
so an authenticated message still matches the group's filter.

Decoders raise :class:`~m2mc.errors.DecodeError` and nothing else; every list,
string and integer is bounded, so a forged message costs bounded memory.

This module frames, encodes and decodes (the data records' hot path included);
the message types are in :mod:`m2mc.group.messages` and the bounds with their
checked readers in :mod:`m2mc.group.wire_bounds`, both re-exported here.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import msgpack

from m2mc.errors import DecodeError
from m2mc.group.messages import (
    Ack,
    Adv,
    Body,
    Data,
    Decided,
    Digest,
    Entries,
    Gone,
    GrpInfo,
    GrpsInfo,
    Handover,
    Intervals,
    Join,
    Kind,
    Leave,
    LogEntry,
    LogState,
    MemberEntry,
    Nack,
    Order,
    Prepare,
    Promise,
    Repair,
    SequencerInfo,
    Start,
    Status,
    SyncReq,
    SyncResp,
)
from m2mc.group.stream_codec import (
    StreamAck,
    StreamData,
    StreamNack,
    stream_ack_from_wire,
    stream_from_wire,
    stream_to_wire,
)
from m2mc.group.wire_bounds import (
    MAX_BODY_ELEMENTS,
    MAX_DESC,
    MAX_GID,
    MAX_LIST,
    MAX_NAME,
    MAX_PID,
    MAX_SEQ,
)
from m2mc.group.wire_bounds import read_ballot_pid as _ballot_pid
from m2mc.group.wire_bounds import read_digest as _digest
from m2mc.group.wire_bounds import read_entries as _entries
from m2mc.group.wire_bounds import read_int as _int
from m2mc.group.wire_bounds import read_intervals as _intervals
from m2mc.group.wire_bounds import read_list as _list
from m2mc.group.wire_bounds import read_members as _members
from m2mc.group.wire_bounds import read_name as _name
from m2mc.group.wire_bounds import read_names as _names
from m2mc.group.wire_bounds import read_order as _order
from m2mc.group.wire_bounds import read_pid as _pid
from m2mc.group.wire_bounds import read_str as _str
from m2mc.group.wire_bounds import read_vclock as _vclock
from m2mc.native import bind_record_size, bind_records, fast_constructor, packb
from m2mc.native import pack_records as _PACK_RECORDS
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.ordering.ids import make_message, make_mid

__all__ = [  # the message types and bounds are re-exported: the codec is their one address
    "DISCOVERY_TAG", "FILTER_SIZE", "FLAG_AUTH", "HEADER", "HEADER_SIZE", "MAGIC",
    "MAX_BODY_ELEMENTS", "MAX_DESC", "MAX_GID", "MAX_LIST", "MAX_NAME", "MAX_PID", "MAX_SEQ",
    "VERSION", "Ack", "Adv", "Body", "Data", "Decided", "Digest", "Entries", "Frame", "Gone",
    "GrpInfo", "GrpsInfo", "Handover", "Intervals", "Join", "Kind", "Leave", "LogEntry",
    "LogState", "MemberEntry", "Nack", "Order", "Prepare", "Promise", "Repair",
    "SequencerInfo", "Start", "Status", "SyncReq", "SyncResp", "decode_body",
    "encode", "filter_prefix", "group_tag", "record_size",
    "record_wire", "split_frame",
]

MAGIC = b"MC"
VERSION = 1
HEADER = struct.Struct(">2sB8sBB")
HEADER_SIZE = HEADER.size  # 13
FILTER_SIZE = 11  # magic + version + group tag
DISCOVERY_TAG = bytes(8)
FLAG_AUTH = 0x01

_KINDS = frozenset(int(k) for k in Kind)
# The kinds as plain ints for the decoder's tests: comparing with an IntEnum member
# costs an attribute lookup on the enum class and a rich comparison each time.
_DATA = int(Kind.DATA)
_RECORD_KINDS = frozenset((_DATA, int(Kind.REPAIR)))


def group_tag(gid: str) -> bytes:
    """The 8-byte tag of a group id (never the discovery tag)."""
    tag = hashlib.blake2b(gid.encode(), digest_size=8).digest()
    return tag if tag != DISCOVERY_TAG else b"\x00" * 7 + b"\x01"


def filter_prefix(tag: bytes) -> bytes:
    """The M2MP message filter that selects one group's messages."""
    return HEADER.pack(MAGIC, VERSION, tag, 0, 0)[:FILTER_SIZE]


_KIND_OF: dict[type, Kind] = {
    Data: Kind.DATA, Repair: Kind.REPAIR, Order: Kind.ORDER, Status: Kind.STATUS,
    Nack: Kind.NACK, SyncReq: Kind.SYNC_REQ, SyncResp: Kind.SYNC_RESP, Join: Kind.JOIN,
    Leave: Kind.LEAVE, Handover: Kind.HANDOVER, Ack: Kind.ACK, Prepare: Kind.PREPARE,
    Promise: Kind.PROMISE, Start: Kind.START, Decided: Kind.DECIDED, Gone: Kind.GONE,
    Adv: Kind.ADV, GrpsInfo: Kind.GRPS_INFO, StreamData: Kind.STREAM,
    StreamNack: Kind.STREAM_NACK, StreamAck: Kind.STREAM_ACK,
}


# ---------------------------------------------------------------- framing
@dataclass(frozen=True, slots=True)
class Frame:
    tag: bytes
    kind: int
    flags: int
    body: bytes | memoryview


_make_frame: Callable[[bytes, int, int, bytes | memoryview], Frame] = fast_constructor(Frame)
_make_data: Callable[[str, list[Message]], Data] = fast_constructor(Data)
_make_repair: Callable[[str, list[Message]], Repair] = fast_constructor(Repair)
_unpack_header = HEADER.unpack_from


def split_frame(message: bytes) -> Frame:
    """Check the fixed prefix; the body is not looked at yet."""
    if len(message) < HEADER_SIZE:
        raise DecodeError(f"group message of {len(message)} bytes is shorter than its header")
    magic, version, tag, kind, flags = _unpack_header(message)
    if magic != MAGIC or version != VERSION or kind not in _KINDS or flags:
        _bad_prefix(magic, version, kind, flags)
    return _make_frame(tag, kind, flags, memoryview(message)[HEADER_SIZE:])


def _bad_prefix(magic: bytes, version: int, kind: int, flags: int) -> NoReturn:
    """Raise the DecodeError that says what is wrong with a frame's prefix."""
    if magic != MAGIC:
        raise DecodeError("not a group message (bad magic)")
    if version != VERSION:
        raise DecodeError(f"unsupported group protocol version {version}")
    if kind not in _KINDS:
        raise DecodeError(f"unknown group message kind {kind}")
    if flags & FLAG_AUTH:
        raise DecodeError("sealed group message: only its group's key opens it")
    raise DecodeError(f"unknown group message flags {flags:#x}")


def encode(tag: bytes, body: Body) -> bytes:
    kind = _KIND_OF[type(body)]
    head = HEADER.pack(MAGIC, VERSION, tag, kind, 0)
    if _PACK_RECORDS is not None and kind in _RECORD_KINDS:
        records = body.records  # type: ignore[union-attr]  # (Data or Repair)
        if type(records) is list:  # (written from the Messages, in C: the same bytes)
            packed = _PACK_RECORDS(body.sender, records)
            if packed is not None:
                return head + packed
    return head + packb(_to_wire(body))


def record_wire(m: Message) -> list[Any]:
    """One data record on the wire: ``[pid, seq, ppid, pseq, payload(, gseq(, vclock))]``."""
    mid = m.mid
    parent = m.parent
    if m.vclock is not None:
        return [mid.pid, mid.seq, parent.pid, parent.seq, m.payload, m.gseq, dict(m.vclock)]
    if m.gseq is not None:
        return [mid.pid, mid.seq, parent.pid, parent.seq, m.payload, m.gseq]
    return [mid.pid, mid.seq, parent.pid, parent.seq, m.payload]


def _uint_size(v: int) -> int:
    return 1 if v < 128 else 2 if v < 256 else 3 if v < 65536 else 5 if v < 1 << 32 else 9


def record_size_py(m: Message) -> int:
    """A record's encoded size (exact for ASCII process ids; for batching, where
    an error only makes one batch span two packets). ``record_size`` is this, in C
    where m2mc.native's C is in use (the sender's per-message path)."""
    size = len(m.payload)
    size += 2 if size < 256 else 3 if size < 65536 else 5
    mid, parent = m.mid, m.parent
    seq, pseq = mid.seq, parent.seq
    # _uint_size inline for the two seqnos (the sender's per-message path).
    size += (3 + len(mid.pid) + len(parent.pid)
             + (1 if seq < 128 else 2 if seq < 256 else 3 if seq < 65536 else _uint_size(seq))
             + (1 if pseq < 128 else 2 if pseq < 256 else 3 if pseq < 65536
                else _uint_size(pseq)))
    if m.gseq is not None:
        size += _uint_size(m.gseq)
    if m.vclock is not None:
        size += 3 + sum(len(k) + 1 + _uint_size(v) for k, v in m.vclock.items())
    return size


record_size: Callable[[Message], int] = bind_record_size(record_size_py)


def _members_wire(members: tuple[MemberEntry, ...]) -> list[list[Any]]:
    return [[e.pid, e.version, e.joined] for e in members]


def _digest_wire(digest: Mapping[str, Intervals]) -> dict[str, list[int]]:
    # Flattened [lo1, hi1, lo2, hi2, ...]: half the array headers of a list of pairs.
    return {pid: [v for pair in ivs for v in pair] for pid, ivs in digest.items()}


def _grp_info_wire(g: GrpInfo) -> list[Any]:
    wire: list[Any] = [g.gid, g.desc, g.order, _members_wire(g.members)]
    if g.keyed or g.names:
        wire.append(g.keyed)
    if g.names:
        wire.append(dict(g.names))
    return wire


def _named(wire: list[Any], name: str) -> list[Any]:
    """A body with the optional trailing name: written only when there is one."""
    if name:
        wire.append(name)
    return wire


def _entries_wire(entries: Entries) -> list[list[Any]]:
    out: list[list[Any]] = []
    for g, e in entries:
        if isinstance(e, MemberEntry):
            out.append([g, e.pid, e.version, e.joined])
        else:
            out.append([g, e.pid, e.seq])
    return out


def _to_wire(body: Body) -> list[Any]:
    match body:
        case Data(sender, records) | Repair(sender, records):
            return [sender, [record_wire(m) for m in records]]
        case Order(sender, epoch, stamps, commit):
            return [sender, epoch, _entries_wire(stamps), commit]
        case Status(sender, own_hw, summary, members, seqr, max_gseq, name):
            return _named([sender, own_hw, summary, _members_wire(members),
                           None if seqr is None else [seqr.epoch, seqr.leader, seqr.log_epoch,
                                                      seqr.log_leader, seqr.high], max_gseq],
                          name)
        case Ack(sender, epoch, leader, high, synced):
            return [sender, epoch, leader, high, synced]
        case Prepare(sender, epoch, commit):
            return [sender, epoch, commit]
        case Promise(sender, epoch, candidate, log_epoch, log_leader, commit, high, entries):
            return [sender, epoch, candidate, log_epoch, log_leader, commit, high,
                    _entries_wire(entries)]
        case Start(sender, epoch, base, entries):
            return [sender, epoch, base, _entries_wire(entries)]
        case Decided(sender, entries):
            return [sender, _entries_wire(entries)]
        case Nack(sender, ranges, gseqs):
            return [sender, _digest_wire(ranges), [v for pair in gseqs for v in pair]]
        case Gone(sender, ranges, gseqs, stubs):
            return [sender, _digest_wire(ranges), [v for pair in gseqs for v in pair],
                    [record_wire(m) for m in stubs]]
        case SyncReq(sender, sync_seqno, digest):
            return [sender, sync_seqno, _digest_wire(digest)]
        case SyncResp(sender, requester, sync_seqno, records, remaining):
            return [sender, requester, sync_seqno, [record_wire(m) for m in records], remaining]
        case Join(sender, version, order, desc, name):
            return _named([sender, version, order, desc], name)
        case Leave(sender, version):
            return [sender, version]
        case Handover(sender, seqr):
            return [sender, seqr.epoch, seqr.pid, seqr.next_gseq]
        case Adv(sender):
            return [sender]
        case GrpsInfo(sender, groups):
            return [sender, [_grp_info_wire(g) for g in groups]]
        case StreamData() | StreamNack() | StreamAck():
            return stream_to_wire(body)
    raise TypeError(f"not a group message body: {body!r}")  # pragma: no cover


# ---------------------------------------------------------------- decoding
def decode_body(kind: int, body: bytes | memoryview, *, max_seq: int = MAX_SEQ) -> Body:
    """Decode the body of a frame of ``kind``; raise DecodeError on anything malformed."""
    try:
        raw = msgpack.unpackb(body, raw=False, strict_map_key=True, max_str_len=1 << 20,
                              max_bin_len=1 << 24, max_array_len=MAX_LIST,
                              max_map_len=MAX_LIST, max_ext_len=0)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise DecodeError(f"malformed group message body: {type(exc).__name__}") from None
    try:
        return _from_wire(kind, raw, max_seq)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise DecodeError(f"malformed group message body: {exc}") from None


def records_py(raw: Any, max_seq: int) -> list[Message]:
    """The data records of a body: the hot path of every receiver, run in C where
    m2mc.native's C is in use (``_records``: m2mc.native.bind_records; the same checks,
    errors and objects). Here: checks and builds each record as cheaply as Python allows
    (objects built by m2mc.native's fast constructors; a parent that is the previous
    record of the batch reuses that record's identity object)."""
    out: list[Message] = []
    append = out.append
    new_mid = make_mid
    new_message = make_message
    prev: MessageId = ROOT
    for r in _list(raw):
        if type(r) is not list:
            raise DecodeError("bad data record")
        n = len(r)
        if n == 5:
            pid, seq, ppid, pseq, payload = r
            gseq = vclock = None
        elif n == 6 or n == 7:
            pid, seq, ppid, pseq, payload = r[0], r[1], r[2], r[3], r[4]
            gseq = None if r[5] is None else _int(r[5], 1, max_seq)
            vclock = _vclock(r[6], max_seq) if n == 7 else None
        else:
            raise DecodeError("bad data record")
        if (type(pid) is not str or type(seq) is not int or type(ppid) is not str
                or type(pseq) is not int or type(payload) is not bytes
                or not 0 < len(pid) <= MAX_PID or not 1 <= seq < max_seq
                or len(ppid) > MAX_PID):
            raise DecodeError("bad data record")
        if ppid:
            if not 1 <= pseq < max_seq:
                raise DecodeError("bad parent seqno")
            parent = prev if pseq == prev.seq and ppid == prev.pid else make_mid(ppid, pseq)
        elif pseq == 0:
            parent = ROOT
        else:
            raise DecodeError("bad parent seqno")
        prev = new_mid(pid, seq)
        append(new_message(prev, parent, payload, vclock, gseq))
    return out


_records: Callable[[Any, int], list[Message]] = bind_records(
    records_py, DecodeError, _vclock, MAX_PID, MAX_LIST)


def _from_wire(kind: int, raw: Any, max_seq: int) -> Body:
    r = _list(raw, 1, MAX_BODY_ELEMENTS)
    sender = _pid(r[0])
    if kind in _RECORD_KINDS:
        if len(r) != 2:
            raise DecodeError("expected a list of the right length")
        records = _records(r[1], max_seq)
        return _make_data(sender, records) if kind == _DATA else _make_repair(sender, records)
    if kind == Kind.ORDER:
        _list(r, 4, 4)
        return Order(sender, _int(r[1], 1, max_seq), _entries(r[2], max_seq),
                     _int(r[3], 0, max_seq))
    if kind == Kind.STATUS:
        # Elements after the seventh (the name) are a later version's: ignored.
        _list(r, 6, MAX_BODY_ELEMENTS)
        summary_raw = r[2]
        if type(summary_raw) is not dict:
            raise DecodeError("bad status summary")
        summary = {_pid(k): _int(v, 0, max_seq) for k, v in summary_raw.items()}
        seqr = None
        if r[4] is not None:
            s = _list(r[4], 5, 5)
            epoch = _int(s[0], 0, max_seq)
            log_epoch = _int(s[2], 0, max_seq)
            seqr = LogState(epoch, _ballot_pid(epoch, s[1]), log_epoch,
                            _ballot_pid(log_epoch, s[3]), _int(s[4], 0, max_seq))
        return Status(sender, _int(r[1], 0, max_seq), summary, _members(r[3], max_seq), seqr,
                      _int(r[5], 0, max_seq), _name(r[6]) if len(r) > 6 else "")
    if kind == Kind.NACK:
        _list(r, 3, 3)
        return Nack(sender, _digest(r[1], max_seq), _intervals(r[2], max_seq))
    if kind == Kind.GONE:
        _list(r, 4, 4)
        return Gone(sender, _digest(r[1], max_seq), _intervals(r[2], max_seq),
                    _records(r[3], max_seq))
    if kind == Kind.SYNC_REQ:
        _list(r, 3, 3)
        return SyncReq(sender, _int(r[1], 1, max_seq), _digest(r[2], max_seq))
    if kind == Kind.SYNC_RESP:
        _list(r, 5, 5)
        return SyncResp(sender, _pid(r[1]), _int(r[2], 1, max_seq), _records(r[3], max_seq),
                        _int(r[4], 0, max_seq))
    if kind == Kind.JOIN:
        _list(r, 4, MAX_BODY_ELEMENTS)  # after the fifth (the name): a later version's
        return Join(sender, _int(r[1], 1, max_seq), _order(r[2]), _str(r[3], MAX_DESC),
                    _name(r[4]) if len(r) > 4 else "")
    if kind == Kind.LEAVE:
        _list(r, 2, 2)
        return Leave(sender, _int(r[1], 1, max_seq))
    if kind == Kind.HANDOVER:
        _list(r, 4, 4)
        return Handover(sender, SequencerInfo(_int(r[1], 1, max_seq), _pid(r[2]),
                                              _int(r[3], 1, max_seq)))
    if kind == Kind.ACK:
        _list(r, 5, 5)
        if type(r[4]) is not bool:
            raise DecodeError("bad ack")
        return Ack(sender, _int(r[1], 1, max_seq), _pid(r[2]), _int(r[3], 0, max_seq), r[4])
    if kind == Kind.PREPARE:
        _list(r, 3, 3)
        return Prepare(sender, _int(r[1], 1, max_seq), _int(r[2], 0, max_seq))
    if kind == Kind.PROMISE:
        _list(r, 8, 8)
        log_epoch = _int(r[3], 0, max_seq)
        return Promise(sender, _int(r[1], 1, max_seq), _pid(r[2]), log_epoch,
                       _ballot_pid(log_epoch, r[4]), _int(r[5], 0, max_seq),
                       _int(r[6], 0, max_seq), _entries(r[7], max_seq))
    if kind == Kind.START:
        _list(r, 4, 4)
        return Start(sender, _int(r[1], 1, max_seq), _int(r[2], 0, max_seq),
                     _entries(r[3], max_seq))
    if kind == Kind.DECIDED:
        _list(r, 2, 2)
        return Decided(sender, _entries(r[1], max_seq))
    if kind == Kind.STREAM or kind == Kind.STREAM_NACK:
        return stream_from_wire(kind == Kind.STREAM, r, max_seq)
    if kind == Kind.STREAM_ACK:
        return stream_ack_from_wire(r, max_seq)
    if kind == Kind.ADV:
        _list(r, 1, 1)
        return Adv(sender)
    if kind == Kind.GRPS_INFO:
        _list(r, 2, 2)
        groups = []
        for g in _list(r[1]):
            g = _list(g, 4, MAX_BODY_ELEMENTS)  # after the sixth (names): a later version's
            gid = _str(g[0], MAX_GID)
            if not gid:
                raise DecodeError("empty group id")
            keyed = g[4] if len(g) > 4 else False
            if type(keyed) is not bool:
                raise DecodeError("bad keyed flag")
            groups.append(GrpInfo(gid, _str(g[1], MAX_DESC), _order(g[2]),
                                  _members(g[3], max_seq), keyed,
                                  _names(g[5]) if len(g) > 5 else ()))
        return GrpsInfo(sender, tuple(groups))
    raise DecodeError(f"unknown group message kind {kind}")  # pragma: no cover
