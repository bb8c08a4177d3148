"""Metrics against values computed by hand on small traces (docs/pipeline.md definitions).

The rows have the shape the real writers give them (src/m2mc/group/manager.py and
instance.py, src/m2mc/infra/member.py, the simulator's packet rows): a ``nack``
names no message in ``mid`` but sender ranges and gseq ranges in ``detail``; a
``sync_resp`` is written by the responder, ``peer`` naming the requester; a
suppressed request or response is an event whose detail says ``suppressed``.

Trace "m": three nodes A, B, C in one S_b group; C joins late and catches up.
Quantiles are nearest-rank (the ceil(q*n)-th smallest value).

    message  sent        at B (recv, deliver)   at C (recv, deliver)   at A
    A:1      A, t=0.0    0.1, 0.1               0.2, 0.5               own
    A:2      A, t=0.1    0.2, 0.4               0.3, 0.6               own
    B:1      B, t=2.0    own                    2.5, 3.0               2.1, 2.2

Delivery delays (deliver - recv), own deliveries included (recv = deliver):
0, 0.3, 0.2, 0.3, 0.1, 0.5 and 0, 0, 0 -> sorted 0,0,0,0,0.1,0.2,0.3,0.3,0.5.
Latencies (deliver at another node - send): 0.1, 0.5, 0.3, 0.5, 0.2, 1.0.

Repair: C's NACK at 2.3 names B's seqno 1 (again at 2.45: the first one counts);
B:1 reaches C at 2.5: one repair of 0.2. A's NACK at 2.35 was suppressed.
Catch-up: A and B ask at 0.0 (join) with nothing sent before; C joins at 0.15,
asks, and delivers A:1 (0.5) and A:2 (0.6), both sent before 0.15: 0.45.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.spark

PACKET = json.dumps({"domain": "lan", "iface": "net"}, separators=(",", ":"), sort_keys=True)


def _detail(**fields: Any) -> str:
    return json.dumps(fields, separators=(",", ":"), sort_keys=True)


def _nack(ranges: dict[str, list[list[int]]], gseq_ranges: list[list[int]] | None = None
          ) -> str:
    """The detail of a NACK the group layer sent (instance.py)."""
    gr = gseq_ranges or []
    return _detail(senders=sorted(ranges), intervals=sum(map(len, ranges.values())),
                   gseqs=len(gr), ranges=ranges, gseq_ranges=gr)


class Group:
    """Group-layer rows (manager.py ``_trace``) of one group."""

    def __init__(self, tr: Any, group: str, order: str) -> None:
        self.tr, self.group, self.order = tr, group, order

    def join(self, node: str, t: float, senders: int = 0) -> None:
        self.tr.ev(node, t, "join", self.group, order=self.order)
        self.tr.ev(node, t, "sync_req", self.group, order=self.order,
                   detail=_detail(senders=senders, sync_seqno=1))

    def msg(self, node: str, t: float, event: str, mid: str, parent: str = "",
            peer: str | None = None, gseq: int | None = None) -> None:
        self.tr.ev(node, t, event, self.group, mid, parent=parent, order=self.order,
                   bytes=10, peer=peer, gseq=gseq)

    def send(self, node: str, t: float, mid: str, parent: str = "",
             gseq: int | None = None) -> None:
        """send, then the sender's own recv (peer: itself) and deliver, as the sender does."""
        self.msg(node, t, "send", mid, parent)
        self.msg(node, t, "recv", mid, parent, peer=node)
        self.msg(node, t, "deliver", mid, parent, gseq=gseq)

    def get(self, node: str, t: float, mid: str, t_deliver: float | None = None,
            gseq: int | None = None) -> None:
        sender = mid.split(":")[0]
        self.msg(node, t, "recv", mid, peer=sender)
        if t_deliver is not None:
            self.msg(node, t_deliver, "deliver", mid, gseq=gseq)

    def control(self, node: str, t: float, event: str, peer: str | None = None,
                detail: str | None = None) -> None:
        self.tr.ev(node, t, event, self.group, order=self.order, peer=peer, detail=detail)


def _packet(tr: Any, node: str, t: float, size: int) -> None:
    tr.ev(node, t, "packet_out", bytes=size, detail=PACKET)


def _trace(T: Any) -> Any:
    tr = T("m")
    s = Group(tr, "s", "sb")
    s.join("A", 0.0)
    s.join("B", 0.0, senders=0)
    s.send("A", 0.0, "A:1")
    _packet(tr, "A", 0.0, 100)
    s.get("B", 0.1, "A:1", 0.1)
    s.send("A", 0.1, "A:2")
    _packet(tr, "A", 0.1, 100)
    s.join("C", 0.15)
    s.control("B", 0.18, "sync_resp", peer="C",
              detail=_detail(messages=2, remaining=0, sync_seqno=1))
    _packet(tr, "B", 0.18, 40)
    s.control("A", 0.19, "sync_resp", peer="C", detail=_detail(responses=1, suppressed=True))
    s.get("C", 0.2, "A:1", 0.5)
    s.get("B", 0.2, "A:2", 0.4)
    s.get("C", 0.3, "A:2", 0.6)
    s.send("B", 2.0, "B:1")
    _packet(tr, "B", 2.0, 50)
    s.get("A", 2.1, "B:1", 2.2)
    s.control("C", 2.3, "nack", detail=_nack({"B": [[1, 1]]}))
    _packet(tr, "C", 2.3, 20)
    s.control("A", 2.35, "nack", detail=_detail(suppressed=True))
    s.msg("B", 2.4, "retransmit", "B:1")
    _packet(tr, "B", 2.4, 30)
    s.control("C", 2.45, "nack", detail=_nack({"B": [[1, 1]]}))
    _packet(tr, "C", 2.45, 20)
    s.get("C", 2.5, "B:1", 3.0)
    return tr


def _repair_traces(T: Any) -> list[Any]:
    """Time to repair from sender ranges, gseq ranges and infrastructure mode's NACKs.

    Run "t" (group layer, total order; recv carries no gseq, deliver does):
      R misses the data of P:1: NACK at 1.2 for P's seqno 1 and gseq 1; P:1 arrives
        at 1.3 -> 0.1.
      R has P:2 (recv 2.01) but not its stamp: NACK at 2.2 for gseq 2; delivered at
        2.5 -> 0.3 (to the delivery: the data was there before the NACK).
      P:3 reaches nobody and P crashes: Q's NACK at 3.3 for P's seqno 3 is never
        answered (1 unrepaired); R's is suppressed.
    Run "i" (infrastructure mode: recv carries the gseq; member.py's NACK detail):
      M2 misses gseq 3 (M1:1), NACK at 1.2 for gseqs 3..3, transfer at 1.5 -> 0.3.
      M2 misses gseq 5 (M1:3), a NACK with only s1/s2 (as written before gseq_ranges),
        at 2.1 for 4 < gseq < 6; M1:3 arrives at 2.3 -> 0.2.
    Repairs 0.1, 0.2, 0.3, 0.3: count 4, p50 0.2, max 0.3, mean 0.225.
    """
    t = T("t")
    g = Group(t, "t", "total")
    for n in ("P", "Q", "R"):
        g.join(n, 0.0)
    g.send("P", 1.0, "P:1", gseq=1)
    g.get("Q", 1.01, "P:1", 1.02, gseq=1)
    g.control("R", 1.2, "nack", detail=_nack({"P": [[1, 1]]}, [[1, 1]]))
    g.get("R", 1.3, "P:1", 1.3, gseq=1)
    g.send("P", 2.0, "P:2", gseq=2)
    g.get("Q", 2.01, "P:2", 2.02, gseq=2)
    g.get("R", 2.01, "P:2")
    g.control("R", 2.2, "nack", detail=_nack({}, [[2, 2]]))
    g.msg("R", 2.5, "deliver", "P:2", gseq=2)
    g.send("P", 3.0, "P:3", gseq=3)
    t.ev("P", 3.05, "crash", detail=_detail(restart=None))
    g.control("Q", 3.3, "nack", detail=_nack({"P": [[3, 3]]}))
    g.control("R", 3.4, "nack", detail=_detail(suppressed=True))

    i = T("i")

    def infra(node: str, tt: float, event: str, mid: str | None = None,
              gseq: int | None = None, **fields: Any) -> None:
        i.ev(node, tt, event, "infra", mid, order="total", gseq=gseq, **fields)

    infra("M1", 0.5, "join", gseq=1, detail=_detail(member="M1/1"))
    infra("M2", 0.6, "join", gseq=2, detail=_detail(member="M2/1"))
    for k, (tt, gs) in enumerate(((1.0, 3), (1.1, 4), (2.0, 5), (2.05, 6)), 1):
        mid = f"M1:{k}"
        infra("M1", tt - 0.01, "send", mid, bytes=10)
        infra("M1", tt, "recv", mid, gs, bytes=10)
        infra("M1", tt, "deliver", mid, gs, bytes=10)
    infra("M2", 1.2, "recv", "M1:2", 4, bytes=10)
    infra("M2", 1.2, "nack", detail=_detail(gseq_ranges=[[3, 3]], s1=2, s2=4))
    infra("M2", 1.5, "recv", "M1:1", 3, bytes=10)
    infra("M2", 1.5, "deliver", "M1:1", 3, bytes=10)
    infra("M2", 1.5, "deliver", "M1:2", 4, bytes=10)
    infra("M2", 2.1, "recv", "M1:4", 6, bytes=10)
    infra("M2", 2.1, "nack", detail=_detail(s1=4, s2=6))
    infra("M2", 2.3, "recv", "M1:3", 5, bytes=10)
    infra("M2", 2.3, "deliver", "M1:3", 5, bytes=10)
    infra("M2", 2.3, "deliver", "M1:4", 6, bytes=10)
    return [t, i]


def _compute(spark: Any, dirs: list[Any], parallel: bool = False) -> dict[str, Any]:
    from m2mc_pipeline.load import load
    from m2mc_pipeline.metrics import compute
    from m2mc_pipeline.tables import build

    loaded = load(spark, dirs)
    tb = build(loaded.events)
    m = compute(tb, None, parallel=parallel)
    summary = dict(m.summary)
    summary["cdf_delay"] = m.cdf_delay
    tb.release()
    loaded.events.unpersist()
    return summary


@pytest.fixture(scope="module")
def metrics(spark: Any, make_trace: Any, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Any]:
    d = _trace(make_trace).write(tmp_path_factory.mktemp("metrics") / "m")
    return _compute(spark, [d])


def test_the_parts_side_by_side_measure_the_same(spark: Any, make_trace: Any, tmp_path: Any,
                                                metrics: dict[str, Any]) -> None:
    """compute(parallel=True), the small-trace path, without Parquet tables too."""
    assert _compute(spark, [_trace(make_trace).write(tmp_path / "m")], parallel=True) == metrics


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
    # Packets: A 100 + 100, B 40 (sync response) + 50 + 30 (retransmission), C 20 + 20.
    assert (row["messages"], row["packets"], row["packet_bytes"]) == (3, 7, 360)
    assert row["packets_traced"] is True
    assert row["packets_per_message"] == pytest.approx(7 / 3)
    assert row["msgs_per_op"] == pytest.approx(7 / 3)
    assert row["bytes_per_message"] == pytest.approx(120.0)
    assert row["bytes_ratio"] == pytest.approx(360 / 30)
    # Requests: three sync_req (joins) and C's two NACKs; A's NACK was suppressed.
    assert (row["requests"], row["suppressed"], row["retransmits"]) == (5, 1, 1)
    assert (row["sync_resps"], row["sync_resps_suppressed"]) == (1, 1)
    assert row["requests_per_message"] == pytest.approx(5 / 3)


def test_repair_time_from_nack_ranges(metrics: dict[str, Any]) -> None:
    rep = metrics["repair"]
    assert rep["repair_time"]["count"] == 1
    assert rep["repair_time"]["max"] == pytest.approx(0.2)  # first nack 2.3 -> recv 2.5
    assert rep["unrepaired"] == 0
    (run,) = rep["repair_time_by_run"]
    assert (run["run"], run["count"], run["unrepaired"]) == ("m", 1, 0)


def test_catch_up_time_of_a_late_joiner(metrics: dict[str, Any]) -> None:
    cat = metrics["repair"]["catchup_time"]
    assert cat["episodes"] == 3  # A, B and C each asked once after joining
    assert cat["count"] == 1  # only C had history to catch up on
    assert cat["max"] == pytest.approx(0.45)  # sync_req 0.15 -> A:2 delivered 0.6


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


def test_repair_time_from_gseq_ranges_and_infra_nacks(
        spark: Any, make_trace: Any, tmp_path: Any) -> None:
    dirs = [tr.write(tmp_path / tr.run) for tr in _repair_traces(make_trace)]
    rep = _compute(spark, dirs)["repair"]
    t = rep["repair_time"]
    assert t["count"] == 4
    assert t["p50"] == pytest.approx(0.2)
    assert t["max"] == pytest.approx(0.3)
    assert t["mean"] == pytest.approx(0.9 / 4)
    assert rep["unrepaired"] == 1  # Q's NACK of P:3
    by_run = {r["run"]: r for r in rep["repair_time_by_run"]}
    assert (by_run["t"]["count"], by_run["t"]["unrepaired"]) == (2, 1)
    assert (by_run["i"]["count"], by_run["i"]["max"]) == (2, pytest.approx(0.3))
