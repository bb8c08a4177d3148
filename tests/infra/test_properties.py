"""seeds/001 3.5, P1-P7, on the deterministic harness: 20% loss on the wireless hop,
members moving between cells and into gaps, the extensions of section 4 switched on
and off, and (beyond the seed) the coordinator crashing mid-stream."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from infra_harness import (
    Net,
    check_complete,
    check_garbage_collected,
    check_total_order,
    run_workload,
)

from m2mc.infra.config import InfraConfig

EXTENSIONS = {
    "plain": {},
    "subscribe": {"subscribe": True},
    "no-buffer+skip": {"member_buffer": 0, "skip_membership": True},
    "all": {"subscribe": True, "member_buffer": 2, "skip_membership": True},
}


def check_all(net: Net) -> None:
    check_total_order(net)  # P1 total order, P2 no duplicates, P6 integrity
    for node, log in net.logs.items():  # P3: everybody who wanted to join/leave did
        assert log.joined, f"{node} never became a member"
        assert log.left and not log.left[-1].expelled, f"{node} never left"
    check_complete(net)  # P4 non-triviality, P5 validity
    check_garbage_collected(net)  # P7


@pytest.mark.parametrize("ext", sorted(EXTENSIONS))
def test_p1_to_p7_with_loss_and_mobility(ext: str) -> None:
    net = Net(seed=11, loss=0.2, cfg=InfraConfig(**EXTENSIONS[ext]))  # type: ignore[arg-type]
    run_workload(net, members=9, rounds=120)
    check_all(net)
    assert net.cell_drops > 500  # the wireless hop really lost a fifth of everything


@pytest.mark.parametrize("ext", sorted(EXTENSIONS))
def test_p1_to_p7_across_a_coordinator_crash(ext: str) -> None:
    net = Net(seed=5, loss=0.2, cfg=InfraConfig(**EXTENSIONS[ext]))  # type: ignore[arg-type]
    run_workload(net, members=9, rounds=120, crash_at=60)
    check_all(net)
    assert sum(1 for h in net.alive.values() if not h) == 1


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), ext=st.sampled_from(sorted(EXTENSIONS)),
       loss=st.sampled_from([0.0, 0.1, 0.3]), crash=st.booleans())
# A 4.1 gateway with no members frees its tables, then wins the election after the
# crash: it must take back the committed, not yet stable copies other hosts kept
# (found as seed 658 on the tests' first network; on the simulator's network seed 26
# is such a run: without ReplicaLog.backfill it never sequences every send).
@example(seed=26, ext="subscribe", loss=0.3, crash=True)
def test_properties_hold_for_random_runs(seed: int, ext: str, loss: float, crash: bool) -> None:
    net = Net(seed=seed, loss=loss, cfg=InfraConfig(**EXTENSIONS[ext]))  # type: ignore[arg-type]
    run_workload(net, members=6, rounds=60, p_move=0.05, crash_at=30 if crash else None)
    check_all(net)


def test_a_member_that_wants_to_join_while_out_of_coverage_joins_later() -> None:
    net = Net(seed=3, loss=0.1)
    net.add_member("A", "H1")
    net.add_member("B", None)  # P3 under "sends reliably once in a cell"
    net.run_until(2.0)
    assert not net.logs["B"].joined
    net.move("B", "H2")
    net.run_until(4.0)
    assert net.logs["B"].joined
    net.send("A", b"after")
    net.run_until(6.0)
    assert [d.body for d in net.logs["B"].delivered] == [b"after"]


def test_member_that_disappears_for_long_is_expelled_and_rejoins_on_return() -> None:
    cfg = InfraConfig(member_timeout=3.0)
    net = Net(seed=4, cfg=cfg)
    net.add_member("A", "H1")
    net.add_member("B", "H2")
    net.run_until(2.0)
    net.move("B", None)
    net.send("A", b"while away")
    net.run_until(8.0)  # longer than member_timeout: the coordinator expels B
    c = net.hosts[net.coordinator()].coordinator  # type: ignore[index]
    assert c is not None and c.stats.expelled == 1
    net.move("B", "H3")
    net.run_until(11.0)
    log = net.logs["B"]
    assert log.left and log.left[-1].expelled  # it learnt it had been expelled
    assert len(log.joined) == 2  # ... and joined again with a fresh join-id
    net.send("A", b"after return")
    net.run_until(13.0)
    assert log.delivered[-1].body == b"after return"
    check_total_order(net)


def test_members_in_reach_are_never_expelled_even_when_quiet() -> None:
    """seeds/004 4.5: heartbeats keep a live member in; only silence expels."""
    net = Net(seed=12, cfg=InfraConfig(member_timeout=2.0))
    for i, cell in enumerate(["H1", "H2", "H3", "H1", "H2", "H3"]):
        net.add_member(f"M{i}", cell)
    net.run_until(10.0)  # five member_timeouts without a single multicast
    assert all(not log.left for log in net.logs.values())
    assert all(len(log.joined) == 1 for log in net.logs.values())
