"""Chat bots on real nodes: one process per bot, over loopback multicast.

    python -m m2mc.demo.bots --pid bot1 --peers 4 --count 20 --trace-dir DIR \
        --channel 'udp-multicast://239.255.77.77:7777?iface=127.0.0.1&ttl=1'

They carry the demo's causal and total-order groups; its S_b group is a threaded
chat between ``m2mc chat --script`` participants (:mod:`m2mc.demo.steps`).
Each bot joins two groups by name: ``demo-causal`` and ``demo-total``
(``--groups`` picks others of ``demo-sb``, ``demo-causal``, ``demo-total``).
Once it sees every peer in a group it sends ``--count``
messages there, replying (with probability ``--reply``) to a message it has
already delivered, like people in a threaded chat. It stops when it has
delivered every peer's messages in every group and every bot has said so
(a ``<pid>.done`` file next to the traces), or at ``--deadline``.

Exit status: 0 everything delivered, 1 a deadline passed first, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

from m2mc.api import Group, Node, NodeConfig
from m2mc.kinds import Order

ALL_GROUPS = {"demo-sb": Order.SB, "demo-causal": Order.CAUSAL, "demo-total": Order.TOTAL}
GROUPS = (("demo-causal", Order.CAUSAL), ("demo-total", Order.TOTAL))
LINES = (
    "Did anyone visit Delhi?", "Yes, last winter.", "How was the food?",
    "Chennai is warmer this time of year.", "Any hotel you would recommend?",
    "The train from Chennai takes a day.", "Bring a jacket for the evenings.",
    "Who is going to the meetup?", "I am, see you there.", "Count me in.",
)


async def _chat(group: Group, pid: str, peers: int, count: int, reply: float,
                rng: random.Random, deadline: float) -> bool:
    """Wait for every peer, send ``count`` messages, deliver everyone's; True if complete."""
    while len(group.members) < peers:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    delivered: list[str] = []
    expected = peers * count
    sent = 0
    while len(delivered) < expected:
        if sent < count:
            target = None
            if delivered and rng.random() < reply:
                # Chat replies go to recent messages more than to old ones.
                target = delivered[max(0, len(delivered) - 1 - int(rng.expovariate(0.3)))]
            text = f"{pid}: {LINES[rng.randrange(len(LINES))]} (#{sent + 1})"
            await group.send(text, reply_to=target)
            sent += 1
        try:
            timeout = 0.02 if sent < count else 0.5
            for message in await group.receive_many(timeout=timeout):
                delivered.append(str(message.mid))
        except TimeoutError:
            pass
        if time.monotonic() > deadline:
            return False
    return True


async def run_bot(args: argparse.Namespace) -> int:
    trace_dir = Path(args.trace_dir)
    deadline = time.monotonic() + args.deadline
    rng = random.Random(f"{args.seed}:{args.pid}")
    config = NodeConfig(channel=args.channel, pid=args.pid, trace_dir=str(trace_dir),
                        run_id=args.run, data_dir=args.data_dir)
    async with Node(config) as node:
        names = args.groups.split(",") if args.groups else [name for name, _ in GROUPS]
        groups = [await node.join(name, order=ALL_GROUPS[name]) for name in names]
        results = await asyncio.gather(*(
            _chat(group, args.pid, args.peers, args.count, args.reply, rng, deadline)
            for group in groups))
        complete = all(results)
        (trace_dir / f"{args.pid}.done").write_text(json.dumps({"complete": complete}))
        # Stay a member (and answer repair requests) until every bot is done.
        while len(list(trace_dir.glob("*.done"))) < args.peers and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    return 0 if complete else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m m2mc.demo.bots",
                                     description="A threaded-chat bot on a real M2MC node.")
    parser.add_argument("--pid", required=True)
    parser.add_argument("--peers", type=int, required=True, help="number of bots in all")
    parser.add_argument("--count", type=int, default=20, help="messages per group")
    parser.add_argument("--reply", type=float, default=0.6, help="reply probability")
    parser.add_argument("--channel", required=True)
    parser.add_argument("--trace-dir", required=True)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--run", default="demo-real")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds")
    parser.add_argument("--groups", default="",
                        help=f"comma-separated, of {', '.join(ALL_GROUPS)} "
                             "(default: demo-causal,demo-total)")
    args = parser.parse_args(argv)
    unknown = [g for g in args.groups.split(",") if g and g not in ALL_GROUPS]
    if unknown:
        parser.error(f"unknown group {unknown[0]!r}")
    return asyncio.run(run_bot(args))


if __name__ == "__main__":
    sys.exit(main())
