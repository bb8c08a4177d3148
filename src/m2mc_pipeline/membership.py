"""Who was a member of which group when (docs/interfaces.md §5, ``lost``).

Membership of ``node`` in ``group`` is a set of closed intervals
``[join_t, leave_t]`` built from the node's own ``join`` and ``leave`` events,
taken in the node's event order. A second ``join`` while already a member and a
``leave`` while not a member change nothing. A crash does not end membership:
a node that restarts keeps its durable membership. A node whose last
``crash`` has no later ``restart`` crashed for good.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, Window

from m2mc_pipeline.schema import JOIN, LEAVE


def membership_intervals(membership: DataFrame) -> DataFrame:
    """``(run, node, group, join_t, leave_t)`` from join/leave events; ``leave_t`` null = open."""
    w = Window.partitionBy("run", "node", "group").orderBy("t", "pos")
    transitions = (membership
                   .withColumn("prev", F.lag("event").over(w))
                   .filter(((F.col("event") == JOIN)
                            & (F.col("prev").isNull() | (F.col("prev") == LEAVE)))
                           | ((F.col("event") == LEAVE) & (F.col("prev") == JOIN))))
    # Within the transitions joins and leaves alternate, starting with a join.
    w2 = Window.partitionBy("run", "node", "group").orderBy("t", "pos")
    return (transitions
            .withColumn("leave_t", F.lead("t").over(w2))
            .filter(F.col("event") == JOIN)
            .select("run", "node", "group", F.col("t").alias("join_t"), "leave_t"))


def crashed_for_good(nodes: Sequence[dict[str, Any]]) -> list[tuple[str, str, float]]:
    """``(run, node, crash_t)`` for each node whose last crash has no later restart.

    ``nodes`` are tables.survey's per-node rows, which carry the (t, pos) of each
    node's last crash and last restart.
    """
    gone = []
    for n in nodes:
        crash = (n.get("crash_t"), n.get("crash_pos"))
        restart = (n.get("restart_t"), n.get("restart_pos"))
        if crash[0] is None:
            continue
        if restart[0] is None or restart < crash:
            gone.append((n["run"], n["node"], float(crash[0])))
    return gone
