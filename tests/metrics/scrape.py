"""Scrape a metrics endpoint over HTTP and read it as a user would: parsed with
prometheus_client's own parser, samples looked up by name and labels."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterable

from prometheus_client.parser import text_string_to_metric_families

from m2mc.metrics.catalogue import CATALOGUE, StatsTable


class Scrape:
    def __init__(self, text: str) -> None:
        self.text = text
        self.types: dict[str, str] = {}
        self.samples: list[tuple[str, dict[str, str], float]] = []
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.types[sample.name] = family.type
                self.samples.append((sample.name, dict(sample.labels), float(sample.value)))

    @property
    def names(self) -> set[str]:
        return {name for name, _, _ in self.samples}

    def series(self, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
        return [(lab, value) for n, lab, value in self.samples
                if n == name and all(lab.get(k) == v for k, v in labels.items())]

    def value(self, name: str, **labels: str) -> float:
        """The one sample of ``name`` with these labels (AssertionError if not one)."""
        found = self.series(name, **labels)
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
        return found[0][1]

    def label_values(self, name: str, label: str) -> set[str]:
        return {lab[label] for lab, _ in self.series(name) if label in lab}


def scrape(address: str, timeout: float = 10.0) -> Scrape:
    """GET http://ADDRESS/metrics (blocking: call it off the event loop that serves it)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as response:
        assert response.status == 200
        return Scrape(response.read().decode())


def scrape_until(address: str, condition: Callable[[Scrape], bool], what: str,
                 timeout: float = 30.0) -> Scrape:
    """Scrape again until ``condition`` holds (a generous deadline, no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while True:
        got = scrape(address)
        if condition(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def unexported(got: Scrape, kind: str, tables: Iterable[StatsTable]) -> list[str]:
    """What ``got`` lacks: a metric (with its fixed labels) for every field of ``tables``,
    and every catalogue metric that a process of ``kind`` exports."""
    missing = []
    for table in tables:
        for name in table.fields():
            for route in table.routes(name):
                if not got.series(route.metric, **dict(route.labels)):
                    missing.append(f"{table.cls.__name__}.{name} -> {route.metric}")
    for spec in CATALOGUE.values():
        if kind in spec.where.split("+") and spec.name not in got.names:
            missing.append(spec.name)
    return missing
