"""Derived tables every check and metric starts from.

Order at a node: ``(t, pos)``, time then place in the file; ``before()`` compares
two such pairs. Joins use 64-bit keys instead of strings: ``mk`` names a message
(xxhash64 of run, group, mid), ``nk`` a node (xxhash64 of run, node). Joining and
shuffling longs is about twice as fast as joining the strings; a collision needs
two of n messages to share a 64-bit hash (probability below n^2 / 2^65: about
3e-6 for ten million messages), and the strings stay alongside for the reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyspark.sql.functions as F
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame

from m2mc_pipeline.membership import crashed_for_good, membership_intervals
from m2mc_pipeline.schema import CRASH, DELIVER, EVENTS, JOIN, LEAVE, RECV, RESTART, SEND
from m2mc_pipeline.session import small_frame

# "<pid>:<seqno>" (CONTRACTS section 4): origin and sequence number of a message.
_MID = r"^(.*):([0-9]+)$"


def message_key(run: str = "run", group: str = "group", mid: str = "mid") -> Column:
    return F.xxhash64(F.col(run), F.col(group), F.col(mid))


def node_key(run: str = "run", node: str = "node") -> Column:
    return F.xxhash64(F.col(run), F.col(node))


def before(t1: str, pos1: str, t2: str, pos2: str) -> Column:
    """Event (t1, pos1) came before event (t2, pos2) at the same node."""
    return (F.col(t1) < F.col(t2)) | ((F.col(t1) == F.col(t2)) & (F.col(pos1) < F.col(pos2)))


def mid_origin(col: str = "mid") -> Column:
    return F.regexp_extract(F.col(col), _MID, 1)


def mid_seq(col: str = "mid") -> Column:
    seq = F.regexp_extract(F.col(col), _MID, 2)
    return F.when(seq == "", None).otherwise(seq.cast("long"))


@dataclass(slots=True)
class Tables:
    """The trace, cut into the shapes the checks use."""

    events: DataFrame        # well-formed events (schema + pos + scope)
    sends: DataFrame         # per send event: mk, nk (sender), pk (parent), strings, t_send...
    delivered: DataFrame     # per (run, node, group, mid): mk, nk, n, first t and pos, gseq
    recvd: DataFrame         # first recv per (run, node, group, mid): mk, nk, t_recv
    group_order: DataFrame   # (run, group, order): the ordering each group asked for
    intervals: DataFrame     # membership (run, node, group, join_t, leave_t or null)
    gone: DataFrame          # nodes that crashed for good: (run, node, crash_t)
    node_rows: list[dict[str, Any]] = field(default_factory=list)  # survey() per (run, node)
    anyone_gone: bool = True  # False: no node crashed for good, no exemption to compute
    total_without_gseq: bool = True  # False: every delivery in total groups has a gseq
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
    nodes, orders = survey(events)
    gone = crashed_for_good(nodes)
    ev = events.filter("ok")
    # Sends, deliveries and receipts are all hash-partitioned by message key. Joins on
    # ``mk`` (or ``mk`` and ``nk``, with requireAllClusterKeysForCoPartition off) then
    # find both sides already in place and shuffle nothing.
    ev.sparkSession.conf.set("spark.sql.requireAllClusterKeysForCoPartition", "false")
    root = F.col("parent").isNull() | (F.col("parent") == "")
    sends = (ev.filter(F.col("event") == SEND).filter(F.col("mid").isNotNull())
             .select(message_key().alias("mk"), node_key().alias("nk"),
                     F.when(~root, message_key(mid="parent")).alias("pk"),
                     "run", "group", "mid", F.col("node").alias("sender"),
                     F.col("t").alias("t_send"), F.col("pos").alias("pos_send"),
                     "parent", F.col("order").alias("send_order"), "bytes")
             .repartition("mk"))
    # First delivery: earliest t, and the place in the file of that earliest one
    # (two deliveries of one message at the same instant at one node: either place).
    delivered = (ev.filter(F.col("event") == DELIVER).filter(F.col("mid").isNotNull())
                 .withColumn("mk", message_key()).repartition("mk")
                 .groupBy("mk", "run", "node", "group", "mid")
                 .agg(F.count(F.lit(1)).alias("n"),
                      F.min("t").alias("t"),
                      F.min_by("pos", "t").alias("pos"),
                      F.min("gseq").alias("gseq"),
                      F.max("gseq").alias("gseq_max"))
                 .select("mk", node_key().alias("nk"), "run", "node", "group", "mid", "n",
                         "t", "pos", "gseq", "gseq_max"))
    recvd = (ev.filter(F.col("event") == RECV).filter(F.col("mid").isNotNull())
             .withColumn("mk", message_key()).repartition("mk")
             .groupBy("mk", "run", "node", "group", "mid")
             .agg(F.min("t").alias("t_recv"))
             .select("mk", node_key().alias("nk"), "run", "node", "group", "mid", "t_recv"))
    membership = ev.filter(F.col("event").isin(JOIN, LEAVE) & F.col("group").isNotNull())
    # Every check and metric reads these: compute each once, keep it (memory, then disk).
    keep = StorageLevel.MEMORY_AND_DISK
    return Tables(events=ev, sends=sends.persist(keep), delivered=delivered.persist(keep),
                  recvd=recvd.persist(keep), group_order=group_orders(ev, orders),
                  node_rows=nodes,
                  intervals=membership_intervals(membership).persist(keep),
                  gone=small_frame(ev.sparkSession, gone,
                                   "run string, node string, crash_t double").persist(),
                  anyone_gone=bool(gone),
                  total_without_gseq=any(o["order"] == "total" and o["no_gseq"]
                                         for o in orders))


def survey(events: DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One pass over every loaded row (malformed ones included), two small results.

    Per (run, node): events, malformed, unknown event names, sends, scope, first and
    last t (verify.json's counts and the run table). Per (run, group, order): the
    orderings groups ask for. One grouping-sets aggregation, so one scan.
    """
    ok = F.col("ok")
    rows = (events.groupingSets([("run", "node"), ("run", "group", "order")],
                                "run", "node", "group", "order")
            .agg(F.grouping("node").alias("by_order"),
                 F.count(F.when(ok, 1)).alias("events"),
                 F.count(F.when(~ok, 1)).alias("malformed"),
                 F.count(F.when(ok & ~F.col("event").isin(*sorted(EVENTS)), 1)).alias("unknown"),
                 F.count(F.when(ok & (F.col("event") == SEND), 1)).alias("messages"),
                 F.min("scope").alias("scope"),
                 F.min(F.when(ok, F.col("t"))).alias("t_first"),
                 F.max(F.when(ok, F.col("t"))).alias("t_last"),
                 *_last(CRASH), *_last(RESTART),
                 F.count(F.when(ok & (F.col("event") == DELIVER) & F.col("gseq").isNull(), 1))
                 .alias("no_gseq"))
            .collect())
    nodes = [{k: r[k] for k in ("run", "node", "events", "malformed", "unknown", "messages",
                                "scope", "t_first", "t_last", "crash_t", "crash_pos",
                                "restart_t", "restart_pos")}
             for r in rows if not r["by_order"]]
    orders = [{"run": r["run"], "group": r["group"], "order": r["order"],
               "no_gseq": r["no_gseq"]}
              for r in rows if r["by_order"] and r["events"] and r["run"] is not None
              and r["group"] is not None and r["order"] is not None]
    return nodes, orders


def _last(event: str) -> list[Column]:
    """(t, pos) of a node's last ``event``, as two numbers (hash-aggregatable)."""
    hit = F.col("ok") & (F.col("event") == event)
    return [F.max(F.when(hit, F.col("t"))).alias(f"{event}_t"),
            F.max_by(F.when(hit, F.col("pos")), F.when(hit, F.col("t")))
            .alias(f"{event}_pos")]


def group_orders(ev: DataFrame, seen: list[dict[str, Any]]) -> DataFrame:
    """``(run, group, order, orders)``: the ordering each group asked for (a tiny table).

    Taken from every event that names one. A group that shows several (a writer
    bug) is checked under the first in alphabetical order; ``orders`` says how many.
    """
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


__all__ = ["Tables", "before", "build", "message_key", "mid_origin", "mid_seq", "node_key",
           "with_order"]
