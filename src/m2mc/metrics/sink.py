"""Samples gathered at scrape time, turned into prometheus_client metric families.

A :class:`Samples` collects ``(metric, labels) -> value`` for one scrape. Samples
that land on the same labels (the groups past the label bound all share
``group="(other)"``) combine as their :class:`~m2mc.metrics.catalogue.MetricSpec`
says: summed, or the largest (a queue's limit). Every metric must be in the
catalogue, so a name and its labels cannot drift from docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any

from m2mc.kinds import MetricKind
from m2mc.metrics.catalogue import CATALOGUE, StatsTable

if TYPE_CHECKING:
    from prometheus_client.core import Metric

_Key = tuple[str, tuple[str, ...]]


class Samples:
    """One scrape's values; every metric carries ``node``."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._values: dict[_Key, float] = {}

    def add(self, metric: str, value: float, **labels: str) -> None:
        spec = CATALOGUE[metric]  # KeyError: a metric nobody documented
        if set(labels) != set(spec.labels):
            raise ValueError(f"{metric}: labels {sorted(labels)}, expected {list(spec.labels)}")
        key = (metric, (self.node, *(labels[name] for name in spec.labels)))
        old = self._values.get(key)
        if old is None:
            self._values[key] = value
        elif spec.combine == "max":
            self._values[key] = max(old, value)
        else:
            self._values[key] = old + value

    def stats(self, table: StatsTable, stats: Any, *,
              override: Mapping[str, float] | None = None, **labels: str) -> None:
        """Every counter of the dataclass instance ``stats`` along ``table``'s routes
        (``override``: values to use instead of some fields')."""
        assert is_dataclass(stats) and isinstance(stats, table.cls)
        for f in fields(stats):
            value = getattr(stats, f.name)
            if override is not None and f.name in override:
                value = override[f.name]
            for route in table.routes(f.name):
                fixed = dict(route.labels)
                if route.key is not None:
                    counts = {**dict.fromkeys(route.keys, 0), **_as_mapping(value)}
                    for key, count in counts.items():
                        self.add(route.metric, count, **labels, **fixed, **{route.key: key})
                elif isinstance(value, int | float):
                    self.add(route.metric, value, **labels, **fixed)

    def queue(self, queue: str, depth: int, limit: int, group: str = "") -> None:
        """A bounded queue's depth and its bound (``group``: "" for a node-wide one)."""
        self.add("m2mc_queue_depth", depth, queue=queue, group=group)
        self.add("m2mc_queue_limit", limit, queue=queue, group=group)

    def families(self) -> list[Metric]:
        # Imported here: what a process exports can be gathered without the extra.
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        out: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for (metric, values), value in self._values.items():
            family = out.get(metric)
            if family is None:
                spec = CATALOGUE[metric]
                names = ["node", *spec.labels]
                family = out[metric] = (
                    CounterMetricFamily(metric, spec.help, labels=names)
                    if spec.kind == MetricKind.COUNTER else
                    GaugeMetricFamily(metric, spec.help, labels=names))
            family.add_metric(list(values), value)
        return [out[name] for name in CATALOGUE if name in out]


def _as_mapping(value: object) -> Mapping[str, int]:
    return value if isinstance(value, Mapping) else {}
