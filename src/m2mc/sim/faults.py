"""Partitions as drop tables: which directed node pairs lose what share of packets.

A symmetric partition splits nodes into sides (nodes listed in no side form one
more side); packets between sides are dropped. A one-way partition drops
``from -> to`` only. An asymmetric one drops ``from -> to`` with probability
``loss`` and ``to -> from`` with ``reverse_loss``. Several active partitions
combine: a packet survives only if it survives each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from m2mc.kinds import PartitionKind
from m2mc.sim.scenario import PartitionSpec

# domain index -> src node index -> dst node index -> drop probability
CutTable = dict[int, dict[int, dict[int, float]]]


def pair_drops(spec: PartitionSpec, index: Mapping[str, int],
               n_nodes: int) -> Iterable[tuple[int, int, float]]:
    """(src, dst, drop probability) of every directed pair ``spec`` affects."""
    if spec.kind == PartitionKind.SYMMETRIC:
        side = [-1] * n_nodes
        for number, members in enumerate(spec.sides):
            for node in members:
                if node in index:  # a node not there (yet) in a hand-driven run
                    side[index[node]] = number
        for s in range(n_nodes):
            for d in range(n_nodes):
                if s != d and side[s] != side[d]:
                    yield s, d, 1.0
        return
    for a in spec.src:
        for b in spec.dst:
            if a not in index or b not in index:
                continue
            ia, ib = index[a], index[b]
            if ia == ib:
                continue
            if spec.loss > 0:
                yield ia, ib, spec.loss
            if spec.reverse_loss > 0:
                yield ib, ia, spec.reverse_loss


def build_cuts(active: Sequence[PartitionSpec], index: Mapping[str, int], n_nodes: int,
               domains: Mapping[str, int]) -> CutTable:
    table: CutTable = {}
    for spec in active:
        targets = [domains[d] for d in spec.domains] if spec.domains else list(domains.values())
        pairs = list(pair_drops(spec, index, n_nodes))
        for dom in targets:
            per_src = table.setdefault(dom, {})
            for s, d, p in pairs:
                row = per_src.setdefault(s, {})
                row[d] = 1.0 - (1.0 - row.get(d, 0.0)) * (1.0 - p)
    return table
