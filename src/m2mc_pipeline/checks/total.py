"""``total_order`` (CONTRACTS section 5), for groups whose order is ``total``.

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

from m2mc_pipeline.checks.base import CheckResult, summarize
from m2mc_pipeline.tables import Tables, with_order

_COLS = ["run", "node", "group", "mid", "gseq", "other", "other_gseq", "t_deliver", "problem"]


def _conflicts(d: DataFrame) -> DataFrame:
    labelled = d.filter(F.col("gseq").isNotNull())
    per_msg = (labelled.groupBy("run", "group", "mid")
               .agg(F.min("gseq").alias("lo"), F.max("gseq_max").alias("hi"),
                    F.min("node").alias("node"), F.min("t").alias("t_deliver"))
               .filter(F.col("lo") != F.col("hi"))
               .select("run", "node", "group", "mid", F.col("lo").alias("gseq"),
                       F.lit(None).cast("string").alias("other"),
                       F.col("hi").alias("other_gseq"), "t_deliver",
                       F.lit("message has several gseq").alias("problem")))
    per_seq = (labelled.groupBy("run", "group", "gseq")
               .agg(F.min("mid").alias("mid"), F.max("mid").alias("other"),
                    F.min("node").alias("node"), F.min("t").alias("t_deliver"))
               .filter(F.col("mid") != F.col("other"))
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
    pairs = (unlabelled.withColumn("next", F.lead("mid").over(w))
             .filter(F.col("next").isNotNull())
             .select("run", "group", F.col("node").alias("witness"), "mid", "next"))
    a = unlabelled.select("run", "group", "node", "mid", F.col("key").alias("key_a"))
    b = unlabelled.select("run", "group", "node", F.col("mid").alias("next"),
                          F.col("key").alias("key_b"))
    return (pairs.join(a, ["run", "group", "mid"])
            .filter(F.col("node") != F.col("witness"))
            .join(b, ["run", "group", "node", "next"])
            .filter(F.col("key_b") < F.col("key_a"))
            .select("run", "node", "group", "mid", F.lit(None).cast("long").alias("gseq"),
                    F.col("next").alias("other"), F.lit(None).cast("long").alias("other_gseq"),
                    F.col("key_a.t").alias("t_deliver"),
                    F.concat(F.lit("order differs from node "), F.col("witness"))
                    .alias("problem")))


def total_order(tb: Tables) -> CheckResult:
    d = with_order(tb.delivered, tb.group_order, "total")
    bad = (_conflicts(d).select(*_COLS)
           .unionByName(_regressions(d).select(*_COLS))
           .unionByName(_unlabelled_inversions(d).select(*_COLS)))
    return summarize("total_order", bad, ["run", "node", "t_deliver", "mid"],
                     save_to=tb.violations_dir)
