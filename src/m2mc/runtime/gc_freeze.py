"""Start-up objects taken out of the cyclic garbage collector's full passes.

A full pass of CPython's collector visits every container object it tracks. In a
node, nearly all of them (about 24,000) are made at start-up, imported modules,
classes and functions above all, and live as long as the process; a full pass over
them took 7 to 15 ms of CPU in bench/peers.py's receivers, a few times every 10 s
at 30,000 messages/s (each time the messages in flight build up enough promoted
objects), and every message arriving meanwhile waited. ``gc.freeze()`` moves what
is tracked now into a permanent generation that no pass visits; reference counting
still frees any of them that is dropped, only a *cycle* among them would never be
collected. So it is done once per process, after the first node's start-up, right
after a collection that frees the cycles left so far (docs/decisions.md,
"Start-up objects are frozen out of the collector's full passes").
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_objects", "frozen"]

_frozen = False


def freeze_startup_objects() -> int:
    """Collect, then freeze what the process holds now, once per process; the number
    of objects frozen the first time, 0 later (later calls do nothing: what a later
    node makes stays collectable)."""
    global _frozen
    if _frozen:
        return 0
    _frozen = True
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def frozen() -> bool:
    """Whether this process has frozen its start-up objects (a node did)."""
    return _frozen
