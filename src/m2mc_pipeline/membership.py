"""Who was a member of which group when (CONTRACTS section 5, ``lost``).

Membership of ``node`` in ``group`` is a set of closed intervals
``[join_t, leave_t]`` built from the node's own ``join`` and ``leave`` events,
taken in the node's event order. A second ``join`` while already a member and a
``leave`` while not a member change nothing. A crash does not end membership:
a node that restarts keeps its durable membership. A node whose last
``crash`` has no later ``restart`` crashed for good.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, Window

from m2mc_pipeline.schema import CRASH, JOIN, LEAVE, RESTART


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


def crashed_for_good(lifecycle: DataFrame) -> DataFrame:
    """``(run, node, crash_t)`` for each node whose last crash has no later restart."""
    last = (lifecycle.groupBy("run", "node")
            .agg(F.max(F.when(F.col("event") == CRASH, F.struct("t", "pos"))).alias("crash"),
                 F.max(F.when(F.col("event") == RESTART, F.struct("t", "pos"))).alias("restart")))
    return (last.filter(F.col("crash").isNotNull()
                        & (F.col("restart").isNull() | (F.col("restart") < F.col("crash"))))
            .select("run", "node", F.col("crash.t").alias("crash_t")))
