"""``fifo_order`` (docs/interfaces.md §5), for groups whose order is ``fifo``.

Per sender, a node delivers that sender's messages in increasing sequence
number: with mid ``"<pid>:<seqno>"``, each first delivery at node n of a
message from pid must carry a greater seqno than the previous first delivery
at n from the same pid in the group. Gaps are the ``lost`` check's business.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import Window

from m2mc_pipeline.checks.base import Check
from m2mc_pipeline.tables import Tables, mid_origin, mid_seq, with_order


def fifo_order(tb: Tables) -> Check:
    d = (with_order(tb.delivered, tb, "fifo")
         .withColumn("origin", mid_origin()).withColumn("seq", mid_seq())
         .filter(F.col("seq").isNotNull()))
    w = Window.partitionBy("run", "node", "group", "origin").orderBy("t", "pos")
    bad = (d.withColumn("prev", F.lag("mid").over(w))
           .withColumn("prev_seq", F.lag("seq").over(w))
           .filter(F.col("prev_seq") >= F.col("seq"))
           .select("run", "node", "group", "mid", F.col("prev").alias("delivered_after"),
                   F.col("t").alias("t_deliver")))
    return Check("fifo_order", bad, ["run", "node", "t_deliver", "mid"], tb.violations_dir)
