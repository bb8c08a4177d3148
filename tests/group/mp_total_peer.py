"""One process of the total-order multi-process test (tests/group/test_multiprocess_total.py),
used as an application would use m2mc: a ``Node`` with a ``data_dir``, the group
joined by name with ``order="total"``.

``send``: waits until ``--members`` members are in the group, then calls
``await group.send(100 bytes)`` ``--count`` times in a loop without reading the group,
prints ``{"sent": N}`` and stays (answering repairs) until it is killed.

``receive``: reads the group with ``receive_many`` until it has ``--count`` messages,
prints one JSON line (how many, a SHA-256 of the identities and numbers in delivery
order, whether the numbers ran 1, 2, 3, ...) and exits at once, closing its node, as
an application that has what it wanted does. It gives up after ``--idle`` seconds
without a delivery and prints what it had then.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys

from m2mc.api import Node, NodeConfig

GROUP = "bulk"


async def send(args: argparse.Namespace) -> None:
    config = NodeConfig(pid=args.pid, channel=args.channel, data_dir=args.data)
    async with Node(config) as node:
        group = await node.join(GROUP, order="total")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + args.idle
        while len(group.members) < args.members:
            if loop.time() > deadline:
                print(json.dumps({"error": "members", "members": sorted(group.members)}),
                      flush=True)
                return
            await asyncio.sleep(0.02)  # (polling a condition, bounded by the deadline)
        for i in range(args.count):
            await group.send(i.to_bytes(4, "big") + bytes(96))
        print(json.dumps({"sent": args.count}), flush=True)
        print(f"{args.pid} sent {args.count}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()  # answering repairs until the test kills us


async def receive(args: argparse.Namespace) -> None:
    config = NodeConfig(pid=args.pid, channel=args.channel, data_dir=args.data)
    async with Node(config) as node:
        group = await node.join(GROUP, order="total")
        print(f"{args.pid} ready", file=sys.stderr, flush=True)
        digest = hashlib.sha256()
        received = 0
        numbered = True  # the gseqs ran 1, 2, 3, ... with no gap
        while received < args.count:
            try:
                batch = await group.receive_many(timeout=args.idle)
            except TimeoutError:
                break
            for m in batch:
                received += 1
                numbered = numbered and m.gseq == received
                digest.update(f"{m.mid} {m.gseq}\n".encode())
        print(json.dumps({"pid": args.pid, "received": received, "numbered": numbered,
                          "order": digest.hexdigest()}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["send", "receive"])
    p.add_argument("--pid", required=True)
    p.add_argument("--channel", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--members", type=int, default=4)
    p.add_argument("--idle", type=float, default=120.0)
    args = p.parse_args()
    asyncio.run(send(args) if args.role == "send" else receive(args))
