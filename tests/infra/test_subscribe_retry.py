"""seeds/001 4.1: a gateway asks again to subscribe until the SUBSCOK comes (issue 34's
nemesis, infra-nemesis-extensions seed 116).

A gateway whose cell empties for a moment sends Unsubscribe, and Subscribe when a member
greets it again; each was sent once. Cut off the backbone meanwhile, it lost both: the
master still counted it subscribed and synced nobody, the gateway waited for a SUBSCOK
that never came, relayed nothing and answered no NACK, and every member in its cell
delivered nothing more, until the end of the run (1,518 lost deliveries at four
members)."""

from __future__ import annotations

from pathlib import Path

from infra_harness import Net, check_complete, drain
from trace_check import verify

from m2mc.infra.config import InfraConfig
from m2mc.sim import run_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def test_a_subscribe_lost_in_a_partition_is_asked_again() -> None:
    # host_timeout > the partition: nobody starts an election (a new master would make
    # every gateway subscribe afresh, which hides the loss)
    net = Net(seed=3, loss=0.0, cfg=InfraConfig(subscribe=True, host_timeout=2.0))
    assert net.run_while(lambda: net.coordinator() is None, 10.0)
    master = net.coordinator()
    assert master is not None
    gateway = sorted(h for h in net.host_ids if h != master)[-1]
    net.add_member("A", master)
    net.add_member("C", gateway)
    net.run_until(net.now + 3.0)
    g = net.hosts[gateway].gateway
    assert g.subscribed
    net.net.partition([gateway], domains=["backbone"])
    net.move("C", None)  # the cell empties: Unsubscribe, lost in the partition
    net.run_until(net.now + 0.6)
    assert not g.sub_requested and not g.subscribed
    net.move("C", gateway)  # back: Subscribe, lost too
    net.run_until(net.now + 0.3)
    assert g.sub_requested and not g.subscribed
    net.net.heal_partitions()
    for i in range(5):
        net.send("A", f"after-{i}".encode())
    net.run_until(net.now + 3.0)
    assert g.subscribed  # asked again, synced
    drain(net)
    check_complete(net)
    assert [d.body for d in net.logs["C"].delivered][-5:] == [
        f"after-{i}".encode() for i in range(5)]


def test_infra_nemesis_extensions_seed_116(tmp_path: Path) -> None:
    """The run that found it: a power cut, then h2 cut off the backbone for half a
    second while its only member fell silent for a moment."""
    run_scenario(SCENARIOS / "infra-nemesis-extensions.toml", 116, tmp_path)
    v = verify(tmp_path / "trace")
    assert v.ok, v.problems[:10]
    assert v.deliveries == v.members * v.sent
