"""``sb_order`` (docs/interfaces.md §5, seeds/003 III): a child is never delivered before
its parent.

It applies to every group, whatever ordering the group asked for. For each
first delivery of a message m whose parent p is not the root (``""`` or null),
at node n: n must have delivered p, and its first delivery of p must come
before its first delivery of m in n's event order. The parent is the one the
sender declared in its ``send`` event. A parent n *skipped* (a ``skip`` event:
gone from every log that answered, docs/group.md section 8) takes the place of
its delivery: its replies may follow the skip.
"""

from __future__ import annotations

import pyspark.sql.functions as F

from m2mc_pipeline.checks.base import Check
from m2mc_pipeline.schema import SKIP
from m2mc_pipeline.tables import Tables, before, hashed, message_key, node_key


def sb_order(tb: Tables) -> Check:
    children = tb.sends.filter(F.col("pk").isNotNull()).select("mk", "pk", "parent")
    child = (tb.delivered.join(hashed(children), "mk")
             .select("run", "node", "group", "mid", "parent", "pk", "nk", "t", "pos"))
    parent = tb.delivered.select(F.col("mk").alias("pk"), "nk", F.col("t").alias("parent_t"),
                                 F.col("pos").alias("parent_pos"))
    skipped = (tb.events.filter((F.col("event") == SKIP) & F.col("mid").isNotNull())
               .select(message_key().alias("pk"), node_key().alias("nk"),
                       F.col("t").alias("parent_t"), F.col("pos").alias("parent_pos")))
    parent = parent.unionByName(skipped)
    never = F.col("parent_t").isNull()
    bad = (child.join(hashed(parent), ["pk", "nk"], "left")
           .filter(never | before("t", "pos", "parent_t", "parent_pos"))
           .select("run", "node", "group", "mid", "parent",
                   F.col("t").alias("t_child"), F.col("parent_t").alias("t_parent"),
                   F.when(never, "parent never delivered")
                   .otherwise("parent delivered after child").alias("problem")))
    return Check("sb_order", bad, ["run", "node", "t_child", "mid"], tb.violations_dir)
