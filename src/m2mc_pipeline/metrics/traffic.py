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
  ``"suppressed": true`` were suppressed, not sent (``sync_resp`` likewise for
  responses). Time to repair: per message a node's NACK covered (by sender range
  or gseq range in its detail), from that NACK to the message's arrival.
  Catch-up time: from a node's first ``sync_req`` after a join or restart to its
  last delivery, in that episode, of a message sent before the request.
"""

from __future__ import annotations

import math

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window

from m2mc_pipeline.schema import (
    DELIVER,
    DROP,
    DUP,
    JOIN,
    NACK,
    PACKET_IN,
    PACKET_OUT,
    RESTART,
    RETRANSMIT,
    SEND,
    SYNC_REQ,
    SYNC_RESP,
)
from m2mc_pipeline.tables import hashed, message_key, mid_origin, mid_seq, node_key

MAX_BUCKETS = 100
MAX_INTERVAL = 1 << 20  # seqnos (gseqs) counted per NACK interval: the group layer's max_seq_jump


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
        F.count(F.when((e == SYNC_RESP) & ~_suppressed(), 1)).alias("sync_resps"),
        F.sum(F.when((e == SYNC_RESP) & _suppressed(),
                     F.coalesce(F.get_json_object("detail", "$.responses").cast("long"),
                                F.lit(1)))).alias("sync_resps_suppressed")))
    per_msg = F.col("messages")
    # No packet_out at all means packets were not traced (the simulator's default),
    # not that none were sent: the per-message figures are then unknown (null).
    packets = F.when(F.col("packets") > 0, F.col("packets"))
    packet_bytes = F.when(F.col("packets") > 0, F.col("packet_bytes"))
    return (per_run.select(
        "*", (F.col("packets") > 0).alias("packets_traced"),
        F.try_divide(packets, per_msg).alias("packets_per_message"),
        F.try_divide(packet_bytes, per_msg).alias("bytes_per_message"),
        F.try_divide(packet_bytes, F.col("payload_bytes")).alias("bytes_ratio"),
        F.try_divide(packets, per_msg).alias("msgs_per_op"),
        F.try_divide(F.col("requests"), per_msg).alias("requests_per_message"))
        .orderBy("run"))


# The detail of a request event (docs/trace.md): the group layer's NACK names sender
# ranges (``ranges``: sender -> [[lo, hi], ...]) and total-order sequence numbers
# (``gseq_ranges``); infrastructure mode's NACK names gseqs (``gseq_ranges``; older
# traces only ``s1``/``s2``: the gseqs strictly between them).
_REQUEST_DETAIL = ("struct<ranges:map<string,array<array<bigint>>>,"
                   "gseq_ranges:array<array<bigint>>,s1:bigint,s2:bigint,"
                   "suppressed:boolean,responses:bigint>")


def _interval(iv: str) -> list[Column]:
    lo, hi = F.col(iv)[0], F.col(iv)[1]
    return [lo.alias("lo"), hi.alias("hi")]


def nack_intervals(events: DataFrame) -> tuple[DataFrame, DataFrame]:
    """What the sent NACKs asked for, one row per interval.

    ``(run, node, group, t_nack, origin, lo, hi)``: seqnos ``lo..hi`` of sender
    ``origin`` (a NACK that names one message in ``mid`` counts as that message's
    interval); ``(run, node, group, t_nack, lo, hi)``: gseqs ``lo..hi``.
    """
    keys = ["run", "node", "group", "t_nack"]
    nacks = (events.filter((F.col("event") == NACK) & ~_suppressed())
             .select("run", "node", "group", F.col("t").alias("t_nack"), "mid",
                     F.from_json("detail", _REQUEST_DETAIL).alias("d")))
    by_sender = (nacks.select(*keys, F.explode("d.ranges").alias("origin", "ivs"))
                 .select(*keys, "origin", F.explode("ivs").alias("iv"))
                 .select(*keys, "origin", *_interval("iv")))
    named = (nacks.filter(F.col("mid").isNotNull())
             .select(*keys, mid_origin().alias("origin"), mid_seq().alias("lo"),
                     mid_seq().alias("hi")))
    seqs = (by_sender.unionByName(named)
            .filter(F.col("lo").isNotNull() & (F.col("lo") <= F.col("hi"))))
    s1, s2 = F.col("d.s1"), F.col("d.s2")
    legacy = F.when(s2 - s1 > 1, F.array(F.array(s1 + 1, s2 - 1)))
    gseqs = (nacks.select(*keys, F.explode(F.coalesce(F.col("d.gseq_ranges"), legacy))
                          .alias("iv"))
             .select(*keys, *_interval("iv"))
             .filter(F.col("lo").isNotNull() & (F.col("lo") <= F.col("hi"))))
    return seqs, gseqs


def repair_times(events: DataFrame, recvd: DataFrame, dl: DataFrame) -> DataFrame:
    """Time to repair, per (node, message) a NACK of that node asked for (docs/pipeline.md).

    ``(run, node, group, mid, t_nack, t_repaired, repair, unrepaired)``:
    ``t_nack`` is the first of the node's NACKs that covered the message before it
    arrived, ``t_repaired`` the arrival: the message's first ``recv`` there, or,
    for a gseq asked for of a message the node already held (data received, stamp
    lost), its first ``deliver``. ``repair`` is null when no NACK preceded the
    arrival. ``unrepaired`` is 1 for a sender seqno NACKed and never received.

    Each interval is expanded into the seqnos (gseqs) it names, at most
    ``MAX_INTERVAL`` of them (as far as a writer may ask: the group layer's
    ``max_seq_jump``), so that matching them to receipts is an equi-join: sender
    seqnos become message ids and join the receipts by message and node key (where
    the receipts already are), gseqs join the deliveries by (run, node, group,
    gseq). One aggregation per (node, message) then combines both.
    """
    seq_iv, gseq_iv = nack_intervals(events)
    at = ["run", "node", "group"]

    def expand(df: DataFrame, *keep: str) -> DataFrame:
        hi = F.least(F.col("hi"), F.col("lo") + (MAX_INTERVAL - 1))
        return df.select(*at, "t_nack", *keep, F.explode(F.sequence("lo", hi)).alias("n"))

    asked = expand(seq_iv, "origin").select(
        *at, "t_nack", F.concat_ws(":", "origin", F.col("n").cast("string")).alias("mid"))
    by_seq = (asked.select(message_key().alias("mk"), node_key().alias("nk"), *at, "mid",
                           "t_nack")
              .join(hashed(recvd.select("mk", "nk", "t_recv")), ["mk", "nk"], "left")
              .select(*at, "mid", "t_nack", F.col("t_recv").alias("t_done"),
                      F.lit(1).alias("by_seq")))
    held = dl.filter(F.col("gseq").isNotNull()).select(*at, "mid", "gseq", "t_recv",
                                                       "t_deliver")
    by_gseq = (expand(gseq_iv).withColumnRenamed("n", "gseq").join(held, [*at, "gseq"])
               .select(*at, "mid", "t_nack",
                       F.when(F.col("t_recv") >= F.col("t_nack"), F.col("t_recv"))
                       .otherwise(F.col("t_deliver")).alias("t_done"),
                       F.lit(0).alias("by_seq")))
    valid = F.col("t_done") >= F.col("t_nack")
    return (by_seq.unionByName(by_gseq).groupBy(*at, "mid")
            .agg(F.min(F.when(valid, F.col("t_nack"))).alias("t_nack"),
                 F.max(F.when(valid, F.col("t_done"))).alias("t_repaired"),
                 F.max("by_seq").alias("by_seq"), F.count("t_done").alias("arrived"))
            .select(*at, "mid", "t_nack", "t_repaired",
                    (F.col("t_repaired") - F.col("t_nack")).alias("repair"),
                    F.when((F.col("by_seq") == 1) & (F.col("arrived") == 0), 1).otherwise(0)
                    .alias("unrepaired")))


def catchup_times(events: DataFrame, dl: DataFrame) -> DataFrame:
    """Catch-up episodes: ``(run, node, group, t_start, requests, messages, t_caught_up,
    catchup)`` (docs/pipeline.md).

    An episode starts at a node's first ``sync_req`` in a group after it joined the
    group or restarted (its retries belong to it) and lasts until the next episode.
    Its messages are those the node first delivered during the episode that were
    sent before it started: the history it was catching up on. ``catchup`` is the
    last such delivery minus the start (null when there was nothing to catch up).
    """
    e = F.col("event")
    marks = events.filter(e.isin(JOIN, RESTART) | ((e == SYNC_REQ) & ~_suppressed()))
    upto = Window.unboundedPreceding, Window.currentRow
    w_node = Window.partitionBy("run", "node").orderBy("t", "pos").rowsBetween(*upto)
    w_group = Window.partitionBy("run", "node", "group").orderBy("t", "pos").rowsBetween(*upto)
    in_group = (marks.withColumn("restarts", F.sum(F.when(e == RESTART, 1).otherwise(0))
                                 .over(w_node))
                .filter((e != RESTART) & F.col("group").isNotNull())
                .withColumn("joins", F.sum(F.when(e == JOIN, 1).otherwise(0)).over(w_group)))
    at = ["run", "node", "group"]
    episodes = (in_group.filter(e == SYNC_REQ)
                .groupBy(*at, "restarts", "joins")
                .agg(F.min("t").alias("t_start"), F.count(F.lit(1)).alias("requests"))
                .withColumn("t_end", F.lead("t_start").over(
                    Window.partitionBy(*at).orderBy("t_start")))
                .select(*at, "t_start", "t_end", "requests"))
    caught = (dl.select(*at, "t_send", "t_deliver")
              .join(episodes.select(*at, "t_start", "t_end"), at)
              .filter((F.col("t_send") < F.col("t_start"))
                      & (F.col("t_deliver") >= F.col("t_start"))
                      & (F.col("t_end").isNull() | (F.col("t_deliver") < F.col("t_end"))))
              .groupBy(*at, "t_start")
              .agg(F.count(F.lit(1)).alias("messages"),
                   F.max("t_deliver").alias("t_caught_up")))
    return (episodes.join(caught, [*at, "t_start"], "left")
            .select(*at, "t_start", "requests",
                    F.coalesce(F.col("messages"), F.lit(0)).alias("messages"),
                    "t_caught_up", (F.col("t_caught_up") - F.col("t_start")).alias("catchup")))
