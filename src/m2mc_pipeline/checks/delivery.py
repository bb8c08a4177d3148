"""Delivery checks of docs/interfaces.md §5: ``unexpected``, ``duplicated``, ``lost``.

A message is identified by ``(run, group, mid)``. Definitions (docs/pipeline.md):

- unexpected: node n delivered m, and no ``send`` of m exists in the trace.
- duplicated: node n delivered m more than once (one violation per (n, m)).
- lost: m was sent at ``t_send`` while n was a member of the group
  (``join_t <= t_send <= leave_t``), and n never delivered m. Exempt: every
  message for a node that crashed and never restarted; every message whose
  sender crashed for good before any other node delivered it.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import DataFrame

from m2mc_pipeline.checks.base import Check
from m2mc_pipeline.tables import Tables, hashed, node_key


def unexpected(tb: Tables) -> Check:
    bad = (tb.delivered.join(hashed(tb.sends.select("mk")), "mk", "left_anti")
           .select("run", "node", "group", "mid", F.col("t").alias("t_deliver")))
    return Check("unexpected", bad, ["run", "node", "t_deliver", "mid"], tb.violations_dir)


def duplicated(tb: Tables) -> Check:
    bad = (tb.delivered.filter(F.col("n") > 1)
           .select("run", "node", "group", "mid", F.col("n").alias("deliveries"),
                   F.col("t").alias("t_first")))
    return Check("duplicated", bad, ["run", "node", "t_first", "mid"], tb.violations_dir)


def expected_deliveries(tb: Tables, self_delivery: bool = True) -> DataFrame:
    """``(mk, nk, run, group, mid, node, sender, t_send)``: who had to deliver what.

    Every member at send time, the sender included when ``self_delivery`` (the
    S_b sender delivers its own message locally, seeds/003 IV). Exemptions of
    crashed nodes and senders are not applied here.
    """
    iv = tb.intervals
    members = (tb.sends.alias("s")
               .join(F.broadcast(iv.alias("i")),
                     (F.col("s.run") == F.col("i.run")) & (F.col("s.group") == F.col("i.group"))
                     & (F.col("i.join_t") <= F.col("s.t_send"))
                     & (F.col("i.leave_t").isNull() | (F.col("s.t_send") <= F.col("i.leave_t"))))
               .select("s.mk", node_key("s.run", "i.node").alias("nk"), "s.run", "s.group",
                       "s.mid", "i.node", "s.sender", "s.t_send"))
    if not self_delivery:
        members = members.filter(F.col("node") != F.col("sender"))
    return members


def exempt_messages(tb: Tables) -> DataFrame:
    """``(mk)`` of messages whose sender crashed for good before any node other than
    the sender delivered them."""
    gone = tb.gone.select("run", F.col("node").alias("sender"), "crash_t")
    doomed = tb.sends.join(F.broadcast(gone), ["run", "sender"]).select("mk", "nk", "crash_t")
    first_elsewhere = (tb.delivered.select("mk", F.col("nk").alias("at"), "t")
                       .join(F.broadcast(doomed), "mk")
                       .filter(F.col("at") != F.col("nk"))
                       .groupBy("mk").agg(F.min("t").alias("first_t")))
    return (doomed.join(first_elsewhere, "mk", "left")
            .filter(F.col("first_t").isNull() | (F.col("first_t") > F.col("crash_t")))
            .select("mk"))


def lost(tb: Tables, self_delivery: bool = True) -> Check:
    expected = expected_deliveries(tb, self_delivery)
    if tb.anyone_gone:
        expected = expected.join(F.broadcast(tb.gone.select("run", "node")), ["run", "node"],
                                 "left_anti")
        expected = expected.join(exempt_messages(tb), "mk", "left_anti")
    bad = expected.join(hashed(tb.delivered.select("mk", "nk")), ["mk", "nk"], "left_anti")
    return Check("lost", bad.select("run", "node", "group", "mid", "sender", "t_send"),
                 ["run", "node", "t_send", "mid"], tb.violations_dir)
