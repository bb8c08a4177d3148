"""Every check of docs/interfaces.md §5 on hand-made traces with known violations.

One trace directory holds several runs; each run shows one case. The whole set
goes through ``m2mc analyze`` once (exit status 1: there are violations), and
each test reads what it found for its run from the full violation tables.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from m2mc.cli import main

pytestmark = pytest.mark.spark


def _clean(T: Any) -> Any:
    """Every ordering honoured; C crashes and restarts and catches up."""
    tr = T("clean")
    for g, o in (("s", "sb"), ("c", "causal"), ("t", "total"), ("f", "fifo")):
        tr.join(0, g, o, "A", "B", "C")
    # S_b: C receives the reply before the question and holds it.
    tr.send("A", 1.0, "s", "A:1", order="sb")
    tr.get("B", 1.1, "s", "A:1")
    tr.send("B", 1.3, "s", "B:1", parent="A:1", order="sb")
    tr.get("A", 1.4, "s", "B:1")
    tr.ev("C", 1.4, "recv", "s", "B:1")
    tr.get("C", 1.6, "s", "A:1")
    tr.deliver("C", 1.6, "s", "B:1")
    # causal: B replies after delivering A:1; C holds B:1 until A:1.
    tr.send("A", 3.0, "c", "A:1", order="causal")
    tr.get("B", 3.1, "c", "A:1")
    tr.send("B", 3.2, "c", "B:1", order="causal")
    tr.get("A", 3.3, "c", "B:1")
    tr.ev("C", 3.3, "recv", "c", "B:1")
    tr.get("C", 3.4, "c", "A:1")
    tr.deliver("C", 3.4, "c", "B:1")
    # total: everyone delivers gseq 1 then 2.
    tr.send("A", 4.0, "t", "A:1", order="total", gseq=1)
    tr.get("B", 4.02, "t", "A:1", gseq=1)
    tr.get("C", 4.03, "t", "A:1", gseq=1)
    tr.send("B", 4.05, "t", "B:1", order="total", gseq=2)
    tr.get("A", 4.1, "t", "B:1", gseq=2)
    tr.get("C", 4.1, "t", "B:1", gseq=2)
    # fifo: B receives A:2 first and holds it.
    tr.send("A", 5.0, "f", "A:1", order="fifo")
    tr.send("A", 5.1, "f", "A:2", order="fifo")
    tr.ev("B", 5.15, "recv", "f", "A:2")
    tr.get("B", 5.2, "f", "A:1")
    tr.deliver("B", 5.2, "f", "A:2")
    tr.get("C", 5.12, "f", "A:1")
    tr.get("C", 5.13, "f", "A:2")
    # C crashes at 6 and restarts at 7: still a member, it must get A:2 (sent at 6.5).
    tr.ev("C", 6.0, "crash")
    tr.send("A", 6.5, "s", "A:2", order="sb")
    tr.get("B", 6.6, "s", "A:2")
    tr.ev("C", 7.0, "restart")
    tr.get("C", 7.5, "s", "A:2")
    return tr


def _cases(T: Any) -> dict[str, Any]:
    runs = {"clean": _clean(T)}

    dup = T("dup").join(0, "s", "sb", "A", "B")
    dup.send("A", 1.0, "s", "A:1", order="sb").get("B", 1.1, "s", "A:1")
    dup.deliver("B", 1.2, "s", "A:1")  # a second delivery: Jepsen's set checker misses it
    runs["dup"] = dup

    lost = T("lost").join(0, "s", "sb", "A", "B", "C")
    lost.send("A", 0.5, "s", "A:1", order="sb").get("B", 0.6, "s", "A:1")  # C never gets it
    lost.join(1.0, "s", "sb", "D")
    lost.send("A", 1.0, "s", "A:2", order="sb")  # sent at D's join time: D must get it
    lost.get("B", 1.1, "s", "A:2").get("C", 1.1, "s", "A:2")
    runs["lost"] = lost

    crash = T("crash").join(0, "s", "sb", "A", "B", "C")
    crash.send("A", 1.0, "s", "A:1", order="sb").get("B", 1.1, "s", "A:1")
    crash.ev("C", 2.0, "crash")  # never restarts: exempt
    crash.send("A", 3.0, "s", "A:2", order="sb").get("B", 3.1, "s", "A:2")
    runs["crash"] = crash

    leave = T("leave").join(0, "s", "sb", "A", "B", "C")
    leave.ev("C", 2.0, "leave", "s")
    leave.send("A", 3.0, "s", "A:1", order="sb").get("B", 3.1, "s", "A:1")  # C left: exempt
    leave.join(4.0, "s", "sb", "D")  # A:1 was sent before D joined: exempt
    leave.send("A", 5.0, "s", "A:2", order="sb").get("B", 5.1, "s", "A:2").get(
        "D", 5.1, "s", "A:2")
    runs["leave"] = leave

    sc = T("sender_crash").join(0, "s", "sb", "A", "B", "C")
    sc.send("A", 0.5, "s", "A:2", order="sb").get("B", 0.6, "s", "A:2")  # C must still get it
    sc.send("A", 1.0, "s", "A:1", order="sb")  # nobody else got it before A crashed: exempt
    sc.ev("A", 1.05, "crash")
    runs["sender_crash"] = sc

    unexp = T("unexpected").join(0, "s", "sb", "A", "B")
    unexp.deliver("B", 1.0, "s", "X:1")
    runs["unexpected"] = unexp

    sb = T("sb").join(0, "s", "sb", "A", "B")
    sb.send("A", 1.0, "s", "A:1", order="sb")
    sb.join(1.05, "s", "sb", "C")  # joins after A:1 was sent
    sb.send("A", 1.1, "s", "A:2", parent="A:1", order="sb")
    sb.get("B", 1.2, "s", "A:2").get("B", 1.3, "s", "A:1")  # child before parent
    sb.get("C", 1.2, "s", "A:2")  # parent never delivered at C
    sb.join(1.05, "s", "sb", "D")  # D too, but its group had evicted A:1: D skipped it
    sb.ev("D", 1.15, "skip", "s", "A:1").get("D", 1.2, "s", "A:2")  # in order
    runs["sb"] = sb

    ca = T("causal").join(0, "c", "causal", "A", "B", "C")
    ca.send("A", 1.0, "c", "A:1", order="causal").get("B", 1.1, "c", "A:1")
    ca.send("B", 1.2, "c", "B:1", order="causal", detail=json.dumps({"vclock": {"B": 1}}))
    ca.get("A", 1.3, "c", "B:1")
    ca.get("C", 1.3, "c", "B:1").get("C", 1.4, "c", "A:1")  # B:1 depends on A:1
    ca.send("A", 2.0, "c", "A:2", order="causal").send("A", 2.1, "c", "A:3", order="causal")
    ca.get("B", 2.2, "c", "A:3").get("B", 2.3, "c", "A:2")  # A:3 depends on A:2
    ca.get("C", 2.2, "c", "A:2").get("C", 2.3, "c", "A:3")
    runs["causal"] = ca

    to = T("total").join(0, "t", "total", "A", "B", "C")
    to.send("A", 1.0, "t", "A:1", order="total", gseq=1).get("B", 1.02, "t", "A:1", gseq=1)
    to.send("B", 1.05, "t", "B:1", order="total", gseq=2).get("A", 1.1, "t", "B:1", gseq=2)
    to.get("C", 1.1, "t", "B:1", gseq=2).get("C", 1.2, "t", "A:1", gseq=1)  # regress at C
    for g in ("t2", "t3", "t4"):
        to.join(0, g, "total", "A", "B")
    to.send("A", 3.0, "t2", "A:1", order="total", gseq=1)
    to.send("B", 3.1, "t2", "B:1", order="total", gseq=1)  # one gseq, two messages
    to.get("A", 3.2, "t2", "B:1", gseq=1).get("B", 3.2, "t2", "A:1", gseq=1)
    to.send("A", 4.0, "t3", "A:1", order="total", gseq=1)
    to.get("B", 4.1, "t3", "A:1", gseq=2)  # one message, two gseq
    to.send("A", 5.0, "t4", "A:1", order="total").send("A", 5.1, "t4", "A:2", order="total")
    to.get("B", 5.2, "t4", "A:2").get("B", 5.3, "t4", "A:1")  # no gseq: orders differ
    runs["total"] = to

    fi = T("fifo").join(0, "f", "fifo", "A", "B")
    for i, t in ((1, 1.0), (2, 1.1), (3, 1.2)):
        fi.send("A", t, "f", f"A:{i}", order="fifo")
    fi.get("B", 1.3, "f", "A:1").get("B", 1.4, "f", "A:3").get("B", 1.5, "f", "A:2")
    runs["fifo"] = fi
    return runs


_TYPES = pa.schema([("run", pa.string()), ("node", pa.string()), ("t", pa.float64()),
                    ("event", pa.string()), ("group", pa.string()), ("mid", pa.string()),
                    ("parent", pa.string()), ("order", pa.string()), ("gseq", pa.int64()),
                    ("bytes", pa.int64()), ("peer", pa.string()), ("detail", pa.string())])


@pytest.fixture(scope="module")
def analysed(spark: Any, make_trace: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("checks")
    traces = root / "traces"
    runs = _cases(make_trace)
    for name, tr in runs.items():
        tr.write(traces / name, {"run": name, "scenario": "cases", "seed": 1})
    # The crash run as Parquet only; the fifo run as JSONL plus a Parquet copy of B's
    # file (a trace writer's side-by-side copy: its events must be read once).
    crash_dir = traces / "crash"
    for f in crash_dir.glob("*.jsonl"):
        rows = [json.loads(x) for x in f.read_text().splitlines()]
        pq.write_table(pa.Table.from_pylist(rows, _TYPES), f.with_suffix(".parquet"))
        f.unlink()
    b = traces / "fifo" / "B.jsonl"
    pq.write_table(pa.Table.from_pylist([json.loads(x) for x in b.read_text().splitlines()],
                                        _TYPES), b.with_suffix(".parquet"))
    with (traces / "dup" / "B.jsonl").open("a") as fh:
        fh.write("this line is not JSON\n")
    out = root / "out"
    status = main(["analyze", str(traces), "--out", str(out), "--quiet"])
    verify = json.loads((out / "verify.json").read_text())
    found: dict[str, list[dict[str, Any]]] = {}
    for name in verify["checks"]:
        path = out / "tables" / f"violations_{name}.parquet"
        found[name] = pq.read_table(path).to_pylist() if path.exists() else []
    return {"status": status, "verify": verify, "found": found, "out": out}


def _runs(analysed: dict[str, Any], check: str) -> dict[str, list[dict[str, Any]]]:
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in analysed["found"][check]:
        by_run.setdefault(row["run"], []).append(row)
    return by_run


def _pairs(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(r["node"], r["mid"]) for r in rows}


def test_exit_status_and_verify_json_follow_the_contract(analysed: dict[str, Any]) -> None:
    v = analysed["verify"]
    assert analysed["status"] == 1
    assert v["valid"] is False
    assert list(v["checks"]) == ["unexpected", "duplicated", "lost", "sb_order", "causal_order",
                                 "total_order", "fifo_order"]
    for result in v["checks"].values():
        assert set(result) == {"violations", "examples"}
        assert len(result["examples"]) <= 5
        for example in result["examples"]:
            assert {"run", "node", "group", "mid"} <= set(example)
    assert v["counts"]["malformed"] == 1
    assert v["counts"]["runs"] == 11
    # The Parquet-only run was read, and the fifo run's Parquet copy was not read twice.
    assert v["checks"]["duplicated"]["violations"] == 1


def test_verify_only_gives_the_same_verdict_and_examples_and_nothing_else(
        analysed: dict[str, Any]) -> None:
    """``m2mc analyze --verify-only``: the same exit status, verify.json and violation
    examples as the whole analysis of the same traces; no metrics, report or tables."""
    full = analysed["out"]
    out = full.parent / "verify-only"
    status = main(["analyze", str(full.parent / "traces"), "--out", str(out), "--quiet",
                   "--verify-only"])
    assert status == analysed["status"] == 1
    assert json.loads((out / "verify.json").read_text()) == analysed["verify"]
    for name, rows in analysed["found"].items():
        path = out / "tables" / f"violations_{name}.parquet"
        assert (pq.read_table(path).to_pylist() if path.exists() else []) == rows, name
    assert not (out / "metrics.json").exists() and not (out / "report.html").exists()
    assert {p.name for p in (out / "tables").iterdir()} == {
        f"violations_{name}.parquet" for name, rows in analysed["found"].items() if rows}


def test_clean_run_has_no_violation(analysed: dict[str, Any]) -> None:
    for check in analysed["found"]:
        assert "clean" not in _runs(analysed, check), check


def test_duplicate_delivery_is_reported(analysed: dict[str, Any]) -> None:
    assert analysed["verify"]["checks"]["duplicated"]["violations"] == 1
    (row,) = _runs(analysed, "duplicated")["dup"]
    assert (row["node"], row["mid"], row["group"], row["deliveries"]) == ("B", "A:1", "s", 2)


def test_lost_messages_respect_membership_and_crashes(analysed: dict[str, Any]) -> None:
    by_run = _runs(analysed, "lost")
    assert _pairs(by_run.pop("lost")) == {("C", "A:1"), ("D", "A:2")}
    # The sender crashed for good: A:1 reached nobody before (exempt), A:2 reached B (not).
    assert _pairs(by_run.pop("sender_crash")) == {("C", "A:2")}
    # crash (C never restarts), leave (C left, D joined later), clean (restart): nothing.
    assert by_run == {}
    assert analysed["verify"]["checks"]["lost"]["violations"] == 3


def test_unexpected_delivery(analysed: dict[str, Any]) -> None:
    assert analysed["verify"]["checks"]["unexpected"]["violations"] == 1
    (row,) = _runs(analysed, "unexpected")["unexpected"]
    assert (row["node"], row["mid"]) == ("B", "X:1")


def test_sb_order_child_before_parent_and_parent_missing(analysed: dict[str, Any]) -> None:
    rows = _runs(analysed, "sb_order")
    assert set(rows) == {"sb"}
    problems = {(r["node"], r["mid"], r["parent"], r["problem"]) for r in rows["sb"]}
    assert problems == {("B", "A:2", "A:1", "parent delivered after child"),
                        ("C", "A:2", "A:1", "parent never delivered")}


def test_causal_order_uses_the_trace_not_vector_clocks(analysed: dict[str, Any]) -> None:
    rows = _runs(analysed, "causal_order")
    assert set(rows) == {"causal"}
    # B:1's vector clock claims no dependency; the trace says B delivered A:1 first.
    assert {(r["node"], r["mid"], r["dep"]) for r in rows["causal"]} == {
        ("C", "B:1", "A:1"), ("B", "A:3", "A:2")}


def test_total_order(analysed: dict[str, Any]) -> None:
    rows = _runs(analysed, "total_order")
    assert set(rows) == {"total"}
    seen = {(r["group"], r["node"], r["mid"], r["problem"]) for r in rows["total"]}
    assert ("t", "C", "A:1", "delivered after a message with a greater gseq") in seen
    assert ("t2", "A", "A:1", "gseq shared by several messages") in seen
    assert ("t3", "A", "A:1", "message has several gseq") in seen
    assert {s for s in seen if s[0] == "t4"} == {
        ("t4", "B", "A:1", "order differs from node A"),
        ("t4", "A", "A:2", "order differs from node B")}
    # t2: the shared gseq also makes each node's second delivery a regression.
    assert len(rows["total"]) == 7


def test_fifo_order(analysed: dict[str, Any]) -> None:
    rows = _runs(analysed, "fifo_order")
    assert set(rows) == {"fifo"}
    (row,) = rows["fifo"]
    assert (row["node"], row["mid"], row["delivered_after"]) == ("B", "A:2", "A:3")
