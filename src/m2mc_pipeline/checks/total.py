"""``total_order`` (docs/interfaces.md §5), for groups whose order is ``total``.

Total order means every pair of nodes delivers the messages they both deliver
in the same relative order. The check does not take the protocol's ``gseq`` on
trust; it verifies that ``gseq`` is a valid witness and that nodes follow it:

1. ``gseq_conflict``: a message carries more than one gseq (at one node or
   across nodes), or two messages of a group share one gseq.
2. ``gseq_regress``: a node delivers a message whose gseq is not greater than
   that of the message it delivered just before in the group.
3. ``order_differs`` (only for deliveries without gseq): a node delivered a
   then b consecutively, and another node delivered b before a.

If (1) and (2) find nothing, gseq is a one-to-one labelling every node's
delivery sequence increases along, so any two nodes agree on the relative
order of their common messages: that is the pairwise property itself, checked
in linear time.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, Window

from m2mc_pipeline.checks.base import Check
from m2mc_pipeline.tables import Tables, before, hashed, with_order

_COLS = ["run", "node", "group", "mid", "gseq", "other", "other_gseq", "t_deliver", "problem"]


def _conflicts(d: DataFrame) -> DataFrame:
    labelled = d.filter(F.col("gseq").isNotNull())
    names = labelled.select("mk", "run", "node", "group", "mid", "t")
    # Aggregate on the 64-bit keys (hash aggregation), then name the few offenders.
    # No broadcast: both sides are partitioned by mk already, so the join shuffles
    # nothing, where a broadcast would cost a Spark job of its own before the checks.
    several = (labelled.groupBy("mk")
               .agg(F.min("gseq").alias("gseq"), F.max("gseq_max").alias("other_gseq"))
               .filter(F.col("gseq") != F.col("other_gseq")))
    per_msg = (names.join(hashed(several), "mk")
               .groupBy("run", "group", "mid", "gseq", "other_gseq")
               .agg(F.min("node").alias("node"), F.min("t").alias("t_deliver"))
               .select("run", "node", "group", "mid", "gseq",
                       F.lit(None).cast("string").alias("other"), "other_gseq", "t_deliver",
                       F.lit("message has several gseq").alias("problem")))
    # A gseq shared by several messages: its deliveries' keys differ. One shuffle by
    # (run, group, gseq), an aggregate over each partition of the window, no join.
    seq = Window.partitionBy("run", "group", "gseq")
    per_seq = (labelled.select("run", "group", "gseq", "mk", "mid", "node", "t")
               .withColumn("lo", F.min("mk").over(seq)).withColumn("hi", F.max("mk").over(seq))
               .filter(F.col("lo") != F.col("hi"))
               .groupBy("run", "group", "gseq")
               .agg(F.min("mid").alias("mid"), F.max("mid").alias("other"),
                    F.min("node").alias("node"), F.min("t").alias("t_deliver"))
               .select("run", "node", "group", "mid", "gseq", "other",
                       F.col("gseq").alias("other_gseq"), "t_deliver",
                       F.lit("gseq shared by several messages").alias("problem")))
    return per_msg.unionByName(per_seq)


def _regressions(d: DataFrame) -> DataFrame:
    w = Window.partitionBy("run", "node", "group").orderBy("t", "pos")
    return (d.filter(F.col("gseq").isNotNull())
            .withColumn("other", F.lag("mid").over(w))
            .withColumn("other_gseq", F.lag("gseq").over(w))
            .filter(F.col("other_gseq") >= F.col("gseq"))
            .select("run", "node", "group", "mid", "gseq", "other", "other_gseq",
                    F.col("t").alias("t_deliver"),
                    F.lit("delivered after a message with a greater gseq").alias("problem")))


def _unlabelled_inversions(d: DataFrame) -> DataFrame:
    unlabelled = d.filter(F.col("gseq").isNull())
    w = Window.partitionBy("run", "node", "group").orderBy("t", "pos")
    pairs = (unlabelled.withColumn("next", F.lead("mk").over(w))
             .withColumn("next_mid", F.lead("mid").over(w))
             .withColumn("witness", F.col("node"))
             .filter(F.col("next").isNotNull())
             .select("mk", "next", "next_mid", "witness", F.col("nk").alias("witness_nk")))
    a = unlabelled.select("mk", "nk", "run", "node", "group", "mid", "t", "pos")
    b = unlabelled.select(F.col("mk").alias("next"), "nk", F.col("t").alias("t_b"),
                          F.col("pos").alias("pos_b"))
    return (pairs.join(hashed(a), "mk")
            .filter(F.col("nk") != F.col("witness_nk"))
            .join(hashed(b), ["next", "nk"])
            .filter(before("t_b", "pos_b", "t", "pos"))
            .select("run", "node", "group", "mid", F.lit(None).cast("long").alias("gseq"),
                    F.col("next_mid").alias("other"),
                    F.lit(None).cast("long").alias("other_gseq"),
                    F.col("t").alias("t_deliver"),
                    F.concat(F.lit("order differs from node "), F.col("witness"))
                    .alias("problem")))


def total_order(tb: Tables) -> Check:
    d = with_order(tb.delivered, tb, "total")
    bad = _conflicts(d).select(*_COLS).unionByName(_regressions(d).select(*_COLS))
    if tb.total_without_gseq:
        bad = bad.unionByName(_unlabelled_inversions(d).select(*_COLS))
    return Check("total_order", bad, ["run", "node", "t_deliver", "mid"], tb.violations_dir)
