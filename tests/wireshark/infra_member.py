"""One infrastructure-mode member for the capture tests, on the public API.

    python infra_member.py --pid m0 --cells URL,URL,URL --cell 0 --trace DIR \
        --peers m0,m1 --send 5 --go FILE [--key-file K --suite S]

Joins the deployment through cell ``--cell`` (``<pid> joined`` on stderr), waits for
the file ``--go``, sends ``--send`` messages and says ``<pid> done`` once it has
delivered every peer's; then runs until SIGTERM and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from m2mc.api import Node, NodeConfig
from m2mc.security.keys import GroupKey


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def main(args: argparse.Namespace) -> int:
    cells = tuple(args.cells.split(","))
    wanted = {f"{p}:{s}" for p in args.peers.split(",") for s in range(1, args.send + 1)}
    delivered: set[str] = set()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    key = None if args.key_file is None else GroupKey(key_file=args.key_file, suite=args.suite)
    config = NodeConfig(mode="infra", hosts=cells, infra_cell=cells[args.cell], pid=args.pid,
                        infra_key=key, trace_dir=args.trace, run_id="ws-infra",
                        trace_flush_every=1)
    async with Node(config) as node:
        group = await node.join("ws-infra", timeout=60)
        say(f"{args.pid} joined")

        async def read() -> None:
            async for message in group:
                delivered.add(str(message.mid))

        reader = asyncio.create_task(read())
        go = Path(args.go)
        while not go.exists() and not stop.is_set():
            await asyncio.sleep(0.02)
        for seq in range(1, args.send + 1):
            await group.send(f"{args.pid} says {seq}")
        while not wanted <= delivered and not stop.is_set():
            await asyncio.sleep(0.05)
        say(f"{args.pid} done")
        await stop.wait()
        reader.cancel()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", required=True)
    parser.add_argument("--cells", required=True)
    parser.add_argument("--cell", type=int, default=0)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--peers", required=True)
    parser.add_argument("--send", type=int, default=5)
    parser.add_argument("--go", required=True)
    parser.add_argument("--key-file", default=None)
    parser.add_argument("--suite", default="hmac-sha256")
    sys.exit(asyncio.run(main(parser.parse_args())))
