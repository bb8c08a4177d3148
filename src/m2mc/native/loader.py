"""Finding the compiled module, ``m2mc.native._speedups``, and deciding whether to use it.

It is used when all of these hold, else every loop runs its pure-Python version:

* ``M2MC_PURE`` is unset, empty or ``"0"``;
* it was built (``pip install`` builds it where a C compiler and Python's headers are
  at hand; ``setup.py`` marks it optional);
* it was built from the ``_speedups.c`` of this source: its ``ABI`` and
  ``LAYOUT_HASH`` equal :mod:`m2mc.native.layout`'s. A stale build (an older C, an
  older record or packet layout) is left alone, with a warning on the ``m2mc.native``
  logger (printed on stderr where logging is not set up), and :data:`STATUS` says
  why (``stale`` is true).

``M2MC_NATIVE_PATH`` names a build elsewhere to load instead of the installed one (the
sanitizer build of ``make native-check``, a stale build in tests/native); the same
checks apply.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
from dataclasses import dataclass
from types import ModuleType

from m2mc.native import layout

__all__ = ["NATIVE", "STATUS", "NativeStatus", "load", "pure_forced"]

MODULE = "m2mc.native._speedups"
log = logging.getLogger("m2mc.native")


@dataclass(frozen=True, slots=True)
class NativeStatus:
    """Whether the compiled module is in use, and if not, why."""

    loaded: bool
    reason: str = ""  # why not ("" when loaded)
    stale: bool = False  # a build was found, made from another _speedups.c


def pure_forced() -> bool:
    """Whether ``M2MC_PURE`` asks for the pure-Python path."""
    return os.environ.get("M2MC_PURE", "") not in ("", "0")


def _import(path: str) -> ModuleType:
    if not path:
        return importlib.import_module(MODULE)
    loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
    spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    if spec is None:  # pragma: no cover - an extension's file always has a spec
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def staleness(module: ModuleType) -> str:
    """Why ``module`` was not built from this source's C ("" if it was)."""
    abi = getattr(module, "ABI", None)
    if abi != layout.ABI:
        return f"built for ABI {abi}, this m2mc is ABI {layout.ABI}"
    built = getattr(module, "LAYOUT", "?")
    if getattr(module, "LAYOUT_HASH", None) != layout.LAYOUT_HASH:
        return f"built for the layout {built!r}, this m2mc has {layout.LAYOUT!r}"
    return ""


def load() -> tuple[ModuleType | None, NativeStatus]:
    """The compiled module to use (or None) and why."""
    if pure_forced():
        return None, NativeStatus(False, "M2MC_PURE is set")
    path = os.environ.get("M2MC_NATIVE_PATH", "")
    try:
        module = _import(path)
    except ImportError as exc:
        return None, NativeStatus(False, f"{MODULE} is not built ({exc})")
    stale = staleness(module)
    if stale:
        where = getattr(module, "__file__", MODULE)
        log.warning("m2mc runs its pure-Python loops: the compiled %s is stale (%s); "
                    "rebuild it with `pip install -e .` or `make .venv/.installed-stamp`",
                    where, stale)
        return None, NativeStatus(False, f"stale build: {stale}", stale=True)
    return module, NativeStatus(True)


NATIVE, STATUS = load()
"""The compiled module in use (None: pure Python), and why."""
