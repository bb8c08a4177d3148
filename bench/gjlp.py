"""GJLP replies per join: how many grpsInfoList answers one newcomer's
advertisement sets off, with the back-off and suppression of docs/decisions.md
("GJLP: advertisement replies are backed off and suppressed") next to the seed's
rule (every node answers at once), in the same run.

    .venv/bin/python bench/gjlp.py [--sizes 5,10,20,40] [--seeds 3]

``n`` members are in one group on the simulator's virtual network
(m2mc.sim.testing, 0.5-3 ms per copy); a newcomer starts (it advertises on start)
and the GRPS_INFO messages sent in the next 0.5 s are counted. Prints
one JSON object: per size, the mean and max replies per join with suppression,
and the seed's count. Target: replies per join stay a small constant as n grows.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable

from m2mc.group.codec import HEADER_SIZE, Kind
from m2mc.group.config import GroupConfig
from m2mc.group.manager import GroupNode
from m2mc.sim.testing import CoreStack, VirtualNet
from m2mc.wire.packet import HEADER_SIZE as M2MP_HEADER


def replies_per_join(n: int, backoff: float, seed: int) -> int:
    replies: set[bytes] = set()  # M2MP message ids: each packet goes out `redundancy` times

    def counter(datagram: bytes) -> None:
        if (len(datagram) > M2MP_HEADER + HEADER_SIZE and datagram[4:8] == b"\x80\x00\x00\x00"
                and datagram[M2MP_HEADER + 11] == Kind.GRPS_INFO):
            replies.add(datagram[:4])

    net = VirtualNet({"lan": {"delay": {"dist": "uniform", "low": 0.0005, "high": 0.003},
                              "loopback_delay": 0.0001}}, seed=seed)
    counting: list[Callable[[bytes], None]] = []

    def start(pid: str) -> GroupNode:
        node = GroupNode(pid, rng=random.Random(f"{seed}/{pid}/{net.now}"),
                         config=GroupConfig(adv_reply_backoff=backoff))
        net.add(pid, lambda ctx: CoreStack(node, drain=lambda core: core.events(),
                                           on_send=lambda d: [count(d) for count in counting]))
        return node

    for i in range(n):
        pid = f"p{i:03d}"
        start(pid)
        net.call(pid, lambda stack, now: stack.core.join_group("room", now, order="sb"))
    net.run(1.0)
    counting.append(counter)
    newcomer = start("zz")
    net.run(0.5)
    if newcomer.group_info("room") is None:
        raise SystemExit(f"n={n} seed={seed}: the newcomer did not discover the group")
    return len(replies)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="5,10,20,40")
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args()
    backoff = GroupConfig().adv_reply_backoff
    out = {"backoff_s": backoff, "sizes": {}}
    for n in (int(x) for x in args.sizes.split(",")):
        ours = [replies_per_join(n, backoff, seed) for seed in range(1, args.seeds + 1)]
        seed_rule = replies_per_join(n, 0.0, 1)
        out["sizes"][str(n)] = {"replies_mean": statistics.mean(ours), "replies_max": max(ours),
                                "seed_rule_replies": seed_rule}
        print(f"n={n}: {out['sizes'][str(n)]}", file=sys.stderr, flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
