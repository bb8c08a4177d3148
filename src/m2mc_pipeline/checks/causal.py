"""``causal_order`` (docs/interfaces.md §5), with happened-before taken from the trace.

The protocol's vector clocks are not trusted. A message m sent by s depends on
everything s had delivered, and everything s had sent, before it sent m
(Lamport's happened-before restricted to the group). Checking every such pair
would be quadratic; this check uses the *direct* dependencies only:

- the previous message s sent in the group, and
- every message s delivered between that previous send and m.

Anything older is a dependency of that previous send, so it is checked through
it: if n delivers m' before m and deps(m') before m', it delivers deps(m')
before m. A violation is a node n that delivered m and either delivered a
direct dependency d after m, or never delivered d although n was a member of
the group when d was sent (and n did not send d itself). All joins, no UDF.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, Window

from m2mc_pipeline.checks.base import Check, CheckResult, summarize
from m2mc_pipeline.tables import Tables, before, hashed, with_order

_SEND, _DELIVER = 1, 0


def dependency_edges(tb: Tables) -> DataFrame:
    """``(dk, mk)``: message dk happened directly before the send of message mk."""
    sends = with_order(tb.sends, tb, "causal")
    delivered = with_order(tb.delivered, tb, "causal")
    steps = (sends.select("run", F.col("sender").alias("node"), "group", "mk",
                          F.col("t_send").alias("t"), F.col("pos_send").alias("pos"),
                          F.lit(_SEND).alias("kind"))
             .unionByName(delivered.select("run", "node", "group", "mk", "t", "pos",
                                           F.lit(_DELIVER).alias("kind"))))
    # Rows between two sends of a node form a block; ``before`` (sends strictly before
    # the row) numbers it, and the block's last row is the send that follows them all.
    # Growing frames (unbounded preceding) are incremental in Spark; a frame reaching to
    # unbounded following would be recomputed per row, quadratic in a node's events.
    w = Window.partitionBy("run", "node", "group").orderBy("t", "pos")
    sent = F.when(F.col("kind") == _SEND, F.col("mk"))
    is_send = (F.col("kind") == _SEND).cast("int")
    steps = (steps
             .withColumn("before", F.coalesce(F.sum(is_send).over(
                 w.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)))
             .withColumn("prev_send", F.last(sent, ignorenulls=True).over(
                 w.rowsBetween(Window.unboundedPreceding, -1))))
    block = Window.partitionBy("run", "node", "group", "before")
    steps = steps.withColumn("next_send", F.max(sent).over(block))
    after_delivery = (steps.filter((F.col("kind") == _DELIVER) & F.col("next_send").isNotNull())
                      .select(F.col("mk").alias("dk"), F.col("next_send").alias("mk")))
    after_send = (steps.filter((F.col("kind") == _SEND) & F.col("prev_send").isNotNull())
                  .select(F.col("prev_send").alias("dk"), "mk"))
    return after_delivery.unionByName(after_send)


def causal_order(tb: Tables) -> Check:
    """Candidates first: deliveries whose dependency was delivered later or not at all
    at that node (usually none); only if there are any are they named and excused."""
    delivered = with_order(tb.delivered, tb, "causal")
    at = delivered.select("mk", "nk", "t", "pos")
    dep_at = delivered.select(F.col("mk").alias("dk"), "nk", F.col("t").alias("dep_t"),
                              F.col("pos").alias("dep_pos"))
    candidates = (dependency_edges(tb).join(hashed(at), "mk")
                  .join(hashed(dep_at), ["dk", "nk"], "left")
                  .filter(F.col("dep_t").isNull() | before("t", "pos", "dep_t", "dep_pos"))
                  .select("mk", "dk", "nk", "t", "dep_t"))
    order_by = ["run", "node", "t_deliver", "mid", "dep"]

    def refine() -> CheckResult:  # ``candidates`` is persisted by run_all meanwhile
        return summarize("causal_order", _explain(tb, delivered, candidates), order_by,
                         save_to=tb.violations_dir)

    return Check("causal_order", candidates, order_by, tb.violations_dir, refine)


def _explain(tb: Tables, delivered: DataFrame, candidates: DataFrame) -> DataFrame:
    """Name the candidates, and drop the dependencies a node could not have had."""
    names = delivered.select("mk", "nk", "run", "node", "group", "mid")
    dep_send = tb.sends.select(F.col("mk").alias("dk"), F.col("mid").alias("dep"),
                               F.col("nk").alias("dep_sender"),
                               F.col("t_send").alias("dep_t_send"))
    named = (candidates.join(names, ["mk", "nk"]).join(dep_send, "dk", "left"))
    # A dependency never delivered at n is excused when n could not have had it:
    # n sent it itself, or n was not a member when it was sent. (A dependency that
    # was never sent at all is the ``unexpected`` check's business.)
    member = tb.intervals.select("run", "node", "group", "join_t", "leave_t")
    missing = (named.filter(F.col("dep_t").isNull() & F.col("dep_sender").isNotNull()
                            & (F.col("dep_sender") != F.col("nk")))
               .join(member, ["run", "node", "group"], "left")
               .withColumn("was_member", F.col("join_t").isNotNull()
                           & (F.col("join_t") <= F.col("dep_t_send"))
                           & (F.col("leave_t").isNull()
                              | (F.col("dep_t_send") <= F.col("leave_t"))))
               .groupBy("run", "node", "group", "mid", "dep", "t", "dep_t")
               .agg(F.max("was_member").alias("was_member"))
               .filter(F.col("was_member"))
               .drop("was_member"))
    late = named.filter(F.col("dep_t").isNotNull()).select(
        "run", "node", "group", "mid", "dep", "t", "dep_t")
    return (late.unionByName(missing).dropDuplicates(["run", "node", "group", "mid", "dep"])
            .select("run", "node", "group", "mid", "dep", F.col("t").alias("t_deliver"),
                    F.col("dep_t").alias("t_dep"),
                    F.when(F.col("dep_t").isNull(), "dependency never delivered")
                    .otherwise("dependency delivered after").alias("problem")))
