"""One M2MC node of the namespace tests, on the public asyncio API (m2mc.api).

    python adhoc_node.py --pid a --channel URL --trace DIR --peers a,b,c,d --send 30 \
        --orders sb,causal,fifo,total [--key-file K]

Joins one group per ordering (``netns-<order>``), waits for every peer to be a
member of each, sends ``--send`` messages to each (half of them replies to
something delivered), and prints ``done`` on stderr once it has delivered every
message of every peer in every group. It keeps running, so it can
answer the others' repair requests, until SIGTERM; then it closes cleanly
(trace flushed) and prints one JSON line with its statistics.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys

from m2mc.api import Node, NodeConfig
from m2mc.ordering import MessageId


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def main(args: argparse.Namespace) -> int:
    rng = random.Random(args.pid)
    peers = args.peers.split(",")
    orders = args.orders.split(",")
    reply_orders = set(args.reply_orders.split(","))
    wanted = {f"{p}:{s}" for p in peers for s in range(1, args.send + 1)}
    delivered: dict[str, set[str]] = {order: set() for order in orders}
    recent: dict[str, list[MessageId]] = {order: [] for order in orders}
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    config = NodeConfig(pid=args.pid, channel=args.channel, trace_dir=args.trace,
                        run_id=args.run, trace_flush_every=1)

    def complete() -> bool:
        return all(wanted <= got for got in delivered.values())

    async with Node(config) as node:
        groups = {order: await node.join(f"netns-{order}", order=order, key_file=args.key_file)
                  for order in orders}
        say(f"{args.pid} joined")
        while not stop.is_set() and not all(set(g.members) >= set(peers)
                                            for g in groups.values()):
            await asyncio.sleep(0.05)
        say(f"{args.pid} sees all members")

        async def read(order: str) -> None:
            async for message in groups[order]:
                delivered[order].add(str(message.mid))
                recent[order].append(message.mid)
                del recent[order][:-8]

        readers = [asyncio.create_task(read(order)) for order in orders]
        for seq in range(1, args.send + 1):
            for order, group in groups.items():
                choices = recent[order]
                replies = order in reply_orders and choices and rng.random() < 0.5
                parent = rng.choice(choices) if replies else None
                await group.send(f"{args.pid} says {seq}", reply_to=parent)
            say(f"{args.pid} sent {seq}")
            await asyncio.sleep(args.interval)
        while not complete() and not stop.is_set():
            await asyncio.sleep(0.05)
        if complete():
            say(f"{args.pid} done")
        await stop.wait()
        for reader in readers:
            reader.cancel()
        print(json.dumps({
            "pid": args.pid,
            "delivered": {order: len(got & wanted) for order, got in delivered.items()},
            "missing": {order: sorted(wanted - got)[:10] for order, got in delivered.items()},
            "stats": node.stats(),
            "groups": {order: node._node().group_stats(f"netns-{order}") for order in orders}}),
            flush=True)
    return 0 if complete() else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--run", default="netns")
    parser.add_argument("--orders", default="sb,causal,fifo,total")
    parser.add_argument("--reply-orders", default="sb,causal,fifo,total",
                        help="groups in which half the messages answer an earlier one")
    parser.add_argument("--peers", required=True)
    parser.add_argument("--send", type=int, default=30)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--key-file", default=None, help="the groups' key (keyed groups)")
    sys.exit(asyncio.run(main(parser.parse_args())))
