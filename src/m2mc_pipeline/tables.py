"""Derived tables every check and metric starts from.

Order at a node: ``(t, pos)``, time then place in the file; ``before()`` compares
two such pairs. Joins use 64-bit keys instead of strings: ``mk`` names a message
(xxhash64 of run, group, mid), ``nk`` a node (xxhash64 of run, node). Joining and
shuffling longs is about twice as fast as joining the strings; a collision needs
two of n messages to share a 64-bit hash (probability below n^2 / 2^65: about
3e-6 for ten million messages), and the strings stay alongside for the reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyspark.sql.functions as F
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame

from m2mc_pipeline.membership import crashed_for_good, membership_intervals
from m2mc_pipeline.schema import (
    CRASH,
    DELIVER,
    EVENTS,
    JOIN,
    LEAVE,
    NACK,
    RECV,
    RESTART,
    SEND,
    SYNC_REQ,
)
from m2mc_pipeline.session import small_frame

# "<pid>:<seqno>" (docs/interfaces.md §4): origin and sequence number of a message.
_MID = r"^(.*):([0-9]+)$"


def message_key(run: str = "run", group: str = "group", mid: str = "mid") -> Column:
    return F.xxhash64(F.col(run), F.col(group), F.col(mid))


def node_key(run: str = "run", node: str = "node") -> Column:
    return F.xxhash64(F.col(run), F.col(node))


def before(t1: str, pos1: str, t2: str, pos2: str) -> Column:
    """Event (t1, pos1) came before event (t2, pos2) at the same node."""
    return (F.col(t1) < F.col(t2)) | ((F.col(t1) == F.col(t2)) & (F.col(pos1) < F.col(pos2)))


def hashed(df: DataFrame) -> DataFrame:
    """``df`` as the build side of a hash join done where the rows already are.

    For joins between the key-partitioned tables: once they are cached, Spark sees
    their real size and would broadcast anything under 10 MB (a few hundred thousand
    deliveries), which costs a job of its own, a trip through the driver and a hash
    table per task. Both sides are already partitioned by the key, so a shuffled hash
    join shuffles nothing and hashes each partition once.
    """
    return df.hint("shuffle_hash")


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
    group_rows: list[tuple[str, str, str, int]]  # the same rows, on the driver
    intervals: DataFrame     # membership (run, node, group, join_t, leave_t or null)
    gone: DataFrame          # nodes that crashed for good: (run, node, crash_t)
    node_rows: list[dict[str, Any]] = field(default_factory=list)  # survey() per (run, node)
    anyone_gone: bool = True  # False: no node crashed for good, no exemption to compute
    total_without_gseq: bool = True  # False: every delivery in total groups has a gseq
    any_requests: bool = True  # False: no nack or sync_req at all, no repair to measure
    violations_dir: str | None = None  # where checks write their violations (Parquet)

    def orders_by_run(self) -> dict[str, list[str]]:
        """The orderings the groups of each run asked for (one entry per ordering)."""
        out: dict[str, list[str]] = {}
        for run, _, order, _ in self.group_rows:
            if order not in out.setdefault(run, []):
                out[run].append(order)
        return out

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
    sends, delivered, recvd = sends.persist(keep), delivered.persist(keep), recvd.persist(keep)
    intervals = membership_intervals(membership).persist(keep)
    # The checks read sends, deliveries and intervals: they are computed here, in the
    # survey's job, by both cores, so that no check's task waits (holding a core) for
    # another task to fill the cache. Receipts are left to the metrics.
    nodes, orders = survey(events, materialize=[sends, delivered, intervals])
    gone = crashed_for_good(nodes)
    group_rows = group_orders(orders)
    return Tables(events=ev, sends=sends, delivered=delivered,
                  recvd=recvd, group_rows=group_rows,
                  group_order=small_frame(ev.sparkSession, group_rows,
                                          "run string, group string, order string, orders int"
                                          ).persist(),
                  node_rows=nodes,
                  intervals=intervals,
                  gone=small_frame(ev.sparkSession, gone,
                                   "run string, node string, crash_t double").persist(),
                  anyone_gone=bool(gone),
                  total_without_gseq=any(o["order"] == "total" and o["no_gseq"]
                                         for o in orders),
                  any_requests=any(n["requests"] for n in nodes))


def survey(events: DataFrame, materialize: Sequence[DataFrame] = ()
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One pass over every loaded row (malformed ones included), two small results.

    Per (run, node): events, malformed, unknown event names, sends, repair and
    catch-up requests, scope, first and last t (verify.json's counts and the run
    table). Per (run, group, order): the orderings groups ask for. One plain
    aggregation by (run, node, group, order), a few rows per node, is combined here:
    cheaper than grouping sets, which feed every row to the aggregation twice.
    ``materialize``: persisted frames to fill in the same Spark job (their row
    counts ride along in the result, then dropped).
    """
    ok = F.col("ok")
    agg = (events.groupBy("run", "node", "group", "order")
            .agg(F.count(F.when(ok, 1)).alias("events"),
                 F.count(F.when(~ok, 1)).alias("malformed"),
                 F.count(F.when(ok & ~F.col("event").isin(*sorted(EVENTS)), 1)).alias("unknown"),
                 F.count(F.when(ok & (F.col("event") == SEND), 1)).alias("messages"),
                 F.min("scope").alias("scope"),
                 F.min(F.when(ok, F.col("t"))).alias("t_first"),
                 F.max(F.when(ok, F.col("t"))).alias("t_last"),
                 *_last(CRASH), *_last(RESTART),
                 F.count(F.when(ok & (F.col("event") == DELIVER) & F.col("gseq").isNull(), 1))
                 .alias("no_gseq"),
                 F.count(F.when(ok & F.col("event").isin(NACK, SYNC_REQ), 1)).alias("requests")))
    for df in materialize:
        agg = agg.unionByName(df.agg(F.count(F.lit(1)).alias("_filled")),
                              allowMissingColumns=True)
    rows = [r for r in agg.collect() if r["_filled"] is None] if materialize else agg.collect()
    nodes: dict[tuple[Any, Any], dict[str, Any]] = {}
    orders: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for r in rows:
        n = nodes.setdefault((r["run"], r["node"]), {
            "run": r["run"], "node": r["node"], "events": 0, "malformed": 0, "unknown": 0,
            "messages": 0, "requests": 0, "scope": None, "t_first": None, "t_last": None,
            "crash_t": None, "crash_pos": None, "restart_t": None, "restart_pos": None})
        for k in ("events", "malformed", "unknown", "messages", "requests"):
            n[k] += r[k]
        n["scope"] = _pick(min, n["scope"], r["scope"])
        n["t_first"] = _pick(min, n["t_first"], r["t_first"])
        n["t_last"] = _pick(max, n["t_last"], r["t_last"])
        for event in (CRASH, RESTART):  # the node's last one: greatest (t, pos)
            t, pos = r[f"{event}_t"], r[f"{event}_pos"]
            if t is not None and (n[f"{event}_t"] is None
                                  or (t, pos) > (n[f"{event}_t"], n[f"{event}_pos"])):
                n[f"{event}_t"], n[f"{event}_pos"] = t, pos
        if r["events"] and r["run"] is not None and r["group"] is not None \
                and r["order"] is not None:
            o = orders.setdefault((r["run"], r["group"], r["order"]), {
                "run": r["run"], "group": r["group"], "order": r["order"], "no_gseq": 0})
            o["no_gseq"] += r["no_gseq"]
    return list(nodes.values()), list(orders.values())


def _pick(better: Any, a: Any, b: Any) -> Any:
    """``better(a, b)`` ignoring None (like SQL's min and max)."""
    return b if a is None else a if b is None else better(a, b)


def _last(event: str) -> list[Column]:
    """(t, pos) of the last ``event`` in a group of rows, as two numbers (hash-aggregatable)."""
    hit = F.col("ok") & (F.col("event") == event)
    return [F.max(F.when(hit, F.col("t"))).alias(f"{event}_t"),
            F.max_by(F.when(hit, F.col("pos")), F.when(hit, F.col("t")))
            .alias(f"{event}_pos")]


def group_orders(seen: list[dict[str, Any]]) -> list[tuple[str, str, str, int]]:
    """``(run, group, order, orders)``: the ordering each group asked for (a few rows).

    Taken from every event that names one. A group that shows several (a writer
    bug) is checked under the first in alphabetical order; ``orders`` says how many.
    """
    chosen: dict[tuple[str, str], list[str]] = {}
    for r in seen:
        chosen.setdefault((r["run"], r["group"]), []).append(r["order"])
    return [(run, group, min(o), len(o)) for (run, group), o in sorted(chosen.items())]


def with_order(df: DataFrame, tb: Tables, wanted: str) -> DataFrame:
    """Keep the rows of ``df`` whose group asked for ordering ``wanted``.

    The groups are known on the driver (a few rows), so this is a filter on literal
    (run, group) pairs (a hash-set lookup when there are many): a broadcast join
    with the group table would cost a Spark job of its own each time.
    """
    pairs = [(run, group) for run, group, order, _ in tb.group_rows if order == wanted]
    if not pairs:
        return df.filter(F.lit(False))
    wanted_groups = [F.struct(F.lit(run).alias("run"), F.lit(group).alias("group"))
                     for run, group in pairs]
    return df.filter(F.struct("run", "group").isin(*wanted_groups))


__all__ = ["Tables", "before", "build", "hashed", "message_key", "mid_origin", "mid_seq",
           "node_key", "with_order"]
