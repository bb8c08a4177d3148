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
opened by :mod:`m2mc.security.groupwire`, never by this module
(docs/security.md). :func:`split_frame` refuses it.

The first 11 bytes (magic, version, group tag) are what a process registers as
its M2MP message filter for each group it has joined (seeds/002 2.3), so the
M2MP layer drops other groups' traffic before it is reassembled, and a future
version can never be mistaken for this one. Flags sit after the filter prefix
so an authenticated message still matches the group's filter.

Decoders raise :class:`~m2mc.errors.DecodeError` and nothing else; every list,
string and integer is bounded, so a forged message costs bounded memory.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NoReturn

import msgpack

from m2mc.errors import DecodeError
from m2mc.fastobj import fast_constructor
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.ordering.ids import make_message, make_mid

MAGIC = b"MC"
VERSION = 1
HEADER = struct.Struct(">2sB8sBB")
HEADER_SIZE = HEADER.size  # 13
FILTER_SIZE = 11  # magic + version + group tag
DISCOVERY_TAG = bytes(8)
FLAG_AUTH = 0x01

MAX_PID = 64
MAX_NAME = 128  # UTF-8 bytes of a process's display name (32 characters of any script)
MAX_GID = 128
MAX_DESC = 1024
MAX_LIST = 100_000  # any msgpack array in a body
# Elements of a body (and of a GRPS_INFO group entry). JOIN, STATUS and GRPS_INFO
# entries may carry more elements than this version knows (a later version's, added
# at the end): they are ignored, so such an addition stays compatible (docs/group.md).
MAX_BODY_ELEMENTS = 16
MAX_SEQ = 1 << 40

Intervals = list[tuple[int, int]]
Digest = dict[str, Intervals]


class Kind(IntEnum):
    DATA = 1
    REPAIR = 2
    ORDER = 3
    STATUS = 4
    NACK = 5
    SYNC_REQ = 6
    SYNC_RESP = 7
    JOIN = 8
    LEAVE = 9
    HANDOVER = 10
    ACK = 11
    PREPARE = 12
    PROMISE = 13
    START = 14
    DECIDED = 15
    GONE = 16
    ADV = 20
    GRPS_INFO = 21


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


# ---------------------------------------------------------------- message types
@dataclass(frozen=True, slots=True)
class MemberEntry:
    """One process in a group's membership: ``version`` increases on every join
    and leave of that process, so the newest word about it wins a merge."""

    pid: str
    version: int
    joined: bool


@dataclass(frozen=True, slots=True)
class GrpInfo:
    """``<gid, desc, cMemList, lMemList>`` (seeds/000 V.A) plus the group's ordering,
    whether it is keyed (authenticated: joining it takes the group's key) and the
    display names of its current members (``(pid, name)`` pairs sorted by pid; only
    members with a name; never for a keyed group: those travel sealed only).

    On the wire ``keyed`` is a fifth element and ``names`` a sixth (a map pid ->
    name), each written only when needed (``keyed`` as ``false`` before names), so
    the entries of open unnamed groups stay as they were and older entries decode
    as open and unnamed."""

    gid: str
    desc: str
    order: str
    members: tuple[MemberEntry, ...]
    keyed: bool = False
    names: tuple[tuple[str, str], ...] = ()

    def name_of(self, pid: str) -> str:
        """The display name of member ``pid`` (``""``: none known)."""
        for who, name in self.names:
            if who == pid:
                return name
        return ""


@dataclass(frozen=True, slots=True)
class SequencerInfo:
    """A HANDOVER: the sequencer of ballot ``(epoch, sender)`` asks ``pid`` to take
    over; ``next_gseq`` is the position after its log."""

    epoch: int
    pid: str
    next_gseq: int


# An entry of the total-order sequencing log (docs/group.md, "Total order"): a data
# message's identity, or a membership record (a process enters or leaves the
# configuration whose majorities commit the log).
LogEntry = MessageId | MemberEntry
Entries = list[tuple[int, LogEntry]]  # (position = gseq, entry)


@dataclass(frozen=True, slots=True)
class LogState:
    """In a STATUS: the sender's promised ballot ``(epoch, leader)``, the ballot its
    log was last synced to ``(log_epoch, log_leader)`` (``(0, "")``: none) and how
    far its log goes (``high``)."""

    epoch: int
    leader: str
    log_epoch: int
    log_leader: str
    high: int


@dataclass(frozen=True, slots=True)
class Data:
    sender: str
    records: list[Message]


@dataclass(frozen=True, slots=True)
class Repair:
    sender: str
    records: list[Message]


@dataclass(frozen=True, slots=True)
class Order:
    """The sequencer of ballot ``(epoch, sender)`` proposes ``stamps``; every
    position up to ``commit`` is committed (the stamps there included)."""

    sender: str
    epoch: int
    stamps: Entries
    commit: int = 0


@dataclass(frozen=True, slots=True)
class Status:
    sender: str
    own_hw: int
    summary: dict[str, int]  # sender pid -> highest seqno known
    members: tuple[MemberEntry, ...]
    sequencer: LogState | None  # total order only
    max_gseq: int  # total order: the highest position the sender knows committed
    name: str = ""  # the sender's display name (a seventh element, only when set)


@dataclass(frozen=True, slots=True)
class Nack:
    sender: str
    ranges: Digest  # pid -> intervals of missing seqnos
    gseqs: Intervals  # total order: missing global sequence numbers


@dataclass(frozen=True, slots=True)
class SyncReq:
    sender: str
    sync_seqno: int
    digest: Digest  # what the requester holds: intervals per sender


@dataclass(frozen=True, slots=True)
class SyncResp:
    sender: str
    requester: str
    sync_seqno: int
    records: list[Message]
    remaining: int  # messages this responder still has to send after this one


@dataclass(frozen=True, slots=True)
class Join:
    sender: str
    version: int
    order: str
    desc: str
    name: str = ""  # the joiner's display name (a fifth element, only when set)


@dataclass(frozen=True, slots=True)
class Leave:
    sender: str
    version: int


@dataclass(frozen=True, slots=True)
class Handover:
    sender: str
    sequencer: SequencerInfo


@dataclass(frozen=True, slots=True)
class Ack:
    """The sender holds the log of ballot ``(epoch, leader)`` up to ``high``;
    ``synced`` False: it has not got that ballot's log yet (send it a START)."""

    sender: str
    epoch: int
    leader: str
    high: int
    synced: bool = True


@dataclass(frozen=True, slots=True)
class Prepare:
    """A candidate asks for promises for ballot ``(epoch, sender)``; it knows every
    position up to ``commit`` committed."""

    sender: str
    epoch: int
    commit: int


@dataclass(frozen=True, slots=True)
class Promise:
    """The answer to a Prepare of ``(epoch, candidate)``: the sender's log (synced to
    ``(log_epoch, log_leader)``, committed up to ``commit``, held up to ``high``) and
    its entries after ``max(commit, the candidate's commit)``."""

    sender: str
    epoch: int
    candidate: str
    log_epoch: int
    log_leader: str
    commit: int
    high: int
    entries: Entries


@dataclass(frozen=True, slots=True)
class Start:
    """The sequencer of ballot ``(epoch, sender)``: its log after ``base`` (every
    position up to ``base`` is committed)."""

    sender: str
    epoch: int
    base: int
    entries: Entries


@dataclass(frozen=True, slots=True)
class Decided:
    """Committed log entries (an answer to a NACK of positions)."""

    sender: str
    entries: Entries


@dataclass(frozen=True, slots=True)
class Gone:
    """The sender cannot serve these any more: it delivered them but its log evicted
    (or it skipped) them (docs/group.md section 8). ``ranges``: seqnos per sender;
    ``gseqs``: total-order positions; ``stubs`` (``ids`` retention mode): some of
    those messages as identity, parent, position and clock, payload empty."""

    sender: str
    ranges: Digest
    gseqs: Intervals
    stubs: list[Message]


@dataclass(frozen=True, slots=True)
class Adv:
    sender: str


@dataclass(frozen=True, slots=True)
class GrpsInfo:
    sender: str
    groups: tuple[GrpInfo, ...]


Body = (Data | Repair | Order | Status | Nack | SyncReq | SyncResp | Join | Leave | Handover
        | Ack | Prepare | Promise | Start | Decided | Gone | Adv | GrpsInfo)

_KIND_OF: dict[type, Kind] = {
    Data: Kind.DATA, Repair: Kind.REPAIR, Order: Kind.ORDER, Status: Kind.STATUS,
    Nack: Kind.NACK, SyncReq: Kind.SYNC_REQ, SyncResp: Kind.SYNC_RESP, Join: Kind.JOIN,
    Leave: Kind.LEAVE, Handover: Kind.HANDOVER, Ack: Kind.ACK, Prepare: Kind.PREPARE,
    Promise: Kind.PROMISE, Start: Kind.START, Decided: Kind.DECIDED, Gone: Kind.GONE,
    Adv: Kind.ADV, GrpsInfo: Kind.GRPS_INFO,
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
    return HEADER.pack(MAGIC, VERSION, tag, kind, 0) + _pack(_to_wire(body))


def _pack(obj: object) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


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


def record_size(m: Message) -> int:
    """A record's encoded size (exact for ASCII process ids; for batching, where
    an error only makes one batch span two packets)."""
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


def _list(value: Any, low: int = 0, high: int = MAX_LIST) -> list[Any]:
    if type(value) is not list or not low <= len(value) <= high:
        raise DecodeError("expected a list of the right length")
    return value


def _pid(value: Any) -> str:
    if type(value) is not str or not value or len(value) > MAX_PID:
        raise DecodeError("bad process id")
    return value


def _str(value: Any, limit: int) -> str:
    if type(value) is not str or len(value) > limit:
        raise DecodeError("bad string")
    return value


def _name(value: Any) -> str:
    """A display name: a string of at most MAX_NAME bytes in UTF-8."""
    if type(value) is not str or len(value) > MAX_NAME or len(value.encode()) > MAX_NAME:
        raise DecodeError("bad display name")
    return value


def _names(raw: Any) -> tuple[tuple[str, str], ...]:
    """A GrpInfo's names, ``{pid: name}``: as sorted pairs, empty names left out."""
    if type(raw) is not dict:
        raise DecodeError("bad member names")
    return tuple(sorted((_pid(pid), _name(name)) for pid, name in raw.items() if name != ""))


def _int(value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value < high:
        raise DecodeError("integer out of range")
    return value


def _records(raw: Any, max_seq: int) -> list[Message]:
    """The hot path of every receiver: checks and builds each record as cheaply as
    Python allows (objects built by m2mc.fastobj's constructors; a parent that is the
    previous record of the batch reuses that record's identity object)."""
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


def _vclock(raw: Any, max_seq: int) -> dict[str, int]:
    if type(raw) is not dict:
        raise DecodeError("bad vector clock")
    return {_pid(k): _int(v, 0, max_seq) for k, v in raw.items()}


def _intervals(raw: Any, max_seq: int) -> Intervals:
    flat = _list(raw)
    if len(flat) % 2:
        raise DecodeError("odd interval list")
    out: Intervals = []
    for i in range(0, len(flat), 2):
        lo = _int(flat[i], 1, max_seq)
        hi = _int(flat[i + 1], lo, max_seq)
        out.append((lo, hi))
    return out


def _digest(raw: Any, max_seq: int) -> Digest:
    if type(raw) is not dict:
        raise DecodeError("bad digest")
    return {_pid(pid): _intervals(ivs, max_seq) for pid, ivs in raw.items()}


def _members(raw: Any, max_seq: int) -> tuple[MemberEntry, ...]:
    out = []
    for r in _list(raw):
        r = _list(r, 3, 3)
        if type(r[2]) is not bool:
            raise DecodeError("bad member entry")
        out.append(MemberEntry(_pid(r[0]), _int(r[1], 0, max_seq), r[2]))
    return tuple(out)


def _entries(raw: Any, max_seq: int) -> Entries:
    out: Entries = []
    append = out.append
    for e in _list(raw):
        if type(e) is not list:
            raise DecodeError("bad log entry")
        if len(e) == 3:
            append((_int(e[0], 1, max_seq), MessageId(_pid(e[1]), _int(e[2], 1, max_seq))))
        elif len(e) == 4 and type(e[3]) is bool:
            append((_int(e[0], 1, max_seq), MemberEntry(_pid(e[1]), _int(e[2], 0, max_seq),
                                                        e[3])))
        else:
            raise DecodeError("bad log entry")
    return out


def _ballot_pid(epoch: int, value: Any) -> str:
    """The process of a ballot: none (``""``) only with epoch 0."""
    if epoch == 0 and value == "":
        return ""
    return _pid(value)


def _order(value: Any) -> str:
    from m2mc.group.config import ORDERS

    if value not in ORDERS:
        raise DecodeError(f"unknown order {value!r}")
    return str(value)


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
