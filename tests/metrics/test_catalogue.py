"""Nothing is forgotten: every field of every stats dataclass goes to a documented
metric and shows up in a scrape; every stats class of the code is routed; every
metric and queue is in docs/operations.md, and the page names no metric that does
not exist."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

from scrape import scrape, unexported

from m2mc.api import Node, NodeConfig
from m2mc.metrics import catalogue as cat

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "operations.md"


def test_every_stats_field_goes_to_a_catalogue_metric_with_its_labels() -> None:
    for table in cat.TABLES:
        assert table.fields(), table.cls.__name__
        for name in table.fields():
            routes = table.routes(name)
            assert routes, f"{table.cls.__name__}.{name}"
            for route in routes:
                spec = cat.CATALOGUE[route.metric]
                fixed = {label for label, _ in route.labels} | (
                    {route.key} if route.key else set())
                assert fixed <= set(spec.labels), (table.cls.__name__, name, spec.name)


def test_every_stats_class_in_the_code_is_routed() -> None:
    found = set()
    for path in (ROOT / "src" / "m2mc").rglob("*.py"):
        found |= set(re.findall(r"^class (\w+Stats)\b", path.read_text(), re.MULTILINE))
    assert found == {table.cls.__name__ for table in cat.TABLES}


async def test_a_scrape_of_an_ad_hoc_node_has_a_metric_for_every_counter() -> None:
    channel = f"mem://catalogue-{uuid.uuid4().hex[:8]}"
    # A keyed, total-order group has every per-group counter (sequencer log, key).
    async with Node(NodeConfig(pid="alice", channel=channel, metrics="127.0.0.1:0")) as alice:
        group = await alice.create_group("all counters", order="total",
                                         passphrase="correct horse battery staple")
        await group.send("one")
        await group.receive(timeout=10)
        assert alice.metrics_address is not None
        got = await asyncio.to_thread(scrape, alice.metrics_address)
    assert unexported(got, "node", (cat.NODE, cat.GJLP, cat.REPAIR, cat.WINDOW, cat.MSP,
                                    cat.SEQLOG,
                                    cat.AUTH, cat.RATE_LIMIT, cat.M2MP, cat.CHANNEL)) == []
    assert got.value("m2mc_m2mp_abandoned_total", reason="timeout") == 0  # there from start


def test_operations_page_lists_every_metric_and_queue_and_no_other() -> None:
    text = DOCS.read_text()
    documented = set(re.findall(r"`(m2mc_[a-z0-9_]+)`", text))
    assert set(cat.CATALOGUE) <= documented, sorted(set(cat.CATALOGUE) - documented)
    assert documented <= set(cat.CATALOGUE), sorted(documented - set(cat.CATALOGUE))
    for queue in cat.QUEUES:
        assert f"`{queue}`" in text, queue
    assert f"{cat.MAX_GROUP_LABELS}" in text and cat.OTHER_GROUPS in text
    assert "operations.md" in (ROOT / "docs" / "architecture.md").read_text()
