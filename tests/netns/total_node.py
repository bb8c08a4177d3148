"""One member of an ad hoc total-order group with a durable log, for the kill -9 tests.

    python total_node.py --pid a --channel URL --data DIR --trace DIR --peers a,b,c,d \
        --stop FILE [--run RUN] [--interval 0.1] [--life N]

Starts a `Node` on the public API with ``data_dir=DIR`` and joins the group
``netns-total`` by name in total order (started again on the same ``DIR`` after a
SIGKILL, the node takes the group up from its log and the join changes nothing).
It prints ``<pid> up`` on stderr, waits until every peer is a member (only on its
first start: a restarted member's configuration is in its log), prints ``<pid> sees
all members``, then sends a message every ``--interval`` seconds until the file
``--stop`` exists (``<pid> sent <seq>``, the seqno the group layer gave it; after a
restart it numbers on from its log) and then prints ``<pid> stopped sending``.

Every message the application reads is printed on stdout at once, one line each:
``D <gseq> <mid> <payload>``. Killed, the process has printed exactly what its
application read. On SIGTERM it prints one JSON line on stdout: ``history``, the
group's messages the durable log says this node delivered, in order, as
``[gseq, mid, payload]`` (every lifetime's), and its statistics; then it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

from m2mc.api import Node, NodeConfig
from m2mc.errors import BufferFullError

GROUP = "netns-total"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def main(args: argparse.Namespace) -> int:
    peers = set(args.peers.split(","))
    stop_file = Path(args.stop)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    config = NodeConfig(pid=args.pid, channel=args.channel, data_dir=args.data,
                        trace_dir=args.trace, run_id=args.run, trace_flush_every=1)
    async with Node(config) as node:
        restarted = any(info.gid == GROUP for info in node.joined())
        group = await node.join(GROUP, order="total")
        say(f"{args.pid} up{' (restarted)' if restarted else ''}")

        async def read() -> None:
            try:
                async for message in group:
                    print(f"D {message.gseq} {message.mid} {message.text}", flush=True)
            except Exception as exc:  # loud: a reader that died would look like a stall
                say(f"{args.pid} reader failed: {exc!r}")
                raise

        reader = asyncio.create_task(read())
        while not restarted and not stop.is_set() and not set(group.members) >= peers:
            await asyncio.sleep(0.05)
        say(f"{args.pid} sees all members")
        while not stop.is_set() and not stop_file.exists():
            try:
                mid = await group.send(f"{args.pid} life {args.life}")
            except BufferFullError:  # a group without its majority holds what we send
                await asyncio.sleep(args.interval)
                continue
            say(f"{args.pid} sent {mid.seq}")
            await asyncio.sleep(args.interval)
        say(f"{args.pid} stopped sending")
        await stop.wait()
        reader.cancel()
        history = [[m.gseq, str(m.mid), m.text] for m in node.history(GROUP)]
        print(json.dumps({"pid": args.pid, "history": history, "stats": node.stats()}),
              flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--data", required=True, help="the node's data_dir (durable log)")
    parser.add_argument("--trace", required=True)
    parser.add_argument("--run", default="netns-total")
    parser.add_argument("--peers", required=True)
    parser.add_argument("--stop", required=True, help="stop sending once this file exists")
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--life", type=int, default=0, help="which start this is (payloads)")
    sys.exit(asyncio.run(main(parser.parse_args())))
