"""Whether m2mc runs its compiled hot path (docs/group.md section 11).

``pip install`` builds :mod:`m2mc._speedups` (C) where a C compiler and Python's
headers are at hand; anywhere else, and whenever the environment variable
``M2MC_PURE`` is set to anything but ``""`` or ``"0"``, every hot loop runs its
pure-Python version, which behaves the same (tests/group/test_speedups.py).
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["NATIVE", "native_module", "pure_forced"]


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
