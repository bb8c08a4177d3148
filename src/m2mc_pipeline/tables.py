"""Derived tables every check and metric starts from (all lazy DataFrames).

Naming: ``key`` is ``struct(t, pos)``, the order of events at one node (time,
then place in the file); Spark compares structs field by field, so
``a.key < b.key`` means "a happened before b at that node".
"""

from __future__ import annotations

from dataclasses import dataclass

import pyspark.sql.functions as F
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame

from m2mc_pipeline.membership import crashed_for_good, membership_intervals
from m2mc_pipeline.schema import CRASH, DELIVER, JOIN, LEAVE, RECV, RESTART, SEND
from m2mc_pipeline.session import small_frame

# "<pid>:<seqno>" (CONTRACTS section 4): origin and sequence number of a message.
_MID = r"^(.*):([0-9]+)$"


def key(prefix: str = "") -> Column:
    return F.struct(F.col(f"{prefix}t").alias("t"), F.col(f"{prefix}pos").alias("pos"))


def mid_origin(col: str = "mid") -> Column:
    return F.regexp_extract(F.col(col), _MID, 1)


def mid_seq(col: str = "mid") -> Column:
    seq = F.regexp_extract(F.col(col), _MID, 2)
    return F.when(seq == "", None).otherwise(seq.cast("long"))


@dataclass(slots=True)
class Tables:
    """The trace, cut into the shapes the checks use."""

    events: DataFrame        # well-formed events (schema + pos + scope)
    sends: DataFrame         # per send event (run, group, mid): sender, t_send, pos_send, parent
    delivered: DataFrame     # one row per (run, node, group, mid): n, t, pos, key, gseq range
    recvd: DataFrame         # first recv per (run, node, group, mid): t_recv
    group_order: DataFrame   # (run, group, order): the ordering each group asked for
    intervals: DataFrame     # membership (run, node, group, join_t, leave_t or null)
    gone: DataFrame          # nodes that crashed for good: (run, node, crash_t)
    violations_dir: str | None = None  # where checks write their violations (Parquet)

    def release(self) -> None:
        for df in (self.sends, self.delivered, self.recvd, self.group_order, self.intervals,
                   self.gone):
            df.unpersist()


def build(events: DataFrame) -> Tables:
    """Cut the events into the shared tables (persisted; ``release()`` frees them).

    Aggregations keep fixed-width buffers (counts, numbers, ``min_by``) so Spark
    can hash-aggregate instead of sorting: a minimum over ``struct(t, pos)`` or a
    ``first()`` of a string would force a sort of every delivery.
    """
    ev = events.filter("ok")
    sends = (ev.filter(F.col("event") == SEND).filter(F.col("mid").isNotNull())
             .select("run", "group", "mid", F.col("node").alias("sender"),
                     F.col("t").alias("t_send"), F.col("pos").alias("pos_send"),
                     "parent", F.col("order").alias("send_order"), "bytes"))
    # First delivery: earliest t, and the place in the file of that earliest one
    # (two deliveries of one message at the same instant at one node: either place).
    delivered = (ev.filter(F.col("event") == DELIVER).filter(F.col("mid").isNotNull())
                 .groupBy("run", "node", "group", "mid")
                 .agg(F.count(F.lit(1)).alias("n"),
                      F.min("t").alias("t"),
                      F.min_by("pos", "t").alias("pos"),
                      F.min("gseq").alias("gseq"),
                      F.max("gseq").alias("gseq_max"))
                 .select("run", "node", "group", "mid", "n", key().alias("key"), "t", "pos",
                         "gseq", "gseq_max"))
    recvd = (ev.filter(F.col("event") == RECV).filter(F.col("mid").isNotNull())
             .groupBy("run", "node", "group", "mid")
             .agg(F.min("t").alias("t_recv")))
    membership = ev.filter(F.col("event").isin(JOIN, LEAVE) & F.col("group").isNotNull())
    lifecycle = ev.filter(F.col("event").isin(CRASH, RESTART))
    # Every check and metric reads these: compute each once, keep it (memory, then disk).
    keep = StorageLevel.MEMORY_AND_DISK
    return Tables(events=ev, sends=sends.persist(keep), delivered=delivered.persist(keep),
                  recvd=recvd.persist(keep), group_order=group_orders(ev),
                  intervals=membership_intervals(membership).persist(keep),
                  gone=crashed_for_good(lifecycle).persist(keep))


def group_orders(ev: DataFrame) -> DataFrame:
    """``(run, group, order, orders)``: the ordering each group asked for (a tiny table).

    Taken from every event that names one. A group that shows several (a writer
    bug) is checked under the first in alphabetical order; ``orders`` says how many.
    """
    seen = (ev.filter(F.col("order").isNotNull() & F.col("group").isNotNull())
            .select("run", "group", "order").distinct().collect())
    chosen: dict[tuple[str, str], list[str]] = {}
    for r in seen:
        chosen.setdefault((r["run"], r["group"]), []).append(r["order"])
    rows = [(run, group, min(o), len(o)) for (run, group), o in sorted(chosen.items())]
    return small_frame(ev.sparkSession, rows,
                       "run string, group string, order string, orders int").persist()


def with_order(df: DataFrame, group_order: DataFrame, wanted: str) -> DataFrame:
    """Keep the rows of ``df`` whose group asked for ordering ``wanted``."""
    groups = group_order.filter(F.col("order") == wanted).select("run", "group")
    return df.join(F.broadcast(groups), ["run", "group"], "left_semi")


__all__ = ["Tables", "build", "key", "mid_origin", "mid_seq", "with_order"]
