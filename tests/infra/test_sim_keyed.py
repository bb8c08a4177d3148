"""examples/scenarios/infra-keyed.toml on the simulator: a keyed deployment (every
frame sealed with the deployment key, as the asyncio drivers seal it), with 20%
wireless loss, members walking through cells and gaps, a member switched off and on,
the coordinator crashing, and every member leaving at the end.

On seeds 1-5 the run is clean: seeds/001 P1-P7 as test_properties.py checks them
(on the trace, and on the hosts' state at the end), no honest frame refused, and
``m2mc analyze`` finds it valid (test_sim_verdict.py). An outsider node without the key, injecting
frames into a cell (forged, sealed under another key, recorded and replayed), is
refused and counted, and changes nothing."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from infra_harness import check_hosts_collected
from trace_check import Verdict, load, verify

from m2mc.errors import ConfigError
from m2mc.infra import messages as m
from m2mc.infra.codec import encode
from m2mc.infra.host import HostCore
from m2mc.infra.ids import MemberId
from m2mc.infra.member import MemberCore
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.security.auth import GroupAuth
from m2mc.sim import load_scenario
from m2mc.sim.runner import ScenarioRun
from m2mc.sim.testing import Arrival, VirtualNet
from sim_cache import SimRuns

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "infra-keyed.toml"
SEEDS = (1, 2, 3, 4, 5)
HOSTS = ("h1", "h2", "h3")
MEMBERS = tuple(f"m{i:02d}" for i in range(9))
OTHER_KEY = bytes(range(100, 132))


def cores(run: ScenarioRun) -> tuple[dict[str, HostCore], dict[str, MemberCore]]:
    """The cores of the nodes that are up."""
    nodes = run.sim.by_id
    hosts = {h: nodes[h].stack.core for h in HOSTS if nodes[h].stack is not None}
    members = {n: nodes[n].stack.core for n in MEMBERS if nodes[n].stack is not None}
    return hosts, members


def rejected(wire: InfraWire) -> dict[str, int]:
    """What a wire refused, by reason (zeros left out)."""
    counts = wire.counters()
    keys = ("frames_malformed", "frames_unkeyed_sealed", "frames_wrong_sender",
            "frames_misdirected", "auth_rejected")
    return {k: counts[k] for k in keys if counts.get(k)}


def check_p1_to_p7(out: Path, hosts: dict[str, HostCore]) -> Verdict:
    v = verify(out / "trace")  # P1 total order, P2 no duplicates, P4/P5 nothing lost, P6
    assert v.ok, v.problems[:10]
    assert v.members == len(MEMBERS) and v.sent == 1000
    assert v.deliveries == len(MEMBERS) * v.sent
    for node in MEMBERS:  # P3: everybody who wanted to join and leave did, unexpelled
        rows = [r for r in load(out / "trace") if r["node"] == node]
        joins = [r for r in rows if r["event"] == "join"]
        leaves = [json.loads(r["detail"]) for r in rows if r["event"] == "leave"]
        assert len(joins) == 1 and len(leaves) == 1, node  # m03 resumed its membership
        assert not leaves[0]["expelled"], node
    check_hosts_collected(hosts)  # P7: nothing held for anybody anywhere
    return v


def check_run(seed: int, out: Path, runs: SimRuns) -> None:
    with ScenarioRun(SCENARIO, seed, out) as run:
        run.run()
        hosts, members = cores(run)
        assert set(hosts) == set(HOSTS) and set(members) == set(MEMBERS)
        for node, core in [*hosts.items(), *members.items()]:
            assert core.wire.keyed, node
            assert rejected(core.wire) == {}, (node, rejected(core.wire))  # honest: none
            assert core.wire.auth is not None and core.wire.auth.stats.opened > 0
        result = run.finish()
    runs.keep(SCENARIO, seed, result)  # for the Spark test below
    v = check_p1_to_p7(out, hosts)
    assert result.counters["crashes"] == result.counters["restarts"] == 2
    assert result.counters["drops_loss"] > 1000 and result.counters["coverage_lost"] > 0
    active = [e for e in v.elect if e["phase"] == "active"]
    assert active[0]["node"] == "h1" and any(e["node"] != "h1" for e in active)


@pytest.mark.parametrize("seed", SEEDS)
def test_keyed_deployment_is_clean(seed: int, tmp_path: Path, sim_runs: SimRuns) -> None:
    check_run(seed, tmp_path, sim_runs)


def test_an_outsider_without_the_key_is_refused_and_counted(tmp_path: Path) -> None:
    """A node in cell-1 that does not hold the key greets, joins, sends and asks for
    repairs (plain, and sealed under another key), forges h1's beacon naming itself as
    the uplink, and plays back frames it recorded in the cell. Every frame of it that
    reaches h1 is refused and counted there; every member it reaches refuses at least
    the forged ones; nothing of it is delivered, and the run stays clean."""
    with ScenarioRun(SCENARIO, 1, tmp_path) as run:
        net = VirtualNet.around(run.sim)
        intruder = net.outsider("x1", {"radio": "cell-1"}, addressed=True)
        run.run(10.0)  # members have joined and talk; the intruder listened meanwhile
        assert intruder.heard  # sealed beacons and multicasts of cell-1
        hosts, members = cores(run)
        before = {n: rejected(c.wire).get("auth_rejected", 0)
                  for n, c in [*hosts.items(), *members.items()]}
        h1_errors = hosts["h1"].stats.decode_errors
        x = MemberId("x1", 1)
        uplink = [m.Hello("x1", "h1", None, 0, False), m.JoinReq("x1", "h1", 1, x),
                  m.NewReq("x1", "h1", 2, x, (m.NewItem(1, 1, b"forged"),)),
                  m.NackReq("x1", "h1", 3, x, 1, 50)]
        beacon = m.Beacon("h1", 10**6, "x1", "h1")  # "send your uplink frames to x1"
        thief = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, OTHER_KEY, "x1"))
        impostor = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, OTHER_KEY, "h1"))
        forged = [encode(beacon), impostor.encode(beacon)]
        replayed = [data for _, data in intruder.heard[-30:]]
        arrived: dict[str, list[bytes]] = {}

        def tap(frame: Arrival) -> None:
            if frame.src.id == "x1":
                arrived.setdefault(frame.node.id, []).append(frame.data)

        with net.tapped(tap):
            for frame in uplink:
                intruder.send(encode(frame), dest="h1", iface="radio")
                intruder.send(thief.encode(frame), dest="h1", iface="radio")
            for data in forged + replayed:  # to every node in cell-1
                intruder.send(data, iface="radio")
            run.run(12.0)
        assert arrived.get("h1") and len(arrived) > 1  # the cell lost some, not all
        hosts, members = cores(run)
        h1 = hosts["h1"]
        assert rejected(h1.wire)["auth_rejected"] - before["h1"] == len(arrived["h1"])
        assert h1.stats.decode_errors - h1_errors == len(arrived["h1"])
        assert "x1" not in h1.gateway.local and h1.coordinator is not None
        assert all(mid.node != "x1" for mid in h1.coordinator.work.members)
        for node, frames in arrived.items():
            if node in members:
                core = members[node]
                refused = rejected(core.wire).get("auth_rejected", 0) - before[node]
                # Forged ones always; a replay only where that frame was heard already
                # (each receiver has its own replay window).
                assert sum(f in forged for f in frames) <= refused <= len(frames), node
                assert core.gateway_addr != "x1", node
        run.run()
        hosts, members = cores(run)
        result = run.finish()
    check_p1_to_p7(tmp_path, hosts)  # the trace names no message of x1: "unexpected"
    assert result.counters["app_sends"] == 1000


def test_the_key_can_come_from_a_file_or_a_passphrase(tmp_path: Path) -> None:
    data = tomllib.loads(SCENARIO.read_text())
    key = data["stack"].pop("key")
    (tmp_path / "deploy.key").write_text(key + "\n")
    (tmp_path / "deploy.key").chmod(0o600)
    short: dict[str, Any] = {**data, "run": {"chaos": 8.0, "heal": 4.0},
                             "groups": [{**data["groups"][0], "messages": 40}],
                             "faults": {}, "schedule": []}
    for source in ({"key_file": str(tmp_path / "deploy.key")},
                   {"passphrase": "correct horse battery staple", "suite": "aes-256-gcm"}):
        spec = {**short, "stack": {**data["stack"], **source}}
        out = tmp_path / next(iter(source))
        with ScenarioRun(spec, 1, out) as run:
            run.run()
            hosts, members = cores(run)
            assert all(core.wire.keyed and not rejected(core.wire)
                       for core in [*hosts.values(), *members.values()])
            run.finish()
        v = verify(out / "trace")
        assert v.ok and v.sent == 40 and v.deliveries == 40 * len(MEMBERS), v.problems[:5]


def test_a_bad_key_is_refused_at_load_time(tmp_path: Path) -> None:
    data = tomllib.loads(SCENARIO.read_text())
    for bad, word in (({"key": "not a key"}, "key"),
                      ({"key_file": str(tmp_path / "missing.key")}, "missing.key"),
                      ({"key": data["stack"]["key"], "passphrase": "x"}, "exactly one"),
                      ({"key": data["stack"]["key"], "suite": "rot13"}, "rot13")):
        stack = {k: v for k, v in data["stack"].items() if k != "key"}
        with pytest.raises(ConfigError, match=word):
            load_scenario({**data, "stack": {**stack, **bad}})
