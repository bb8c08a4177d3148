"""Delivery checks of CONTRACTS section 5: ``unexpected``, ``duplicated``, ``lost``.

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

from m2mc_pipeline.checks.base import CheckResult, summarize
from m2mc_pipeline.tables import Tables

MSG = ["run", "group", "mid"]


def unexpected(tb: Tables) -> CheckResult:
    bad = (tb.delivered.join(tb.sends.select(*MSG), MSG, "left_anti")
           .select("run", "node", "group", "mid", F.col("t").alias("t_deliver")))
    return summarize("unexpected", bad, ["run", "node", "t_deliver", "mid"],
                     save_to=tb.violations_dir)


def duplicated(tb: Tables) -> CheckResult:
    bad = (tb.delivered.filter(F.col("n") > 1)
           .select("run", "node", "group", "mid", F.col("n").alias("deliveries"),
                   F.col("t").alias("t_first")))
    return summarize("duplicated", bad, ["run", "node", "t_first", "mid"],
                     save_to=tb.violations_dir)


def expected_deliveries(tb: Tables, self_delivery: bool = True) -> DataFrame:
    """``(run, group, mid, node, sender, t_send)``: who had to deliver each message.

    Every member at send time, the sender included when ``self_delivery`` (the
    S_b sender delivers its own message locally, seeds/003 IV). Exemptions of
    crashed nodes and senders are not applied here.
    """
    iv = tb.intervals
    members = (tb.sends.alias("s")
               .join(iv.alias("i"),
                     (F.col("s.run") == F.col("i.run")) & (F.col("s.group") == F.col("i.group"))
                     & (F.col("i.join_t") <= F.col("s.t_send"))
                     & (F.col("i.leave_t").isNull() | (F.col("s.t_send") <= F.col("i.leave_t"))))
               .select("s.run", "s.group", "s.mid", "i.node", "s.sender", "s.t_send"))
    if not self_delivery:
        members = members.filter(F.col("node") != F.col("sender"))
    return members


def exempt_messages(tb: Tables) -> DataFrame:
    """``(run, group, mid)`` of messages whose sender crashed for good before any
    node other than the sender delivered them."""
    gone = tb.gone.select("run", F.col("node").alias("sender"), "crash_t")
    doomed = tb.sends.join(F.broadcast(gone), ["run", "sender"]).select(*MSG, "sender",
                                                                         "crash_t")
    first_elsewhere = (tb.delivered.join(F.broadcast(doomed), MSG)
                       .filter(F.col("node") != F.col("sender"))
                       .groupBy(*MSG).agg(F.min("t").alias("first_t")))
    return (doomed.join(first_elsewhere, MSG, "left")
            .filter(F.col("first_t").isNull() | (F.col("first_t") > F.col("crash_t")))
            .select(*MSG))


def lost(tb: Tables, self_delivery: bool = True) -> CheckResult:
    expected = expected_deliveries(tb, self_delivery)
    expected = expected.join(F.broadcast(tb.gone.select("run", "node")), ["run", "node"],
                             "left_anti")
    expected = expected.join(exempt_messages(tb), MSG, "left_anti")
    bad = expected.join(tb.delivered.select("run", "node", "group", "mid"),
                        ["run", "node", "group", "mid"], "left_anti")
    return summarize("lost", bad.select("run", "node", "group", "mid", "sender", "t_send"),
                     ["run", "node", "t_send", "mid"], save_to=tb.violations_dir)
