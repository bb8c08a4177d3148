"""Pipeline test fixtures: one local SparkSession for the whole session, and a trace builder.

Spark tests are marked ``@pytest.mark.spark``. The session is local[2] with 4
shuffle partitions and no UI; its JVM output goes to a log file, not the test
output.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from m2mc_pipeline.session import get_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session = get_session("local[2]", app_name="m2mc-tests", log_path=log, conf={
        "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false",
        "spark.driver.memory": "1g"})
    yield session
    session.stop()


class Trace:
    """Hand-made trace events of one run, written as docs/interfaces.md §4 JSON lines."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.events: list[dict[str, Any]] = []

    def ev(self, node: str, t: float, event: str, group: str | None = None,
           mid: str | None = None, **fields: Any) -> Trace:
        row = {"run": self.run, "node": node, "t": t, "event": event, "group": group,
               "mid": mid, "parent": None, "order": None, "gseq": None, "bytes": None,
               "peer": None, "detail": None}
        row.update(fields)
        self.events.append(row)
        return self

    def join(self, t: float, group: str, order: str, *nodes: str) -> Trace:
        for n in nodes:
            self.ev(n, t, "join", group, order=order)
        return self

    def send(self, node: str, t: float, group: str, mid: str, parent: str = "",
             order: str | None = None, deliver: bool = True, **fields: Any) -> Trace:
        """``send`` and, as the simulator writes it, the sender's own recv + deliver."""
        self.ev(node, t, "send", group, mid, parent=parent, order=order, bytes=10, **fields)
        if deliver:
            self.ev(node, t, "recv", group, mid, parent=parent, order=order, bytes=10)
            self.ev(node, t, "deliver", group, mid, parent=parent, order=order, bytes=10,
                    **fields)
        return self

    def get(self, node: str, t: float, group: str, mid: str, t_deliver: float | None = None,
            **fields: Any) -> Trace:
        """``recv`` at ``t`` then ``deliver`` at ``t_deliver`` (default: at once)."""
        self.ev(node, t, "recv", group, mid)
        return self.deliver(node, t if t_deliver is None else t_deliver, group, mid, **fields)

    def deliver(self, node: str, t: float, group: str, mid: str, **fields: Any) -> Trace:
        return self.ev(node, t, "deliver", group, mid, **fields)

    def write(self, directory: Path, meta: dict[str, Any] | None = None) -> Path:
        """One JSONL file per node, in the order the events were added, plus run.json."""
        directory.mkdir(parents=True, exist_ok=True)
        by_node: dict[str, list[dict[str, Any]]] = {}
        for e in self.events:
            by_node.setdefault(e["node"], []).append(e)
        for node, rows in by_node.items():
            (directory / f"{node}.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in rows))
        (directory / "run.json").write_text(json.dumps(meta or {"run": self.run}))
        return directory


@pytest.fixture(scope="session")
def make_trace() -> type[Trace]:
    return Trace
