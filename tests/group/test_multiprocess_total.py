"""Total order across real processes over loopback multicast, with no fault at all:
one sender and three receivers, each a ``Node`` with a ``data_dir``, in a group
joined by name with ``order="total"``. The sender calls ``await group.send(100
bytes)`` 50,000 times; every receiver delivers all 50,000, numbered 1, 2, 3, ...,
in one and the same order.

The stall this pins down (issue 34): the sender's messages all reached the members
before the group's sequencing log existed, and the receiver that founded it
stamped every one of them in a configuration of itself alone, so each was committed
by it alone. Its ORDERs beyond M2MP's flow window (6,119 messages) had not left when
it had delivered everything and closed; the other two receivers held none of those
positions and could never elect a successor without it: they stopped at 6,119 in
every run. Now the founder's first records bring every member it hears into the
configuration before it stamps anything (docs/group.md section 5)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from m2mc.demo.tour import Child, random_multicast_url

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]
PEER = str(Path(__file__).with_name("mp_total_peer.py"))
COUNT = 50_000
WAIT = 240.0  # generous: a shared 2-core machine runs four processes here


def _spawn(role: str, pid: str, url: str, tmp: Path) -> Child:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    return Child([role, "--pid", pid, "--channel", url, "--data", str(tmp / pid),
                  "--count", str(COUNT)], env=env, cwd=tmp, script=PEER)


@pytest.mark.timeout(600)
def test_fifty_thousand_messages_reach_every_receiver_in_one_order(tmp_path: Path) -> None:
    url = random_multicast_url(random.Random())
    # r1 is the lowest member: it founds the log and sequences, and, a receiver like
    # the others, closes its node as soon as it has every message.
    receivers = {pid: _spawn("receive", pid, url, tmp_path) for pid in ("r1", "r2", "r3")}
    sender: Child | None = None
    try:
        for pid, child in receivers.items():
            child.wait_stderr(f"{pid} ready", WAIT)
        sender = _spawn("send", "s1", url, tmp_path)
        for pid, child in receivers.items():
            assert child.finish(WAIT) == 0, (pid, child.stdout[-3:], child.stderr[-5:])
        sender.wait_stderr(f"s1 sent {COUNT}", WAIT)
    finally:
        for child in [*receivers.values(), *([sender] if sender else [])]:
            child.kill()
    results = {pid: child.json_lines()[-1] for pid, child in receivers.items()}
    for pid, result in results.items():
        assert result["received"] == COUNT, (pid, result)
        assert result["numbered"], (pid, result)
    assert len({result["order"] for result in results.values()}) == 1, results
