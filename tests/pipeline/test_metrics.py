"""Metrics against values computed by hand on a small trace (docs/pipeline.md definitions).

Three nodes A, B, C in one S_b group; quantiles are nearest-rank (the
ceil(q*n)-th smallest value).

    message  sent        at B (recv, deliver)   at C (recv, deliver)   at A
    A:1      A, t=0.0    0.1, 0.1               0.2, 0.5               own
    A:2      A, t=0.1    0.2, 0.4               0.3, 0.6               own
    B:1      B, t=2.0    own                    2.5, 3.0               2.1, 2.2

Delivery delays (deliver - recv), own deliveries included (recv = deliver):
0, 0.3, 0.2, 0.3, 0.1, 0.5 and 0, 0, 0 -> sorted 0,0,0,0,0.1,0.2,0.3,0.3,0.5.
Latencies (deliver at another node - send): 0.1, 0.5, 0.3, 0.5, 0.2, 1.0.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.spark


def _trace(T: Any) -> Any:
    tr = T("m").join(0.0, "s", "sb", "A", "B", "C")
    tr.send("A", 0.0, "s", "A:1", order="sb")
    tr.ev("A", 0.0, "packet_out", bytes=100)
    tr.get("B", 0.1, "s", "A:1")
    tr.send("A", 0.1, "s", "A:2", order="sb")
    tr.ev("A", 0.1, "packet_out", bytes=100)
    tr.get("C", 0.2, "s", "A:1", t_deliver=0.5)
    tr.get("B", 0.2, "s", "A:2", t_deliver=0.4)
    tr.get("C", 0.3, "s", "A:2", t_deliver=0.6)
    tr.send("B", 2.0, "s", "B:1", order="sb")
    tr.ev("B", 2.0, "packet_out", bytes=50)
    tr.ev("C", 2.0, "sync_req", "s")
    tr.get("A", 2.1, "s", "B:1", t_deliver=2.2)
    tr.ev("C", 2.3, "nack", "s", "B:1", peer="B")
    tr.ev("C", 2.3, "packet_out", bytes=20)
    tr.ev("A", 2.35, "nack", "s", "B:1", detail='{"suppressed": true}')
    tr.ev("B", 2.4, "retransmit", "s", "B:1")
    tr.ev("B", 2.4, "packet_out", bytes=30)
    tr.ev("C", 2.4, "sync_resp", "s")
    tr.get("C", 2.5, "s", "B:1", t_deliver=3.0)
    return tr


@pytest.fixture(scope="module")
def metrics(spark: Any, make_trace: Any, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Any]:
    from m2mc_pipeline.load import load
    from m2mc_pipeline.metrics import compute
    from m2mc_pipeline.tables import build

    d = _trace(make_trace).write(tmp_path_factory.mktemp("metrics") / "m")
    loaded = load(spark, [d])
    tb = build(loaded.events)
    m = compute(tb, None)
    summary = dict(m.summary)
    summary["cdf_delay"] = m.cdf_delay
    tb.release()
    loaded.events.unpersist()
    return summary


def test_delivery_delay_quantiles(metrics: dict[str, Any]) -> None:
    (row,) = metrics["delivery_delay"]["by_order"]
    assert row["order"] == "sb"
    assert row["count"] == 9
    assert row["p50"] == pytest.approx(0.1)
    assert row["p90"] == pytest.approx(0.5)
    assert row["p99"] == pytest.approx(0.5)
    assert row["max"] == pytest.approx(0.5)
    assert row["mean"] == pytest.approx(1.4 / 9)


def test_delivery_delay_by_node(metrics: dict[str, Any]) -> None:
    rows = {r["node"]: r for r in metrics["delivery_delay"]["by_node"]["rows"]}
    assert rows["C"]["count"] == 3  # 0.3, 0.3, 0.5
    assert rows["C"]["p50"] == pytest.approx(0.3)
    assert rows["C"]["max"] == pytest.approx(0.5)
    assert rows["B"]["max"] == pytest.approx(0.2)  # 0, 0.2 and its own 0


def test_latency_quantiles(metrics: dict[str, Any]) -> None:
    (row,) = metrics["latency"]["by_order"]
    assert row["count"] == 6
    assert row["p50"] == pytest.approx(0.3)
    assert row["p90"] == pytest.approx(1.0)
    assert row["max"] == pytest.approx(1.0)
    assert row["mean"] == pytest.approx(2.6 / 6)


def test_overhead_per_application_message(metrics: dict[str, Any]) -> None:
    (row,) = metrics["overhead"]["by_run"]
    assert (row["messages"], row["packets"], row["packet_bytes"]) == (3, 5, 300)
    assert row["packets_per_message"] == pytest.approx(5 / 3)
    assert row["msgs_per_op"] == pytest.approx(5 / 3)
    assert row["bytes_per_message"] == pytest.approx(100.0)
    assert row["bytes_ratio"] == pytest.approx(300 / 30)
    assert (row["requests"], row["suppressed"], row["retransmits"]) == (2, 1, 1)


def test_repair_and_catch_up_times(metrics: dict[str, Any]) -> None:
    rep = metrics["repair"]
    assert rep["repair_time"]["count"] == 1
    assert rep["repair_time"]["max"] == pytest.approx(0.2)  # nack 2.3 -> recv 2.5
    assert rep["catchup_time"]["max"] == pytest.approx(0.4)  # sync_req 2.0 -> sync_resp 2.4
    assert rep["unrepaired"] == 0


def test_out_of_sequence_store_occupancy(metrics: dict[str, Any]) -> None:
    rows = {r["node"]: r for r in metrics["osms_occupancy"]["by_node"]["rows"]}
    # C holds A:1 (0.2-0.5) and A:2 (0.3-0.6) at once, then B:1 (2.5-3.0).
    assert rows["C"]["max"] == 2
    assert rows["C"]["mean"] == pytest.approx((0.1 + 2 * 0.2 + 0.1 + 0.5) / 2.8)
    assert rows["B"]["max"] == 1


def test_throughput_buckets(metrics: dict[str, Any]) -> None:
    tp = metrics["throughput"]
    assert tp["bucket_s"] == pytest.approx(0.05)  # 3 s cut into at most 100 buckets
    (row,) = tp["by_run"]
    assert (row["sends"], row["deliveries"]) == (3, 9)
    # Busiest bucket: [0.10, 0.15) holds A:2 at A and A:1 at B.
    assert row["peak_deliveries_per_s"] == pytest.approx(2 / 0.05)


def test_delay_distribution_for_plots(metrics: dict[str, Any]) -> None:
    cdf = metrics["cdf_delay"]["sb"]
    assert len(cdf) == 100
    assert cdf == sorted(cdf)
    assert cdf[-1] == pytest.approx(0.5)
