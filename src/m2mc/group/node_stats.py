"""The counters of a group node: :class:`NodeStats` (everything dropped or
suppressed: bad input is counted, never fatal). Their flat ``name -> int`` views,
with each group's components', are :mod:`m2mc.group.counters`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class NodeStats:
    """Counters of everything dropped or suppressed (bad input is counted, never fatal)."""

    malformed: int = 0  # undecodable group messages
    unknown_group: int = 0  # a group tag we are not in
    wrong_kind: int = 0
    own_echo: int = 0
    duplicates: int = 0
    refused: int = 0
    malformed_records: int = 0
    abandoned: int = 0
    oversized: int = 0
    status_suppressed: int = 0
    refuted: int = 0  # news of our own leave (an earlier incarnation's) answered by a rejoin
    auth_failed: int = 0  # keyed groups: no tag, bad tag, replayed, stale, bad auth header
    sealed_refused: int = 0  # a sealed message for a group (or discovery) we hold no key for
    sender_mismatch: int = 0  # a body naming another sender than the one who sealed it
    rate_limited: int = 0  # control messages over their sender's (or the total) rate
    sent: int = 0
    delivered: int = 0
    extra: dict[str, int] = field(default_factory=dict)

