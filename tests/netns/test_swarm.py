"""Real processes at scale, in CI: bench/swarm.py at N = 20 (issue 35, item 2).

Twenty member processes in twenty namespaces on one bridge, 10% loss on every link:
nineteen run an S_b, a causal and a total-order group in turn (three messages each),
then fill a history of 1,000 messages, and the twentieth joins late and catches up.
Every member must deliver every message exactly once and in order (the members'
own counts and the trace checks of tests/group/tracecheck.py), and the report must
hold its figures. A short soak of a few members checks the soak mode's report.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from netns_lab import LabUnavailable

pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nft") is None,
                                 reason="nftables is not installed (apt-get install nftables)")]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "swarm.py"
N = 20
SEND = 3
ORDERS = ["sb", "causal", "total"]
EXACT = {"short": 0, "duplicates": 0, "orphans": 0}


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("swarm_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


def run(argv: list[str], out: Path) -> dict[str, Any]:
    swarm = bench()
    args = swarm.parser().parse_args(argv)
    try:
        report: dict[str, Any] = (swarm.soak if args.soak else swarm.run)(args, out)
    except LabUnavailable as exc:
        pytest.skip(f"network namespace tests skipped: {exc}")
    print(report)
    return report


def test_twenty_processes_deliver_every_order_exactly_once_and_a_late_member_catches_up(
        tmp_path: Path) -> None:
    report = run(["--members", str(N), "--send", str(SEND), "--idle", "5"], tmp_path)
    assert report["checks"]["tracecheck"] == dict.fromkeys(
        ["unexpected", "duplicated", "lost", "sb_order", "causal_order", "total_order"], 0)
    assert sorted(report["orders"]) == sorted(ORDERS)
    for order, figures in report["orders"].items():
        messages = (N - 1) * SEND
        assert figures["messages"] == messages, order
        assert figures["members_counted"] == EXACT, (order, figures)
        assert figures["delivered_exactly_once_in_order"] is True, (order, figures)
        # Each message goes out at least once in some datagram, and 10% loss is repaired
        # without every member answering every loss (the bounds are loose: a busy machine).
        assert 1 / (N - 1) <= figures["datagrams_per_message_per_member"] < 5, figures
        assert 0 < figures["received_per_message_per_member"] < 5 * N, figures
        assert 1 < figures["air_per_payload"] < 100, figures
        assert figures["datagrams"] >= figures["frames"]["Data"] > 0, figures
        rates = figures["per_second"]
        assert set(rates) >= {"nack", "sync_req", "adv", "status", "repair"}, rates
        assert all(rate >= 0 for rate in rates.values()), rates
    late = report["late_join"]
    assert late["history"] == 1000
    assert late["members_counted"] == EXACT, late
    assert late["history_phase"]["members_counted"] == EXACT, late
    assert 0 < late["join_to_caught_up_s"] <= late["start_to_caught_up_s"] < 300, late
    assert late["frames"].get("SyncResp", 0) + late["frames"].get("Repair", 0) > 0, late
    quiet = report["idle"]  # everyone silent: statuses keep the group alive
    assert quiet["members"] == N and quiet["per_second"]["status"] > 0, quiet
    peak = report["peak_rss_mib"]
    assert 10 < peak["min"] <= peak["median"] <= peak["max"] < 1024, peak


def test_soak_reports_memory_and_disk_growth(tmp_path: Path) -> None:
    report = run(["--members", "3", "--soak", "6", "--sample", "2", "--rate", "6"], tmp_path)
    assert report["delivered_exactly_once_in_order"] is True, report
    assert report["members_counted"] == EXACT
    assert report["messages"] > 0
    assert len(report["series"]) >= 3
    for t, median, largest, anon, disk, wal in report["series"]:
        assert t >= 0 and 10 < median <= largest < 1024 and 0 < anon < largest and disk > 0
        assert 0 <= wal < disk  # the largest member's log, in all the directories
    for what in ("rss_mib", "rss_anon_mib", "data_dir_mib", "database_mib", "wal_mib"):
        assert set(report[what]["growth_per_hour"]) == {"median", "max", "min"}, report[what]
    wal = report["wal_mib"]
    assert wal["peak"].get("max", 0) >= wal["last"].get("max", 0), wal  # ({}: all empty)
    for counted in ("started_over", "cut_back"):  # (the header's count; the file's shrinks)
        assert set(wal[counted]) == {"n000", "n001", "n002"}, wal
        assert all(count >= 0 for count in wal[counted].values()), wal
    assert "wal_starts_mib" not in report  # a count, not a size
    assert report["traffic"]["per_second"]["status"] > 0
