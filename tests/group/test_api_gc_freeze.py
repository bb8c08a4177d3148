"""A node freezes what its process holds after start-up out of the collector's full
passes (NodeConfig.freeze_gc, m2mc.runtime.gc_freeze): once per process, and not at
all when told not to; and it raises the youngest generation's threshold
(NodeConfig.gc_threshold), never lowering one. Each case runs in a fresh interpreter:
the collector is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.errors import UsageError

SCRIPT = textwrap.dedent("""
    import asyncio, gc, json, sys
    calls = []
    real_freeze = gc.freeze
    gc.freeze = lambda: (calls.append(1), real_freeze())[1]
    from m2mc.api import Node, NodeConfig
    from m2mc.runtime.gc_freeze import frozen

    async def main(freeze):
        before = gc.get_freeze_count()
        async with Node(NodeConfig(channel="null://", freeze_gc=freeze)):
            first = gc.get_freeze_count()
        async with Node(NodeConfig(channel="null://", freeze_gc=freeze)):
            pass
        garbage = [[]]
        garbage[0].append(garbage)  # a cycle made after the freeze
        del garbage
        print(json.dumps({"before": before, "first": first, "freezes": len(calls),
                          "frozen": frozen(), "collected": gc.collect()}))

    asyncio.run(main(sys.argv[1] == "1"))
""")


def run(freeze: bool) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, "1" if freeze else "0"],
                         capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_the_first_node_freezes_start_up_objects_once() -> None:
    result = run(freeze=True)
    assert result["before"] == 0 and result["frozen"]
    assert result["first"] > 10_000  # modules, classes, functions: start-up's objects
    assert result["freezes"] == 1  # a later node freezes nothing more
    assert result["collected"] >= 2  # what is made afterwards is still collected


def test_freeze_gc_false_leaves_the_collector_alone() -> None:
    result = run(freeze=False)
    assert result["before"] == result["first"] == result["freezes"] == 0
    assert not result["frozen"]


THRESHOLD_SCRIPT = textwrap.dedent("""
    import asyncio, gc, json, sys
    from m2mc.api import Node, NodeConfig

    async def main(preset, threshold):
        if preset:
            gc.set_threshold(preset, 10, 10)
        before = gc.get_threshold()
        async with Node(NodeConfig(channel="null://", **threshold)):
            during = gc.get_threshold()
        print(json.dumps({"before": before, "during": during}))

    asyncio.run(main(int(sys.argv[1]), json.loads(sys.argv[2])))
""")


def thresholds(preset: int = 0, **config: int) -> dict[str, list[int]]:
    out = subprocess.run([sys.executable, "-c", THRESHOLD_SCRIPT, str(preset), json.dumps(config)],
                         capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, list[int]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_node_collects_the_youngest_generation_every_20000_objects() -> None:
    assert thresholds() == {"before": [700, 10, 10], "during": [20_000, 10, 10]}


def test_gc_threshold_0_leaves_the_collector_s_threshold() -> None:
    assert thresholds(gc_threshold=0) == {"before": [700, 10, 10], "during": [700, 10, 10]}


def test_a_threshold_the_application_set_higher_is_kept() -> None:
    result = thresholds(preset=50_000)
    assert result["before"] == result["during"] == [50_000, 10, 10]


def test_a_negative_gc_threshold_is_refused_before_anything_starts() -> None:
    with pytest.raises(UsageError, match="gc_threshold must be >= 0"):
        Node(NodeConfig(channel="null://", gc_threshold=-1))
