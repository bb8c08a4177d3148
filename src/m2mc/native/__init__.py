"""m2mc's compiled code, and the one place that chooses between it and the Python.

``_speedups.c`` is built by ``pip install`` as ``m2mc.native._speedups`` where a C
compiler and Python's headers are at hand; :mod:`m2mc.native.loader` loads it unless
``M2MC_PURE`` is set or the build is stale (:data:`STATUS` says which, and why).
Every loop it compiles has a pure-Python version that behaves the same
(tests/native), and each name below is bound here, once, to the one in use:

* :func:`packb`, :func:`fragment_list`, :func:`consecutive` and the fast builders
  (:func:`fast_constructor`, from :mod:`m2mc.native.fastobj`) are ready to call:
  their users import them from here;
* the loops over the message classes need the classes, which live in higher layers:
  their owners hand them over once, with :func:`bind_message_classes`
  (m2mc.ordering.ids), :func:`bind_records`, :func:`bind_record_size`
  (m2mc.group.codec) and :func:`bind_group_message` (m2mc.api.message), and take back
  what to call. :data:`pack_records`, :data:`stream_heads` and :data:`put_records`
  (None in pure Python) leave every message to the Python (None back, or a stop at
  it) until :func:`bind_message_classes` has bound classes of the expected layout.

What reads network bytes in C: only :func:`consecutive` (8-byte M2MP headers at
fixed offsets inside the block). The record decoder takes what msgpack decoded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from m2mc.native.fastobj import BUILDERS, Builder, fast_constructor, tuple_constructor
from m2mc.native.loader import NATIVE, STATUS, NativeStatus, pure_forced
from m2mc.native.packets import consecutive_py, fragment_list_py

__all__ = ["BUILDERS", "NATIVE", "STATUS", "Builder", "NativeStatus", "bind_group_message",
           "bind_message_classes", "bind_record_size", "bind_records", "classes_bound",
           "consecutive", "consecutive_py", "fast_constructor", "fragment_list",
           "fragment_list_py", "pack_records", "packb", "pure_forced", "put_records",
           "stream_heads", "tuple_constructor"]


# ---------------------------------------------------------------- msgpack
_PACK: Callable[[object], bytes | None] | None = None if NATIVE is None else NATIVE.pack


def packb(obj: object) -> bytes:
    """``msgpack.packb(obj, use_bin_type=True)``: written in C (the same bytes) where
    it writes every type in ``obj``, else by msgpack (the group frames and the log's
    chunk rows)."""
    if _PACK is not None:
        packed = _PACK(obj)
        if packed is not None:
            return packed
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


# ---------------------------------------------------------------- M2MP
consecutive: Callable[[bytes, int, int, int], int] = (
    consecutive_py if NATIVE is None else NATIVE.consecutive)
"""m2mc.wire.segments.consecutive: :func:`consecutive_py`, in C where it is built."""

_FRAGMENTS: Callable[[int, bytes], list[bytes] | None] | None = (
    None if NATIVE is None else NATIVE.fragments)


def fragment_list(message_id: int, payload: bytes) -> list[bytes]:
    """The encoded packets of one message, in fragment order (m2mc.wire.packet): in C
    where it is built (a sender's CPU per 64 KiB message: 46 to 11 µs), else
    :func:`fragment_list_py`; the same packets, and the Python's error for what the
    C refuses (tests/native/test_twins.py)."""
    if _FRAGMENTS is not None:
        packets = _FRAGMENTS(message_id, payload)
        if packets is not None:
            return packets
    return fragment_list_py(message_id, payload)


# ---------------------------------------------------------------- the message classes
_bound = False


def classes_bound() -> bool:
    """Whether the compiled loops over messages are in use (loaded, and the classes
    bound by :func:`bind_message_classes` are laid out as they expect)."""
    return _bound


def bind_message_classes(mid_type: type[Any], message_type: type[Any], root: object) -> bool:
    """Hand the compiled loops MessageId, Message and ROOT (m2mc.ordering.ids, once):
    whether they take them (False in pure Python, or for classes laid out otherwise
    than :mod:`m2mc.native.layout` says, which then keep their Python loops). The
    first MessageId class taken gets its hash and its ``==``/``!=`` between two
    MessageIds in C, with the same answers as the dataclass's (every table of the
    ordering is keyed by MessageId; tests/native/test_mid_hash.py)."""
    global _bound
    if NATIVE is None:
        return False
    try:
        NATIVE.setup_classes(mid_type, message_type, root)
    except TypeError:  # pragma: no cover - a layout the C does not build
        return False
    _bound = True
    return True


pack_records: Callable[[str, list[Any]], bytes | None] | None = (
    None if NATIVE is None else NATIVE.pack_records)
"""A Data or Repair frame's msgpack body, written in C straight from its Messages (None
back: the caller's packb writes it). None: pure Python."""

stream_heads: Callable[[list[Any], bytes], list[Any] | None] | None = (
    None if NATIVE is None else NATIVE.stream_heads)
"""The delivered messages whose payload starts with the marker, in C (None back: the
caller's listcomp answers). None: pure Python."""

put_records: Callable[..., tuple[int, int, bool]] | None = (
    None if NATIVE is None else NATIVE.put_records)
"""The log's put loop in C (m2mc.store.sqlite), up to the first message it leaves to
the Python. None: pure Python."""


def bind_records(python: Callable[[Any, int], list[Any]], decode_error: type[Exception],
                 read_vclock: Callable[[Any, int], dict[str, int]], max_pid: int,
                 max_list: int) -> Callable[[Any, int], list[Any]]:
    """The data-record decoder to use (m2mc.group.codec): in C, raising
    ``decode_error`` with the bounds given and reading vector clocks with
    ``read_vclock``, where the classes are bound; else ``python``."""
    if NATIVE is None or not _bound:
        return python
    NATIVE.setup_records(decode_error, read_vclock, max_pid, max_list)
    records: Callable[[Any, int], list[Any]] = NATIVE.records
    return records


def bind_record_size(python: Callable[[Any], int]) -> Callable[[Any], int]:
    """A record's encoded size (m2mc.group.codec): in C, leaving to ``python`` what is
    not a plain Message, where the classes are bound; else ``python``."""
    if NATIVE is None or not _bound:
        return python
    NATIVE.setup_record_size(python)
    size: Callable[[Any], int] = NATIVE.record_size
    return size


def bind_group_message(group_message: type[Any]
                       ) -> Callable[[Any, int, str, list[Any]], int] | None:
    """The inbox's take loop in C for this GroupMessage class (m2mc.api.message), or
    None: pure Python."""
    if NATIVE is None or not _bound:
        return None
    try:
        NATIVE.setup_group_message(group_message)
    except TypeError:  # pragma: no cover - a layout the C does not build
        return None
    take: Callable[[Any, int, str, list[Any]], int] = NATIVE.take_messages
    return take

