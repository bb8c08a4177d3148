"""The bounds of the group layer's wire format and the checked readers that hold
a decoded msgpack value to them (docs/group.md section 2, "Decoding checks every
type and bound").

Rules: every reader takes a value straight from ``msgpack.unpackb`` and returns
it typed, or raises :class:`~m2mc.errors.DecodeError` (never another exception);
every list, string and integer it accepts is bounded, so a forged message costs
bounded memory. The data records' reader, the receive hot path, stays in
:mod:`m2mc.group.codec` beside the body decoder.
"""

from __future__ import annotations

from typing import Any

from m2mc.errors import DecodeError
from m2mc.group.messages import Digest, Entries, Intervals, MemberEntry
from m2mc.kinds import GROUP_ORDERS, Order
from m2mc.ordering.ids import make_mid

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


def read_list(value: Any, low: int = 0, high: int = MAX_LIST) -> list[Any]:
    if type(value) is not list or not low <= len(value) <= high:
        raise DecodeError("expected a list of the right length")
    return value


def read_pid(value: Any) -> str:
    if type(value) is not str or not value or len(value) > MAX_PID:
        raise DecodeError("bad process id")
    return value


def read_str(value: Any, limit: int) -> str:
    if type(value) is not str or len(value) > limit:
        raise DecodeError("bad string")
    return value


def read_name(value: Any) -> str:
    """A display name: a string of at most MAX_NAME bytes in UTF-8."""
    if type(value) is not str or len(value) > MAX_NAME or len(value.encode()) > MAX_NAME:
        raise DecodeError("bad display name")
    return value


def read_names(raw: Any) -> tuple[tuple[str, str], ...]:
    """A GrpInfo's names, ``{pid: name}``: as sorted pairs, empty names left out."""
    if type(raw) is not dict:
        raise DecodeError("bad member names")
    return tuple(sorted((read_pid(pid), read_name(name)) for pid, name in raw.items()
                        if name != ""))


def read_int(value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value < high:
        raise DecodeError("integer out of range")
    return value


def read_vclock(raw: Any, max_seq: int) -> dict[str, int]:
    if type(raw) is not dict:
        raise DecodeError("bad vector clock")
    return {read_pid(k): read_int(v, 0, max_seq) for k, v in raw.items()}


def read_intervals(raw: Any, max_seq: int) -> Intervals:
    flat = read_list(raw)
    if len(flat) % 2:
        raise DecodeError("odd interval list")
    out: Intervals = []
    for i in range(0, len(flat), 2):
        lo = read_int(flat[i], 1, max_seq)
        hi = read_int(flat[i + 1], lo, max_seq)
        out.append((lo, hi))
    return out


def read_digest(raw: Any, max_seq: int) -> Digest:
    if type(raw) is not dict:
        raise DecodeError("bad digest")
    return {read_pid(pid): read_intervals(ivs, max_seq) for pid, ivs in raw.items()}


def read_members(raw: Any, max_seq: int) -> tuple[MemberEntry, ...]:
    out = []
    for r in read_list(raw):
        r = read_list(r, 3, 3)
        if type(r[2]) is not bool:
            raise DecodeError("bad member entry")
        out.append(MemberEntry(read_pid(r[0]), read_int(r[1], 0, max_seq), r[2]))
    return tuple(out)


def read_entries(raw: Any, max_seq: int) -> Entries:
    out: Entries = []
    append = out.append
    for e in read_list(raw):
        if type(e) is not list:
            raise DecodeError("bad log entry")
        if len(e) == 3:
            append((read_int(e[0], 1, max_seq),
                    make_mid(read_pid(e[1]), read_int(e[2], 1, max_seq))))
        elif len(e) == 4 and type(e[3]) is bool:
            append((read_int(e[0], 1, max_seq),
                    MemberEntry(read_pid(e[1]), read_int(e[2], 0, max_seq), e[3])))
        else:
            raise DecodeError("bad log entry")
    return out


def read_ballot_pid(epoch: int, value: Any) -> str:
    """The process of a ballot: none (``""``) only with epoch 0."""
    if epoch == 0 and value == "":
        return ""
    return read_pid(value)


def read_order(value: Any) -> Order:
    if value not in GROUP_ORDERS:
        raise DecodeError(f"unknown order {value!r}")
    return Order(value)


