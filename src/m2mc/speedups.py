"""Whether m2mc runs its compiled hot path (docs/group.md section 11), and
:func:`packb`, the one msgpack writer of the group frames and the log's rows.

``pip install`` builds :mod:`m2mc._speedups` (C) where a C compiler and Python's
headers are at hand; anywhere else, and whenever the environment variable
``M2MC_PURE`` is set to anything but ``""`` or ``"0"``, every hot loop runs its
pure-Python version, which behaves the same (tests/group/test_speedups.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType

import msgpack

__all__ = ["NATIVE", "native_module", "packb", "pure_forced"]


def pure_forced() -> bool:
    """Whether ``M2MC_PURE`` asks for the pure-Python path."""
    return os.environ.get("M2MC_PURE", "") not in ("", "0")


def native_module() -> ModuleType | None:
    """The compiled module, or None (not built, or ``M2MC_PURE`` set)."""
    if pure_forced():
        return None
    try:
        from m2mc import _speedups
    except ImportError:
        return None
    return _speedups


NATIVE: ModuleType | None = native_module()
"""The compiled module in use, or None when the pure-Python path runs."""


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
