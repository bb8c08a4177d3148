"""Throughput over time, network overhead and repair (catch-up) effort, per run.

- throughput: deliveries (and sends) per time bucket; the bucket width is a
  round number (1, 2 or 5 times a power of ten seconds) giving at most 100
  buckets for the longest run.
- overhead: ``packet_out`` events (datagrams put on the network, every kind:
  data, control, retransmissions, redundant copies) and their bytes, per
  application message (``send``). ``msgs_per_op`` is the same count in
  Maelstrom's sense (network messages per client operation, here a broadcast);
  a multicast datagram counts once however many nodes it reaches.
- repair: ``nack`` and ``sync_req`` events are requests; those whose detail says
  ``"suppressed": true`` were suppressed, not sent. Time to repair: first
  ``recv`` of a message at a node after that node's first ``nack`` for it.
  Catch-up time: from a ``sync_req`` to the node's next ``sync_resp`` in the group.
"""

from __future__ import annotations

import math

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window

from m2mc_pipeline.schema import (
    DELIVER,
    DROP,
    DUP,
    NACK,
    PACKET_IN,
    PACKET_OUT,
    RETRANSMIT,
    SEND,
    SYNC_REQ,
    SYNC_RESP,
)

MAX_BUCKETS = 100


def nice_width(duration: float, max_buckets: int = MAX_BUCKETS) -> float:
    """The smallest 1/2/5 x 10^k width that cuts ``duration`` into at most ``max_buckets``."""
    if duration <= 0:
        return 1.0
    raw = duration / max_buckets
    exp = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        w = m * 10.0 ** exp
        if w >= raw:
            return float(w)
    return float(10.0 ** (exp + 1))  # pragma: no cover


def throughput(events: DataFrame) -> tuple[DataFrame, float]:
    """``(run, bucket, t_start, sends, deliveries)`` and the bucket width in seconds."""
    ev = events.filter(F.col("event").isin(SEND, DELIVER))
    spans = ev.groupBy("run").agg(F.min("t").alias("t0"), (F.max("t") - F.min("t")).alias("d"))
    longest = spans.agg(F.max("d")).collect()[0][0] or 0.0
    width = nice_width(float(longest))
    table = (ev.join(F.broadcast(spans.select("run", "t0")), "run")
             .withColumn("bucket", F.floor((F.col("t") - F.col("t0")) / width).cast("long"))
             .groupBy("run", "bucket")
             .agg(F.min("t0").alias("t0"),
                  F.count(F.when(F.col("event") == SEND, 1)).alias("sends"),
                  F.count(F.when(F.col("event") == DELIVER, 1)).alias("deliveries"))
             .select("run", "bucket", (F.col("t0") + F.col("bucket") * width).alias("t_start"),
                     "sends", "deliveries")
             .orderBy("run", "bucket"))
    return table, width


def throughput_summary(table: DataFrame, width: float) -> DataFrame:
    return (table.groupBy("run")
            .agg(F.sum("deliveries").alias("deliveries"), F.sum("sends").alias("sends"),
                 ((F.max("bucket") + 1) * width).alias("duration"),
                 (F.max("deliveries") / width).alias("peak_deliveries_per_s"))
            .select("run", "sends", "deliveries", "duration",
                    (F.col("deliveries") / F.col("duration")).alias("deliveries_per_s"),
                    "peak_deliveries_per_s")
            .orderBy("run"))


def _suppressed() -> Column:
    flag = F.get_json_object(F.col("detail"), "$.suppressed")
    return F.coalesce(flag.isin("true", "1"), F.lit(False))


def overhead(events: DataFrame) -> DataFrame:
    """Per run: application messages, packets, bytes and what they cost per message."""
    e = F.col("event")
    per_run = (events.groupBy("run").agg(
        F.count(F.when(e == SEND, 1)).alias("messages"),
        F.sum(F.when(e == SEND, F.col("bytes"))).alias("payload_bytes"),
        F.count(F.when(e == PACKET_OUT, 1)).alias("packets"),
        F.sum(F.when(e == PACKET_OUT, F.col("bytes"))).alias("packet_bytes"),
        F.count(F.when(e == PACKET_IN, 1)).alias("packets_in"),
        F.count(F.when(e == DROP, 1)).alias("drops"),
        F.count(F.when(e == DUP, 1)).alias("dups"),
        F.count(F.when(e == RETRANSMIT, 1)).alias("retransmits"),
        F.count(F.when(e.isin(NACK, SYNC_REQ) & ~_suppressed(), 1)).alias("requests"),
        F.count(F.when(e.isin(NACK, SYNC_REQ) & _suppressed(), 1)).alias("suppressed"),
        F.count(F.when(e == SYNC_RESP, 1)).alias("sync_resps")))
    per_msg = F.col("messages")
    # No packet_out at all means packets were not traced (the simulator's default),
    # not that none were sent: the per-message figures are then unknown (null).
    packets = F.when(F.col("packets") > 0, F.col("packets"))
    packet_bytes = F.when(F.col("packets") > 0, F.col("packet_bytes"))
    return (per_run.select(
        "*",
        F.try_divide(packets, per_msg).alias("packets_per_message"),
        F.try_divide(packet_bytes, per_msg).alias("bytes_per_message"),
        F.try_divide(packet_bytes, F.col("payload_bytes")).alias("bytes_ratio"),
        F.try_divide(packets, per_msg).alias("msgs_per_op"),
        F.try_divide(F.col("requests"), per_msg).alias("requests_per_message"))
        .orderBy("run"))


def repair_times(events: DataFrame, recvd: DataFrame) -> DataFrame:
    """``(run, node, group, mid, repair)``: first nack of a message at a node to its recv."""
    nacks = (events.filter((F.col("event") == NACK) & F.col("mid").isNotNull() & ~_suppressed())
             .groupBy("run", "node", "group", "mid").agg(F.min("t").alias("t_nack")))
    return (nacks.join(recvd.select("run", "node", "group", "mid", "t_recv"),
                       ["run", "node", "group", "mid"], "left")
            .select("run", "node", "group", "mid",
                    F.when(F.col("t_recv") >= F.col("t_nack"), F.col("t_recv") - F.col("t_nack"))
                    .alias("repair")))


def catchup_times(events: DataFrame) -> DataFrame:
    """``(run, node, group, catchup)``: each sync_req to the node's next sync_resp."""
    sync = events.filter(F.col("event").isin(SYNC_REQ, SYNC_RESP) & ~_suppressed())
    # Latest-first order with a growing frame: "the next response" without a frame
    # reaching to unbounded following (which Spark recomputes per row).
    w = Window.partitionBy("run", "node", "group").orderBy(F.desc("t"), F.desc("pos"))
    resp_t = F.when(F.col("event") == SYNC_RESP, F.col("t"))
    return (sync.withColumn("t_resp", F.last(resp_t, ignorenulls=True).over(
        w.rowsBetween(Window.unboundedPreceding, -1)))
        .filter(F.col("event") == SYNC_REQ)
        .select("run", "node", "group", (F.col("t_resp") - F.col("t")).alias("catchup")))
