"""Identities of infrastructure mode.

* :class:`MemberId` is the seed's member identifier ``(M, join-id)`` (seeds/001
  2.3): the computer's identifier and a join-id it never used before, so every
  membership of the same computer has a different identity.
* :class:`Epoch` names one election (seeds/004 5.1: "the starter of an election
  sends his time with the start command ... together with its process ID") and,
  once won, the reign of the master it elected. Epochs are totally ordered: the
  round first (one more than any round the starter has seen), then the starter's
  time, then the starter's ID. A starter's time is never compared with another
  host's clock; it only breaks ties between rounds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class MemberId:
    """``(M, join-id)``: ``node`` is the computer, ``join_id`` a fresh 32-bit pattern."""

    node: str
    join_id: int

    def __str__(self) -> str:
        return f"{self.node}#{self.join_id:08x}"


@dataclass(frozen=True, slots=True, order=True)
class Epoch:
    """An election (and the reign of the master it elected), totally ordered."""

    round: int
    time: float
    starter: str

    def __str__(self) -> str:
        return f"{self.round}/{self.starter}@{self.time:.6f}"


NO_EPOCH = Epoch(0, 0.0, "")
"""Before any election: lower than every real epoch."""
