"""Delivery delay, end-to-end latency and out-of-sequence store occupancy.

- delivery delay (seeds/003 abstract: "the time from the moment a message is
  received at a process to the time the message is delivered"): first
  ``deliver`` minus first ``recv`` of the message at the same node. A delivery
  without a ``recv`` (the sender's own message) has no delay.
- latency: first ``deliver`` at a node other than the sender, minus ``send``.
  In real runs this subtracts two clocks; in the simulator both are virtual.
- out-of-sequence store occupancy at a node: how many messages of a group it
  has received and not yet delivered, after all events of one instant.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, Window

from m2mc_pipeline.tables import Tables


def deliveries(tb: Tables) -> DataFrame:
    """One row per first delivery: who, what (gseq: the smallest the node's deliveries
    of it carried), when sent/received/delivered, delay, latency."""
    sends = tb.sends.select("mk", "sender", "t_send", "send_order", "bytes")
    d = (tb.delivered.select("mk", "nk", "run", "node", "group", "mid", "gseq",
                             F.col("t").alias("t_deliver"))
         .join(sends, "mk", "left")
         .join(tb.recvd.select("mk", "nk", "t_recv"), ["mk", "nk"], "left")
         .join(F.broadcast(tb.group_order.select("run", "group", "order")), ["run", "group"],
               "left"))
    order = F.coalesce(F.col("order"), F.col("send_order"), F.lit("none"))
    return d.select(
        "run", "group", "node", "mid", "sender", order.alias("order"), "gseq", "bytes",
        "t_send", "t_recv", "t_deliver",
        (F.col("t_deliver") - F.col("t_recv")).alias("delay"),
        F.when(F.col("node") != F.col("sender"), F.col("t_deliver") - F.col("t_send"))
        .alias("latency"))


def osms_occupancy(dl: DataFrame) -> DataFrame:
    """``(run, group, node, order, max, mean)``: out-of-sequence store occupancy per node.

    ``mean`` is time-weighted over the node's span from its first receive to its
    last delivery in the group.
    """
    held = dl.filter(F.col("t_recv").isNotNull())
    steps = (held.select("run", "group", "node", "order", F.col("t_recv").alias("t"),
                         F.lit(1).alias("change"))
             .unionByName(held.select("run", "group", "node", "order",
                                      F.col("t_deliver").alias("t"), F.lit(-1).alias("change")))
             .groupBy("run", "group", "node", "order", "t").agg(F.sum("change").alias("change")))
    w = Window.partitionBy("run", "group", "node").orderBy("t")
    occ = (steps.withColumn("level", F.sum("change").over(
        w.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
        .withColumn("until", F.lead("t").over(w)))
    return (occ.groupBy("run", "group", "node", "order")
            .agg(F.max("level").alias("max"),
                 F.sum(F.col("level") * F.coalesce(F.col("until") - F.col("t"), F.lit(0.0)))
                 .alias("area"),
                 (F.max("t") - F.min("t")).alias("span"))
            .select("run", "group", "node", "order", F.col("max").cast("long").alias("max"),
                    F.when(F.col("span") > 0, F.col("area") / F.col("span")).otherwise(0.0)
                    .alias("mean"))
            .orderBy("run", "group", "node"))
