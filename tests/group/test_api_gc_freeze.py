"""A node freezes what its process holds after start-up out of the collector's full
passes (NodeConfig.freeze_gc, m2mc.runtime.gc_freeze): once per process, and not at
all when told not to. Each case runs in a fresh interpreter: freezing is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

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
