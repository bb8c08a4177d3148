"""``sb_order`` (CONTRACTS section 5, seeds/003 III): a child is never delivered before its parent.

It applies to every group, whatever ordering the group asked for. For each
first delivery of a message m whose parent p is not the root (``""`` or null),
at node n: n must have delivered p, and its first delivery of p must come
before its first delivery of m in n's event order. The parent is the one the
sender declared in its ``send`` event.
"""

from __future__ import annotations

import pyspark.sql.functions as F

from m2mc_pipeline.checks.base import CheckResult, summarize
from m2mc_pipeline.tables import Tables


def sb_order(tb: Tables) -> CheckResult:
    children = (tb.sends.filter(F.col("parent").isNotNull() & (F.col("parent") != ""))
                .select("run", "group", "mid", "parent"))
    child = (tb.delivered.join(children, ["run", "group", "mid"])
             .select("run", "node", "group", "mid", "parent", "key"))
    parent = tb.delivered.select("run", "node", "group", F.col("mid").alias("parent"),
                                 F.col("key").alias("parent_key"))
    bad = (child.join(parent, ["run", "node", "group", "parent"], "left")
           .filter(F.col("parent_key").isNull() | (F.col("parent_key") > F.col("key")))
           .select("run", "node", "group", "mid", "parent",
                   F.col("key.t").alias("t_child"),
                   F.col("parent_key.t").alias("t_parent"),
                   F.when(F.col("parent_key").isNull(), "parent never delivered")
                   .otherwise("parent delivered after child").alias("problem")))
    return summarize("sb_order", bad, ["run", "node", "t_child", "mid"],
                     save_to=tb.violations_dir)
