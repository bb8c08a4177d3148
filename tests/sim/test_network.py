"""The network model: every configured fault fires, and its effect is in the trace."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from typing import Any

import pytest

from m2mc.sim.node import Outgoing


def drops(rows: list[Any], reason: str | None = None) -> list[Any]:
    return [r for r in rows if r.event == "drop"
            and (reason is None or json.loads(r.detail)["reason"] == reason)]


def burst(kit: Any, node: str = "n0", count: int = 200, spacing: float = 0.01,
          start: float = 0.5) -> None:
    for i in range(count):
        kit.send_at(start + i * spacing, node, f"m{i}".encode())


def test_clean_broadcast_reaches_every_other_node_once_plus_loopback(kit: Any, lan: Any) -> None:
    kit.build(lan(delay=0.002))
    kit.send_at(1.0, "n1", b"hello")
    rows = kit.finish()
    assert not drops(rows)
    for node in ("n0", "n2", "n3"):
        assert kit.probes[node].arrivals == [(1.002, b"hello")]
    # the sender hears its own broadcast (multicast loopback), after loopback_delay
    assert kit.probes["n1"].arrivals == [(1.0 + 1e-5, b"hello")]


def test_independent_loss_rate_and_drop_events(kit: Any, lan: Any) -> None:
    kit.build(lan(loss=0.25))
    burst(kit, count=400)
    rows = kit.finish()
    lost = drops(rows, "loss")
    assert len(lost) == kit.sim.counters["drops_loss"]
    assert 0.18 < len(lost) / (400 * 3) < 0.32
    # a drop is written by the node that missed the packet, naming the sender
    assert {r.node for r in lost} == {"n1", "n2", "n3"} and {r.peer for r in lost} == {"n0"}
    assert all(r.bytes and r.bytes > 0 for r in lost)


def test_gilbert_elliott_losses_come_in_bursts(kit: Any, lan: Any) -> None:
    ge = {"model": "gilbert-elliott", "p_good_bad": 0.05, "p_bad_good": 0.2,
          "loss_good": 0.0, "loss_bad": 1.0}
    kit.build(lan(loss=ge))
    burst(kit, count=1000, spacing=0.005)
    rows = kit.finish()
    assert drops(rows, "burst") and not drops(rows, "loss")
    got = [p for _, p in kit.probes["n1"].arrivals]
    lost = [i for i in range(1000) if f"m{i}".encode() not in got]
    runs = sum(1 for i in lost if i - 1 not in lost)
    assert len(lost) / runs > 2.5  # mean burst length 1/p_bad_good = 5: losses cluster


def test_duplication_delivers_extra_copies(kit: Any, lan: Any) -> None:
    kit.build(lan(duplicate=0.3))
    burst(kit, count=200)
    kit.finish()
    extra = sum(len(kit.probes[n].arrivals) - 200 for n in ("n1", "n2", "n3"))
    assert extra == kit.sim.counters["duplicated"]
    assert 0.2 < extra / 600 < 0.4


def test_reordering_changes_arrival_order(kit: Any, lan: Any) -> None:
    kit.build(lan(reorder=0.3, reorder_delay=0.05))
    burst(kit, count=200, spacing=0.005)
    kit.finish()
    got = [int(p[1:]) for _, p in kit.probes["n2"].arrivals]
    assert sorted(got) == list(range(200))
    assert got != sorted(got) and kit.sim.counters["reordered"] > 0


def test_delay_distributions_have_their_means(kit: Any, lan: Any) -> None:
    dists = {
        "uniform": ({"dist": "uniform", "low": 0.01, "high": 0.03}, 0.02),
        "exponential": ({"dist": "exponential", "mean": 0.02, "min": 0.001}, 0.021),
        "lognormal": ({"dist": "lognormal", "median": 0.01, "sigma": 0.5}, 0.01 * 1.1331),
        "constant": (0.015, 0.015),
    }
    for name, (dist, mean) in dists.items():
        kit.probes.clear()
        kit.tmp_path = kit.tmp_path / name
        kit.build(lan(delay=dist))
        burst(kit, count=500, spacing=0.1, start=0.0)
        kit.finish(until=60.0)
        delays = [t - i * 0.1 for i, (t, _) in enumerate(kit.probes["n1"].arrivals)]
        assert statistics.mean(delays) == pytest.approx(mean, rel=0.12), name


def test_fifo_domain_never_reorders_a_link(kit: Any, lan: Any) -> None:
    kit.build(lan(fifo=True, delay={"dist": "exponential", "mean": 0.05}))
    burst(kit, count=300, spacing=0.001)
    kit.finish()
    got = [int(p[1:]) for _, p in kit.probes["n3"].arrivals]
    assert got == list(range(300))


def test_capacity_overflow_drops_at_the_sender(kit: Any, lan: Any) -> None:
    # 1000 bytes/s and a 5-packet queue: 20 x 100-byte packets at once overflow
    kit.build(lan(capacity={"rate": 1000.0, "queue": 5}))
    for i in range(20):
        kit.send_at(1.0, "n0", bytes(100) + bytes([i]))
    rows = kit.finish()
    cap = drops(rows, "capacity")
    assert len(cap) == 15 and {r.node for r in cap} == {"n0"}
    times = [t for t, _ in kit.probes["n1"].arrivals]
    assert len(times) == 5  # serialised: 101 bytes at 1000 B/s is 0.101 s each
    assert times[1] - times[0] == pytest.approx(0.101)


def test_symmetric_partition_cuts_both_ways_then_heals(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["faults"] = {"partition": [{"sides": [["n0", "n1"]], "at": 2.0, "until": 4.0}]}
    kit.build(sc)
    for t in (1.0, 3.0, 5.0):
        kit.send_at(t, "n0", f"a{t}".encode())
        kit.send_at(t, "n2", f"b{t}".encode())
    rows = kit.finish()
    # n2 and n3 form the implicit second side
    assert [p for _, p in kit.probes["n3"].arrivals] == [
        b"a1.0", b"b1.0", b"b3.0", b"a5.0", b"b5.0"]
    assert b"b3.0" not in [p for _, p in kit.probes["n1"].arrivals]
    assert [p for _, p in kit.probes["n1"].arrivals].count(b"a3.0") == 1  # same side: fine
    cut = drops(rows, "partition")
    assert len(cut) == 4  # a3 to n2, n3; b3 to n0, n1
    assert all(2.0 <= r.t <= 4.0 for r in cut)


def test_one_way_partition_blocks_one_direction_only(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["faults"] = {"partition": [{"kind": "one-way", "from": ["n0"], "to": ["n1"],
                                   "at": 0.0}]}
    kit.build(sc)
    kit.send_at(1.0, "n0", b"x")
    kit.send_at(1.0, "n1", b"y")
    rows = kit.finish()
    assert kit.probes["n1"].arrivals[-1:] == [(1.0 + 1e-5, b"y")]  # only its own loopback
    assert (1.001, b"y") in kit.probes["n0"].arrivals
    (cut,) = drops(rows, "partition")
    assert (cut.node, cut.peer) == ("n1", "n0")


def test_asymmetric_partition_loses_more_one_way(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["faults"] = {"partition": [{"kind": "asymmetric", "from": ["n0"], "to": ["n1"],
                                   "loss": 0.8, "reverse_loss": 0.1, "at": 0.0}]}
    kit.build(sc)
    burst(kit, node="n0", count=300)
    burst(kit, node="n1", count=300)
    rows = kit.finish()
    per_dir = Counter((r.peer, r.node) for r in drops(rows, "partition"))
    assert 0.7 < per_dir[("n0", "n1")] / 300 < 0.9
    assert 0.03 < per_dir[("n1", "n0")] / 300 < 0.18


def test_heal_lifts_every_fault(kit: Any, lan: Any) -> None:
    sc = lan(loss=0.5, duplicate=0.5, reorder=0.5)
    sc["faults"] = {"partition": [{"sides": [["n0"]], "at": 0.0}]}  # never lifted by itself
    kit.build(sc)
    burst(kit, count=100, start=10.5, spacing=0.02)  # after chaos = 10.0
    rows = kit.finish()
    assert not [r for r in drops(rows) if r.t > 10.0]
    assert [int(p[1:]) for _, p in kit.probes["n1"].arrivals] == list(range(100))


def test_link_override_applies_to_one_direction(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["links"] = [{"domain": "lan", "from": "n0", "to": "n2", "loss": 1.0}]
    kit.build(sc)
    burst(kit, count=20)
    kit.finish()
    assert kit.probes["n2"].arrivals == [] and len(kit.probes["n1"].arrivals) == 20


def test_crash_loses_volatile_state_and_restart_boots_again(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["faults"] = {"crash": [{"node": "n2", "at": 2.0, "restart": 4.0}]}
    kit.build(sc)
    first = kit.probes["n2"]
    for t in (1.0, 3.0, 5.0):
        kit.send_at(t, "n0", f"at{t}".encode())
    rows = kit.finish()
    second = kit.probes["n2"]
    assert first is not second  # a new stack object: nothing volatile survives
    assert [p for _, p in first.arrivals] == [b"at1.0"]
    assert [p for _, p in second.arrivals] == [b"at5.0"] and second.starts == [4.0]
    events = [(r.event, r.t) for r in rows if r.node == "n2" and r.event in ("crash", "restart")]
    assert events == [("crash", 2.0), ("restart", 4.0)]
    assert [r.t for r in drops(rows, "crashed")] == [3.001]


def test_crash_without_restart_stays_down_through_heal(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["faults"] = {"crash": [{"node": "n2", "at": 2.0}]}
    kit.build(sc)
    kit.finish()
    assert kit.sim.by_id["n2"].stack is None and kit.sim.counters["restarts"] == 0


def test_crash_with_late_restart_comes_back_at_heal(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["faults"] = {"crash": [{"node": "n2", "at": 2.0, "restart": 12.0}]}
    kit.build(sc)
    kit.finish()
    assert kit.probes["n2"].starts == [10.0]  # heal (chaos end) lifts the fault


def test_clock_offset_and_drift_are_what_the_node_sees(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["node"] = [{"id": "n1", "clock_offset": 5.0, "clock_drift": 0.01}]
    kit.build(sc)
    kit.send_at(2.0, "n0", b"x")
    rows = kit.finish()
    assert kit.probes["n1"].arrivals == [(pytest.approx(5.0 + 2.001 * 1.01), b"x")]
    assert all(r.t <= 15.0 for r in rows)  # the trace stays in true virtual time


def test_timer_fires_at_the_local_deadline(kit: Any, lan: Any) -> None:
    sc = lan()
    sc["node"] = [{"id": "n1", "clock_offset": 1.0, "clock_drift": 0.5}]
    sim = kit.build(sc)
    probe = kit.probes["n1"]
    probe.timer_wanted = 4.0  # local time; true time (4 - 1) / 1.5 = 2.0

    def poke(_: Any) -> None:
        sim._service(sim.by_id["n1"], sim.now, sim.by_id["n1"].local(sim.now))

    sim.call_at(0.5, poke, None)
    kit.finish()
    assert probe.timer_calls == [pytest.approx(4.0)]
    assert sim.counters["timers"] == 1


def test_packet_tracing_writes_packet_out_and_in(kit: Any, lan: Any) -> None:
    kit.build(lan(), packets=True)
    kit.send_at(1.0, "n0", b"abc")
    rows = kit.finish()
    outs = [r for r in rows if r.event == "packet_out"]
    ins = [r for r in rows if r.event == "packet_in"]
    assert [(r.node, r.bytes) for r in outs] == [("n0", 3)]
    assert sorted(r.node for r in ins) == ["n0", "n1", "n2", "n3"]
    assert json.loads(ins[0].detail) == {"domain": "lan", "iface": "net"}


def _infra() -> dict[str, Any]:
    return {
        "run": {"chaos": 20.0, "heal": 5.0}, "stack": {"kind": "addr-probe"},
        "domains": {"backbone": {"reliable": True, "fifo": True, "delay": 0.002},
                    "cell-a": {"delay": 0.001}, "cell-b": {"delay": 0.001}},
        "cells": [{"domain": "cell-a", "x": 0.0, "y": 0.0, "radius": 10.0},
                  {"domain": "cell-b", "x": 30.0, "y": 0.0, "radius": 10.0}],
        "mobility": {"tick": 0.5, "area": [0, -5, 40, 5]},
        "node": [
            {"id": "h1", "ifaces": {"wired": "backbone", "radio": "cell-a"}},
            {"id": "h2", "ifaces": {"wired": "backbone", "radio": "cell-b"}},
            {"id": "m1", "ifaces": {"radio": "@cells"}, "position": [0.0, 0.0],
             "mobility": {"model": "waypoints",
                          "points": [[0, 0, 0], [5, 0, 0], [6, 15, 0], [8, 15, 0], [9, 30, 0]]}},
        ],
    }


def test_addressed_unicast_broadcast_and_cell_moves(kit: Any) -> None:
    sim = kit.build(_infra())
    h1, h2, m1 = kit.probes["h1"], kit.probes["h2"], kit.probes["m1"]
    assert m1.attach == [("radio", "cell-a", 0.0)]

    def at(t: float, node: str, out: Outgoing) -> None:
        def go(_: Any) -> None:
            kit.probes[node].out.append(out)
            n = sim.by_id[node]
            sim._service(n, sim.now, n.local(sim.now))
        sim.call_at(t, go, None)

    at(1.0, "h1", Outgoing("wired", "h2", b"to-h2"))  # unicast on the backbone
    at(1.0, "h1", Outgoing("radio", None, b"cell-a-bcast"))  # broadcast in its cell
    at(1.0, "m1", Outgoing("radio", "h1", b"greet"))
    at(7.0, "m1", Outgoing("radio", "h1", b"lost"))  # out of coverage between cells
    at(9.5, "h2", Outgoing("radio", "m1", b"welcome"))
    rows = kit.finish()
    assert h2.arrivals == [("wired", "h1", b"to-h2", 1.002)]
    assert ("radio", "h1", b"cell-a-bcast", 1.001) in m1.arrivals
    assert ("radio", "m1", b"greet", 1.001) in h1.arrivals
    assert ("radio", "h2", b"welcome", 9.501) in m1.arrivals
    assert [(d, t) for _, d, t in m1.attach] == [("cell-a", 0.0), (None, 6.0), ("cell-b", 8.5)]
    nocov = drops(rows, "no_coverage")
    assert [(r.node, r.t) for r in nocov] == [("m1", 7.0)]
    assert sim.counters["attach_changes"] == 2


def test_uncovered_member_is_placed_in_a_cell_at_heal(kit: Any) -> None:
    sc = _infra()
    sc["node"][2]["mobility"] = {"model": "waypoints", "points": [[0, 0, 0], [1, 15, 0]]}
    kit.build(sc)
    kit.finish()
    assert kit.probes["m1"].attach[-1] == ("radio", "cell-a", 20.0)


def test_restarted_addressed_node_is_told_where_it_is(kit: Any) -> None:
    sc = _infra()
    sc["faults"] = {"crash": [{"node": "m1", "at": 5.8, "restart": 9.0}]}
    sim = kit.build(sc)
    kit.finish()
    m1 = kit.probes["m1"]
    assert m1.ctx.ifaces == {"radio": "cell-b"}  # moved while down
    assert m1.attach[0] == ("radio", "cell-b", 9.0)
    assert sim.by_id["m1"].stack is m1


def test_with_an_mtu_a_large_datagram_is_lost_when_any_of_its_fragments_is(
        kit: Any, lan: Any) -> None:
    # 3,000 bytes on a 1,500-byte MTU: three IP packets, each lost with 20%, so the
    # datagram arrives 0.8^3 = 51% of the time; 1,400 bytes fit one packet: 80%.
    kit.build(lan(loss=0.2, mtu=1500))
    for i in range(400):
        kit.send_at(0.5 + i * 0.01, "n0", bytes([i % 256]) * 3000)
        kit.send_at(0.505 + i * 0.01, "n1", bytes([i % 256]) * 1400)
    kit.finish()
    large = sum(1 for n in ("n1", "n2", "n3") for _, p in kit.probes[n].arrivals
                if len(p) == 3000)
    small = sum(1 for n in ("n0", "n2", "n3") for _, p in kit.probes[n].arrivals
                if len(p) == 1400)
    assert 0.44 < large / 1200 < 0.58
    assert 0.75 < small / 1200 < 0.85


def test_fragments_follow_ip_s_arithmetic() -> None:
    from m2mc.sim.network import fragment_loss, fragments_of
    assert fragments_of(1472, 1500) == 1  # 1,472 + 8 + 20 = 1,500
    assert fragments_of(1473, 1500) == 2
    assert fragments_of(65_507, 1500) == 45  # 65,515 bytes of IP payload, 1,480 each
    assert fragment_loss(0.1, 1472, 1500) == 0.1
    assert fragment_loss(0.1, 3000, 1500) == pytest.approx(1 - 0.9 ** 3)
    assert fragment_loss(0.1, 3000, 0) == 0.1  # no MTU: the datagram is one thing


def test_a_domain_mtu_below_ipv4_s_least_is_refused() -> None:
    from m2mc.errors import ConfigError
    from m2mc.sim.scenario import load_scenario
    sc = _lan_scenario(mtu=60)
    with pytest.raises(ConfigError, match=r"domains\.lan\.mtu: must be >= 68"):
        load_scenario(sc)


def _lan_scenario(**domain: Any) -> dict[str, Any]:
    return {"run": {"chaos": 1.0, "heal": 1.0}, "stack": {"kind": "probe"},
            "nodes": {"count": 2, "domain": "lan"}, "domains": {"lan": {"delay": 0.001, **domain}}}
