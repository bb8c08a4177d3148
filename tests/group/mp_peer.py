"""One M2MC process for the multi-process test (tests/group/test_multiprocess.py).

It joins group ``--group`` by name, sends until its own seqno reaches ``--send``
(replying to recently delivered messages), optionally leaves and rejoins, and
exits 0 once it has delivered every message of every peer (``--peers``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys

from m2mc.api import Node, NodeConfig
from m2mc.ordering import MessageId


async def main(args: argparse.Namespace) -> int:
    rng = random.Random(args.pid)
    config = NodeConfig(pid=args.pid, channel=args.channel, data_dir=args.data,
                        trace_dir=args.trace, run_id="mp", trace_flush_every=1)
    peers = args.peers.split(",")
    async with Node(config) as node:
        group = await node.join(args.group, order="sb", passphrase=args.passphrase)
        print(f"{args.pid} ready", file=sys.stderr, flush=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + args.timeout
        while len(group.members) < args.wait_members and loop.time() < deadline:
            await asyncio.sleep(0.05)
        stack = node._node()
        recent: list[MessageId] = []

        async def read() -> None:
            async for message in group:
                recent.append(message.mid)
                del recent[:-8]

        reader = asyncio.create_task(read())
        inst = stack.groups[args.group]
        left = False
        while inst.mop.own_seq < args.send:
            if args.leave_at and inst.mop.own_seq == args.leave_at and not left:
                left = True
                await group.leave()
                print(f"{args.pid} left", file=sys.stderr, flush=True)
                await asyncio.sleep(args.away)
                group = await node.join(args.group, order="sb", passphrase=args.passphrase)
                inst = stack.groups[args.group]
                print(f"{args.pid} rejoined", file=sys.stderr, flush=True)
            parent = rng.choice(recent) if recent and rng.random() < 0.6 else None
            await group.send(f"{args.pid} says {inst.mop.own_seq + 1}", reply_to=parent)
            print(f"{args.pid} sent {inst.mop.own_seq}", file=sys.stderr, flush=True)
            await asyncio.sleep(args.interval)
        want = [MessageId(p, s) for p in peers for s in range(1, args.send + 1)]
        while loop.time() < deadline:
            core = stack.groups[args.group].mop.core
            if all(core.delivered(mid) for mid in want):
                break
            await asyncio.sleep(0.05)
        else:
            core = stack.groups[args.group].mop.core
            print(json.dumps({"pid": args.pid, "missing": [str(m) for m in want
                                                           if not core.delivered(m)][:20]}))
            return 1
        await asyncio.sleep(args.linger)  # keep answering others' repairs a little
        reader.cancel()
        print(json.dumps({"pid": args.pid, "done": True, "stats": node.stats()}))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--pid", required=True)
    p.add_argument("--channel", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--trace", required=True)
    p.add_argument("--group", default="mp")
    p.add_argument("--peers", required=True)
    p.add_argument("--send", type=int, default=40)
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--wait-members", type=int, default=1)
    p.add_argument("--leave-at", type=int, default=0)
    p.add_argument("--away", type=float, default=1.0)
    p.add_argument("--linger", type=float, default=1.5)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--passphrase", default=None, help="key the group with this passphrase")
    sys.exit(asyncio.run(main(p.parse_args())))
