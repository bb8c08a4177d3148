"""Which runs the comparison of orderings puts side by side (no Spark)."""

from __future__ import annotations

from m2mc_pipeline.compare import variant


def test_a_sweep_compares_orderings_per_loss_level_not_pooled() -> None:
    loss0 = variant("demo-compare", {"domains.lan.loss": 0.0, "groups.0.order": "sb"})
    loss2 = variant("demo-compare", {"domains.lan.loss": 0.2, "groups.0.order": "total"})
    assert loss0 == "demo-compare [domains.lan.loss=0.0]"
    assert loss2 == "demo-compare [domains.lan.loss=0.2]"
    # The ordering is what is compared: runs differing only in it share a variant.
    assert variant("demo-compare", {"domains.lan.loss": 0.0, "groups.0.order": "causal"}) \
        == loss0
    assert variant("x", {"ordering": "sb", "group.size": 4, "a.loss": 0.1}) \
        == "x [a.loss=0.1, group.size=4]"


def test_runs_outside_a_sweep_are_compared_by_scenario() -> None:
    assert variant("cmp", None) == "cmp"
    assert variant("cmp", {"groups.0.order": "sb"}) == "cmp"
    assert variant(None, None) == "(all runs)"
