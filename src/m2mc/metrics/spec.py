"""What the catalogue says of one metric family (:mod:`m2mc.metrics.catalogue`)."""

from __future__ import annotations

from dataclasses import dataclass

from m2mc.kinds import MetricKind


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str  # as scraped: counters end in _total
    kind: MetricKind
    labels: tuple[str, ...]  # beyond "node", which every metric has
    help: str
    alarm: str = ""
    where: str = "node"  # which processes export it: node, member, host, daemon (joined by +)
    combine: str = "sum"  # how samples that share labels (the "(other)" group) combine


def counter(name: str, help_: str, *labels: str, where: str = "node",
            alarm: str = "") -> MetricSpec:
    return MetricSpec(name, MetricKind.COUNTER, labels, help_, alarm, where)


def gauge(name: str, help_: str, *labels: str, where: str = "node", alarm: str = "",
       combine: str = "sum") -> MetricSpec:
    return MetricSpec(name, MetricKind.GAUGE, labels, help_, alarm, where, combine)
