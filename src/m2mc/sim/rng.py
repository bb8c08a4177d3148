"""Independent random streams derived from one seed, one per subsystem.

Each stream is seeded from SHA-256 of the run seed and the stream's name, so
adding draws in one subsystem (say, the workload) never shifts the draws of
another (the network). Names in use: ``network``, ``workload``, ``mobility``,
``swarm``, ``clock``, ``chaos:<index>`` for each ``[[chaos]]`` entry and
``node:<id>`` for each node's own generator.
"""

from __future__ import annotations

import hashlib
import random


def derive_seed(seed: int, name: str) -> int:
    digest = hashlib.sha256(f"m2mc-sim/{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:16], "big")


class RngStreams:
    """Named :class:`random.Random` streams of one run; the same name gives the same object."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._streams: dict[str, random.Random] = {}

    def get(self, name: str) -> random.Random:
        found = self._streams.get(name)
        if found is None:
            found = random.Random(derive_seed(self.seed, name))
            self._streams[name] = found
        return found

    def fresh(self, name: str) -> random.Random:
        """A new generator for ``name`` from its start (a restarted node's stream, say)."""
        return random.Random(derive_seed(self.seed, name))
