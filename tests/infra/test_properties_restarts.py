"""seeds/001 3.5, P1-P7, for random runs in which durable hosts crash and restart
(issue 34, item 7): one host, several at once, every host at once (a power cut), at
random rounds of the workload, down for random lengths, with backbone partitions
beside them; 0-30% loss on the wireless hop, members moving between cells and into
gaps, the section 4 extensions on and off. After the faults every host is back, every
member comes into a live cell, delivers everything and leaves: then P1-P7 must hold
(total order, no duplicates, every join and leave done, every message delivered to
every member of its time, integrity, nothing left behind on any host)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from infra_harness import Net
from test_properties import EXTENSIONS, check_all

from m2mc.infra.config import InfraConfig

HOSTS = ("H1", "H2", "H3")
ROUND = 0.05  # seconds of virtual time per workload round
# Examples per run: a few in the suite; M2MC_RESTART_EXAMPLES=300 for a long local run.
EXAMPLES = int(os.environ.get("M2MC_RESTART_EXAMPLES", "20"))


@dataclass(frozen=True)
class Fault:
    at: int  # the round it strikes
    hosts: tuple[str, ...]  # crashed at once (all three: a power cut), or cut off
    rounds: int  # how long they stay down (or cut off)
    partition: bool = False  # a backbone partition instead of a crash


FAULTS = st.builds(
    Fault, at=st.integers(2, 70),
    hosts=st.sampled_from([("H1",), ("H2",), ("H3",), ("H1", "H2"), ("H2", "H3"),
                           ("H1", "H3"), HOSTS]),
    rounds=st.integers(1, 60), partition=st.booleans())


def run_with_faults(net: Net, faults: list[Fault], *, members: int = 6, rounds: int = 80,
                    p_send: float = 0.3, p_move: float = 0.03) -> None:
    """The workload of run_workload, with ``faults`` striking the hosts on the way; the
    master at the time of a crash is whoever it is (the faults name hosts, not roles)."""
    cells = list(net.host_ids)
    for i in range(members):
        net.add_member(f"M{i}", cells[i % len(cells)])
    net.run_until(net.now + 3.0)
    back: dict[int, list[str]] = {}  # round -> hosts to restart then
    heal: set[int] = set()  # rounds at which partitions end
    for k in range(rounds + 61):
        t = net.now
        for f in faults:
            if f.at != k:
                continue
            if f.partition:
                net.net.partition(list(f.hosts), domains=["backbone"])
                heal.add(k + f.rounds)
                continue
            down = [h for h in f.hosts if net.alive[h]]
            net.power_cut(down)
            back.setdefault(k + f.rounds, []).extend(down)
        for h in back.pop(k, []):
            if not net.alive[h]:
                net.restart(h)
        if k in heal:
            net.net.heal_partitions()
        if k < rounds:
            for n in list(net.members):
                if net.rng.random() < p_send and net.members[n].phase.value in ("joining",
                                                                                "member"):
                    net.send(n, f"{n}-{k}".encode())
                if net.rng.random() < p_move:
                    net.move(n, net.rng.choice([*cells, None]))
        net.run_until(t + ROUND)
    for h in cells:  # everybody back, whatever was left down
        if not net.alive[h]:
            net.restart(h)
    net.net.heal_partitions()
    for i, n in enumerate(net.members):
        if net.where[n] is None:
            net.move(n, cells[i % len(cells)])
    assert net.run_while(lambda: net.pending() > 0, net.now + 90), "sends never sequenced"
    for n in net.members:
        net.leave(n)
    assert net.run_while(lambda: any(m.phase.value != "left" for m in net.members.values()),
                         net.now + 60), {n: m.phase.value for n, m in net.members.items()}
    net.run_until(net.now + 2.0)


# Derandomized: the suite runs the same examples every time, so that a failure here is
# one the code changed to cause, not one the search happened on (a long local run with
# M2MC_RESTART_EXAMPLES=300 M2MC_RESTART_RANDOM=1 explores). What such a search found is
# pinned as a test of its own (tests/infra/test_keepers.py).
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=not os.environ.get("M2MC_RESTART_RANDOM"))
@given(seed=st.integers(0, 10_000), ext=st.sampled_from(sorted(EXTENSIONS)),
       loss=st.sampled_from([0.0, 0.1, 0.3]), faults=st.lists(FAULTS, min_size=1, max_size=5))
# a power cut in the middle of the traffic, then the master's follower alone
@example(seed=1, ext="plain", loss=0.1,
         faults=[Fault(20, HOSTS, 10), Fault(45, ("H2",), 20)])
# two hosts at once (no quorum) while the third is cut off the backbone
@example(seed=2, ext="subscribe", loss=0.3,
         faults=[Fault(10, ("H1",), 30, partition=True), Fault(15, ("H2", "H3"), 5)])
# a rolling restart: each host back before the next one goes
@example(seed=3, ext="all", loss=0.1,
         faults=[Fault(10, ("H1",), 8), Fault(25, ("H2",), 8), Fault(40, ("H3",), 8)])
def test_p1_to_p7_hold_across_host_restarts_and_power_cuts(
        seed: int, ext: str, loss: float, faults: list[Fault]) -> None:
    net = Net(seed=seed, loss=loss, cfg=InfraConfig(**EXTENSIONS[ext]))  # type: ignore[arg-type]
    run_with_faults(net, faults)
    check_all(net)
    assert all(net.alive.values())
