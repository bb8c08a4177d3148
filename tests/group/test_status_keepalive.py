"""Idle members keep being heard from: a status is never suppressed for more than
STATUS_KEEPALIVE intervals in a row (what Node.last_heard and the chat's presence use)."""

from __future__ import annotations

import pytest

from m2mc.group import instance
from m2mc.group.instance import STATUS_KEEPALIVE

from .harness import Net


def _longest_silence(seed: int, members: int = 5, seconds: float = 120.0) -> float:
    net = Net(seed=seed)
    pids = [f"p{i}" for i in range(members)]
    for pid in pids:
        net.add(pid)
    gid = str(net.do(pids[0], lambda n: n.create_group("idle", net.now)))
    net.run(0.5)
    for pid in pids[1:]:
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(2.0)
    worst = 0.0
    for _ in range(int(seconds / 0.25)):
        net.run(0.25)
        for pid in pids:
            heard = net.nodes[pid].groups[gid].last_heard
            for other in pids:
                if other != pid:
                    worst = max(worst, net.now - heard[other])
    return worst


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_idle_member_goes_unheard_for_long(seed: int) -> None:
    interval = 1.0  # GroupConfig().status_interval
    assert _longest_silence(seed) <= STATUS_KEEPALIVE * interval + interval


def test_without_the_keepalive_suppression_can_hide_a_member(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instance, "STATUS_KEEPALIVE", 10_000)
    assert max(_longest_silence(seed) for seed in (1, 2, 3)) > STATUS_KEEPALIVE + 1.0
