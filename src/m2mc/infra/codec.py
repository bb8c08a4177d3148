"""Encoding of infrastructure-mode messages, with an integrity checksum (seeds/004 4.5).

Frame: ``b"IM"``, version ``1``, CRC-32 of the body (4 bytes, big-endian), body.
The body is a msgpack array ``[tag, field, ...]`` in the field order of the
dataclass. A frame whose checksum does not match is rejected, so a corrupted
message is never acknowledged and the sender's retry brings a good copy
(seeds/004 4.5: "If it is corrupt no acknowledgment is sent").

:func:`decode` raises :class:`~m2mc.errors.DecodeError` and nothing else on bad
input: wrong magic, checksum, tag, arity or field type. Every integer field is
non-negative.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import msgpack

from m2mc.errors import DecodeError
from m2mc.infra import messages as m
from m2mc.infra.ids import Epoch, MemberId
from m2mc.store.crc import crc32  # zlib-ng's where installed: 64,000 B in a quarter of the time

MAGIC = b"IM\x01"
_HEADER = struct.Struct(">3sI")
HEADER_SIZE = _HEADER.size
MAX_INT = (1 << 63) - 1

Message = m.DownlinkMessage | m.UplinkMessage | m.BackboneMessage

Enc = Callable[[Any], Any]
Dec = Callable[[Any], Any]


# ------------------------------------------------------------------ field codecs
def _dec_int(x: Any) -> int:
    if type(x) is not int or x < 0 or x > MAX_INT:
        raise DecodeError(f"expected a non-negative integer, got {x!r:.40}")
    return x


def _dec_str(x: Any) -> str:
    if type(x) is not str:
        raise DecodeError(f"expected a string, got {type(x).__name__}")
    return x


def _dec_bytes(x: Any) -> bytes:
    if type(x) is not bytes:
        raise DecodeError(f"expected bytes, got {type(x).__name__}")
    return x


def _dec_bool(x: Any) -> bool:
    if type(x) is not bool:
        raise DecodeError(f"expected a boolean, got {type(x).__name__}")
    return x


def _dec_group(x: Any) -> str:
    """A group's name: text of at most MAX_GROUP_NAME bytes ("" where none applies)."""
    if type(x) is not str:
        raise DecodeError(f"expected a group name, got {type(x).__name__}")
    if len(x) > m.MAX_GROUP_NAME and len(x.encode()) > m.MAX_GROUP_NAME:
        raise DecodeError(f"group name of more than {m.MAX_GROUP_NAME} bytes")
    return x


def _dec_float(x: Any) -> float:
    if type(x) is int:
        x = float(x)
    if type(x) is not float or not math.isfinite(x):
        raise DecodeError(f"expected a finite number, got {x!r:.40}")
    return x


def _list(x: Any, n: int | None = None) -> list[Any]:
    if type(x) is not list:
        raise DecodeError(f"expected an array, got {type(x).__name__}")
    if n is not None and len(x) != n:
        raise DecodeError(f"expected an array of {n} fields, got {len(x)}")
    return x


def _enc_mid(x: MemberId) -> list[Any]:
    return [x.node, x.join_id]


def _dec_mid(x: Any) -> MemberId:
    node, join_id = _list(x, 2)
    return MemberId(_dec_str(node), _dec_int(join_id))


def _enc_epoch(x: Epoch) -> list[Any]:
    return [x.round, x.time, x.starter]


def _dec_epoch(x: Any) -> Epoch:
    rnd, t, starter = _list(x, 3)
    return Epoch(_dec_int(rnd), _dec_float(t), _dec_str(starter))


def _optional(enc: Enc, dec: Dec) -> tuple[Enc, Dec]:
    return (lambda x: None if x is None else enc(x)), (lambda x: None if x is None else dec(x))


def _seq(enc: Enc, dec: Dec, limit: int = 1 << 20) -> tuple[Enc, Dec]:
    def d(x: Any) -> tuple[Any, ...]:
        items = _list(x)
        if len(items) > limit:
            raise DecodeError(f"array of {len(items)} items exceeds {limit}")
        return tuple(dec(i) for i in items)

    return (lambda xs: [enc(i) for i in xs]), d


def enc_record(r: m.Record) -> list[Any]:
    return [r.lsn, r.gseq, r.kind, r.mid.node, r.mid.join_id, r.nseq, r.app_seq, r.prememb,
            r.body, r.group, r.gpos]


def dec_record(x: Any) -> m.Record:
    f = _list(x, 11)
    kind = _dec_int(f[2])
    if kind not in m.RECORD_KINDS:
        raise DecodeError(f"unknown record kind {kind}")
    return m.Record(_dec_int(f[0]), _dec_int(f[1]), kind, MemberId(_dec_str(f[3]), _dec_int(f[4])),
                    _dec_int(f[5]), _dec_int(f[6]), _dec_int(f[7]), _dec_bytes(f[8]),
                    _dec_group(f[9]), _dec_int(f[10]))


def _enc_cellinfo(c: m.CellInfo) -> list[Any]:
    return [c.host, c.cell, c.uplink, c.load]


def _dec_cellinfo(x: Any) -> m.CellInfo:
    f = _list(x, 4)
    return m.CellInfo(_dec_str(f[0]), _dec_str(f[1]), _dec_str(f[2]), _dec_int(f[3]))


def _enc_newitem(i: m.NewItem) -> list[Any]:
    return [i.nseq, i.app_seq, i.body, i.group, i.kind]


def _dec_newitem(x: Any) -> m.NewItem:
    f = _list(x, 5)
    kind = _dec_int(f[4])
    if kind not in m.ITEM_KINDS:
        raise DecodeError(f"unknown item kind {kind}")
    return m.NewItem(_dec_int(f[0]), _dec_int(f[1]), _dec_bytes(f[2]), _dec_group(f[3]), kind)


def _enc_row(r: m.Row) -> list[Any]:
    return [_enc_mid(r.mid), r.first, r.last, r.recv, r.member, r.app_seq]


def _dec_row(x: Any) -> m.Row:
    f = _list(x, 6)
    return m.Row(_dec_mid(f[0]), _dec_int(f[1]), _dec_int(f[2]), _dec_int(f[3]), _dec_bool(f[4]),
                 _dec_int(f[5]))


def _enc_grouprow(g: m.GroupRow) -> list[Any]:
    return [g.name, g.count, [_enc_mid(x) for x in g.members]]


def _dec_grouprow(x: Any) -> m.GroupRow:
    f = _list(x, 3)
    return m.GroupRow(_dec_group(f[0]), _dec_int(f[1]), MIDS[1](f[2]))


def _enc_pair(p: tuple[MemberId, int]) -> list[Any]:
    return [_enc_mid(p[0]), p[1]]


def _dec_pair(x: Any) -> tuple[MemberId, int]:
    f = _list(x, 2)
    return _dec_mid(f[0]), _dec_int(f[1])


_ident: Enc = lambda x: x  # noqa: E731
INT = (_ident, _dec_int)
STR = (_ident, _dec_str)
BOOL = (_ident, _dec_bool)
MID = (_enc_mid, _dec_mid)
OPT_MID = _optional(_enc_mid, _dec_mid)
EPOCH = (_enc_epoch, _dec_epoch)
OPT_EPOCH = _optional(_enc_epoch, _dec_epoch)
RECORDS = _seq(enc_record, dec_record)
CELL = (_enc_cellinfo, _dec_cellinfo)
CELLS = _seq(_enc_cellinfo, _dec_cellinfo, 4096)
MIDS = _seq(_enc_mid, _dec_mid)
ITEMS = _seq(_enc_newitem, _dec_newitem)
ROWS = _seq(_enc_row, _dec_row)
PAIRS = _seq(_enc_pair, _dec_pair)


HOSTS = _seq(_ident, _dec_str, 4096)
GROUPS = _seq(_ident, _dec_group, 4096)  # names of groups
NAMES = _seq(_ident, _dec_str, 4096)  # names of computers
GROUP_ROWS = _seq(_enc_grouprow, _dec_grouprow, 1 << 16)


def _enc_snapshot(s: m.Snapshot) -> list[Any]:
    return [s.lsn, s.gseq, s.last_app_gseq, ROWS[0](s.rows), MIDS[0](s.mcache),
            HOSTS[0](s.retired), s.config_lsn, s.sequence, GROUP_ROWS[0](s.groups)]


def _dec_snapshot(x: Any) -> m.Snapshot:
    f = _list(x, 9)
    return m.Snapshot(_dec_int(f[0]), _dec_int(f[1]), _dec_int(f[2]), ROWS[1](f[3]),
                      MIDS[1](f[4]), HOSTS[1](f[5]), _dec_int(f[6]), _dec_int(f[7]),
                      GROUP_ROWS[1](f[8]))


OPT_SNAPSHOT = _optional(_enc_snapshot, _dec_snapshot)

# Member requests travel inside Forward: encoded as a nested [tag, fields...].
REQUEST = (lambda x: _body(x), lambda x: _request(x))

# tag -> (class, field codecs in dataclass field order)
_SCHEMAS: dict[int, tuple[type, tuple[tuple[Enc, Dec], ...]]] = {
    # cell downlink
    1: (m.Beacon, (STR, INT, STR, STR, CELLS, INT)),
    2: (m.Normals, (STR, RECORDS)),
    3: (m.Transfer, (STR, MID, RECORDS)),
    4: (m.Ack, (STR, STR, INT)),
    5: (m.Move, (STR, STR, CELL)),
    6: (m.NotMember, (STR, MID)),
    7: (m.HistoryReply, (STR, MID, INT, INT, INT, INT, RECORDS, NAMES)),
    # cell uplink
    10: (m.Hello, (STR, STR, OPT_MID, INT, BOOL)),
    11: (m.JoinReq, (STR, STR, INT, MID, GROUPS)),
    12: (m.NewReq, (STR, STR, INT, MID, ITEMS)),
    13: (m.LeaveReq, (STR, STR, INT, MID)),
    14: (m.LeaveOkReq, (STR, STR, INT, MID)),
    15: (m.NackReq, (STR, STR, INT, MID, INT, INT)),
    16: (m.HistoryReq, (STR, STR, MID, INT, GROUPS, INT, INT, BOOL)),
    # backbone
    20: (m.Status, (STR, INT, STR, INT, STR, STR, INT, MIDS, STR, EPOCH, EPOCH, INT, INT,
                    OPT_EPOCH)),
    21: (m.ElectStart, (EPOCH,)),
    22: (m.Vote, (EPOCH, STR, STR)),
    23: (m.Takeover, (EPOCH, STR, INT, INT)),
    24: (m.TakeoverReject, (EPOCH, STR, EPOCH)),
    25: (m.StateReply, (EPOCH, STR, EPOCH, INT, INT, OPT_SNAPSHOT, RECORDS, RECORDS)),
    26: (m.Forward, (STR, INT, REQUEST)),
    27: (m.FwdAck, (EPOCH, INT, INT)),
    28: (m.StabInfo, (STR, PAIRS)),
    29: (m.Subscribe, (STR,)),
    30: (m.Unsubscribe, (STR,)),
    31: (m.Fetch, (STR, INT, INT)),
    32: (m.Fetched, (RECORDS,)),
    33: (m.Replicate, (EPOCH, INT, RECORDS)),
    34: (m.Sync, (EPOCH, INT, INT, OPT_SNAPSHOT, RECORDS)),
    35: (m.Accepted, (EPOCH, STR, INT, BOOL)),
    36: (m.Commit, (EPOCH, INT, INT, HOSTS)),
    37: (m.Reroute, (EPOCH, INT, CELL)),
    38: (m.AdminRequest, (STR, INT, INT, STR)),
    39: (m.Reconfig, (STR, STR, INT, INT, STR)),
    40: (m.AdminResult, (STR, STR, INT, STR, STR, INT)),
    41: (m.RetiredNotice, (STR, STR, INT)),
    42: (m.Recover, (STR, INT)),
    43: (m.RecoverReply, (STR, INT, EPOCH, BOOL, HOSTS, INT)),
    44: (m.HistoryAsk, (STR, STR, MID, INT, GROUPS, INT, INT, BOOL)),
    45: (m.HistoryAnswer, (STR, STR, MID, INT, INT, INT, INT, RECORDS, NAMES)),
}
_TAGS: dict[type, int] = {cls: tag for tag, (cls, _) in _SCHEMAS.items()}
_REQUEST_CLASSES = (m.JoinReq, m.NewReq, m.LeaveReq, m.LeaveOkReq)


def _body(msg: Any) -> list[Any]:
    tag = _TAGS[type(msg)]
    codecs = _SCHEMAS[tag][1]
    values = [getattr(msg, name) for name in msg.__slots__]
    return [tag, *[enc(v) for (enc, _), v in zip(codecs, values, strict=True)]]


def _message(x: Any) -> Any:
    items = _list(x)
    if not items:
        raise DecodeError("empty message")
    tag = items[0]
    schema = _SCHEMAS.get(tag) if type(tag) is int else None
    if schema is None:
        raise DecodeError(f"unknown message tag {tag!r:.20}")
    cls, codecs = schema
    if len(items) != len(codecs) + 1:
        raise DecodeError(f"{cls.__name__}: expected {len(codecs)} fields, got {len(items) - 1}")
    return cls(*[dec(v) for (_, dec), v in zip(codecs, items[1:], strict=True)])


def _request(x: Any) -> m.MemberRequest:
    msg = _message(x)
    if not isinstance(msg, _REQUEST_CLASSES):
        raise DecodeError(f"not a member request: {type(msg).__name__}")
    return msg


def encode_body(msg: Message) -> bytes:
    """The msgpack body of ``msg`` (what a frame checksums, or a sealed frame seals)."""
    body: bytes = msgpack.packb(_body(msg), use_bin_type=True)
    return body


def encode(msg: Message) -> bytes:
    """One frame holding ``msg``."""
    body = encode_body(msg)
    return _HEADER.pack(MAGIC, crc32(body)) + body


def decode(frame: bytes) -> Message:
    """The message in ``frame``; :class:`DecodeError` on any fault."""
    if len(frame) < HEADER_SIZE:
        raise DecodeError(f"frame of {len(frame)} bytes is shorter than its header")
    magic, crc = _HEADER.unpack_from(frame)
    if magic != MAGIC:
        raise DecodeError("not an infrastructure-mode frame (bad magic)")
    body = frame[HEADER_SIZE:]
    if crc32(body) != crc:
        raise DecodeError("checksum mismatch: corrupted frame")
    return decode_body(body)


def decode_body(body: bytes) -> Message:
    """The message in a msgpack body (no header); :class:`DecodeError` on any fault."""
    try:
        obj = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise DecodeError(f"undecodable body: {type(exc).__name__}") from None
    msg: Message = _message(obj)
    return msg


def record_size(r: m.Record) -> int:
    """Rough encoded size of a record, for batching under a datagram bound."""
    return 28 + len(r.mid.node) + len(r.body) + len(r.group)


# ------------------------------------------------------------------ stored forms
# A host's durable log (m2mc.infra_runtime.host_store) keeps records, epochs and snapshots
# as the msgpack of their wire fields, and reads them back through the same checks
# as the network's: a damaged file is a DecodeError, never a wrong value.
def _unpack(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise DecodeError(f"undecodable stored value: {type(exc).__name__}") from None


def pack_record(r: m.Record) -> bytes:
    out: bytes = msgpack.packb(enc_record(r), use_bin_type=True)
    return out


def unpack_record(data: bytes) -> m.Record:
    return dec_record(_unpack(data))


def pack_epoch(e: Epoch) -> bytes:
    out: bytes = msgpack.packb(_enc_epoch(e), use_bin_type=True)
    return out


def unpack_epoch(data: bytes) -> Epoch:
    return _dec_epoch(_unpack(data))


def pack_snapshot(s: m.Snapshot) -> bytes:
    out: bytes = msgpack.packb(_enc_snapshot(s), use_bin_type=True)
    return out


def unpack_snapshot(data: bytes) -> m.Snapshot:
    return _dec_snapshot(_unpack(data))
