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

The collector's youngest generation is also collected less often: CPython does it
every 700 new container objects, and a receiver makes several per message (its
identity, the message, the one handed to the application), so at 100,000
messages/s that was a pass every 2 ms. :func:`raise_young_threshold` raises the
threshold (``NodeConfig.gc_threshold``, 20,000), never lowers one an application
set higher (docs/decisions.md, "The collector's youngest generation is collected
every 20,000 objects").
"""

from __future__ import annotations

import gc
import logging

__all__ = ["freeze_startup_objects", "frozen", "raise_young_threshold", "tune_collector"]

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


def raise_young_threshold(threshold: int) -> int | None:
    """Collect the youngest generation every ``threshold`` new objects rather than
    fewer; the threshold it had if raised, None if it was already that high (the
    older generations' thresholds are kept)."""
    young, middle, old = gc.get_threshold()
    if young == 0 or young >= threshold:  # (0: the application turned collection off)
        return None
    gc.set_threshold(threshold, middle, old)
    return young


def tune_collector(freeze: bool, threshold: int,
                   log: logging.Logger | logging.LoggerAdapter[logging.Logger]) -> None:
    """What a node does to the collector once it has started (``NodeConfig.freeze_gc``
    and ``gc_threshold``), said on ``log`` at debug level."""
    if freeze and (count := freeze_startup_objects()):
        log.debug("%d start-up objects frozen out of the collector's full passes "
                  "(freeze_gc)", count)
    if threshold and (before := raise_young_threshold(threshold)) is not None:
        log.debug("youngest generation collected every %d objects, was %d (gc_threshold)",
                  threshold, before)
