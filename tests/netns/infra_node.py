"""One infrastructure-mode member of the namespace tests, on the public API (m2mc.api).

    python infra_node.py --pid m0 --cells URL,URL,URL --cell 0 --key-file K \
        --trace DIR --peers m0,m1,... --send 20 --go FILE

Joins the deployment's group through the cell ``--cell`` (each URL on this
namespace's own interface), prints ``<pid> joined`` on stderr, waits for the file
``--go`` (every member has joined), sends ``--send`` messages (``<pid> sent k``; one
every ``--interval`` seconds, or 0.01 while the file ``--burst`` exists) and
prints ``<pid> done`` once it has delivered every message of every peer, and ``<pid>
at <host>`` whenever its gateway changes (``None``: between cells). It keeps
running (moving cells when its host dies, as the protocol asks) until SIGTERM, then
prints one JSON line: what it delivered, in which order, and its statistics.

Switch-off and power-on: with ``--data-dir`` the member saves its state
(docs/infra.md); killed with SIGKILL and started again with ``--already-sent K`` (the
last ``sent K`` the first process printed), it resumes: it does not wait for
``--go``, sends the rest of its messages (up to the id ``--send``: ``sent K`` is the
seqno of the id ``send`` returned), and counts as delivered what its first
process delivered, read from its own trace (the trace is written with the saved
state, so it holds what was handed to the application).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

from m2mc.api import Node, NodeConfig
from m2mc.security.keys import GroupKey

BURST = 0.01  # seconds between two sends while the --burst file exists


def state(node: Node) -> dict[str, object]:
    """Where the member stands, for a failure's message."""
    driver = getattr(node, "driver", None)
    if driver is None:
        return {}
    core = driver.core
    up = driver.uplink
    return {"cell": driver.cell, "gateway": core.gateway, "uplink": core.gateway_addr,
            "phase": core.phase.value, "mystable": core.mystable, "seen_high": core.seen_high,
            "from": "" if up is None or up.udp is None else "{}:{}".format(*up.address)}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def main(args: argparse.Namespace) -> int:
    cells = tuple(args.cells.split(","))
    wanted = {f"{p}:{s}" for p in args.peers.split(",") for s in range(1, args.send + 1)}
    delivered: list[tuple[int, str]] = []
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    config = NodeConfig(mode="infra", hosts=cells, infra_cell=cells[args.cell], pid=args.pid,
                        infra_key=GroupKey(key_file=args.key_file), trace_dir=args.trace,
                        run_id=args.run, trace_flush_every=1, data_dir=args.data_dir)
    restarted = args.already_sent >= 0
    if restarted:
        delivered.extend((0, mid) for mid in delivered_before(Path(args.trace), args.pid))

    def complete() -> bool:
        return wanted <= {mid for _, mid in delivered}

    async with Node(config) as node:
        group = await node.join("netns-infra", timeout=60)
        say(f"{args.pid} joined")

        async def read() -> None:
            async for message in group:
                delivered.append((message.gseq or 0, str(message.mid)))

        async def watch() -> None:  # "<pid> at H1": the member's gateway, when it changes
            at = None
            while True:
                gateway = state(node).get("gateway")
                if gateway != at:
                    at = gateway
                    say(f"{args.pid} at {gateway}")
                await asyncio.sleep(0.05)

        reader = asyncio.create_task(read())
        watcher = asyncio.create_task(watch())
        go = Path(args.go)
        burst = Path(args.burst) if args.burst else None
        while not go.exists() and not stop.is_set():
            await asyncio.sleep(0.02)
        # Counted by the ids send returns, the log's numbering: a send whose return a
        # kill -9 beat to the member's save was never seen by anyone, and its number
        # goes to the next one (docs/api.md, docs/group.md section 8), so a restarted
        # process may send one more than its predecessor's last "sent K" says.
        seq = max(args.already_sent, 0)
        while seq < args.send and not stop.is_set():
            text = f"{args.pid} says {seq + 1} "
            seq = (await group.send(text + "." * (args.pad - len(text)))).seq
            say(f"{args.pid} sent {seq}")
            await asyncio.sleep(BURST if burst is not None and burst.exists() else args.interval)
        while not complete() and not stop.is_set():
            await asyncio.sleep(0.05)
        if complete():
            say(f"{args.pid} done")
        await stop.wait()
        reader.cancel()
        watcher.cancel()
        print(json.dumps({"pid": args.pid, "delivered": len({m for _, m in delivered} & wanted),
                          "gseqs": [g for g, _ in delivered],
                          "order": [m for _, m in delivered], "stats": node.stats(),
                          "state": state(node)}),
              flush=True)
    return 0 if complete() else 1


def delivered_before(trace: Path, pid: str) -> list[str]:
    """The mids this member's earlier process delivered, from its trace."""
    out = []
    for path in trace.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("node") == pid and row.get("event") == "deliver" and row.get("mid"):
                out.append(row["mid"])
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", required=True)
    parser.add_argument("--cells", required=True)
    parser.add_argument("--cell", type=int, default=0)
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--run", default="netns-infra")
    parser.add_argument("--peers", required=True)
    parser.add_argument("--send", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.15)
    parser.add_argument("--go", required=True)
    parser.add_argument("--burst", default=None,
                        help="while this file exists, send every 0.01 s, not every --interval")
    parser.add_argument("--data-dir", default=None, help="save the member's state here")
    parser.add_argument("--pad", type=int, default=0,
                        help="bytes of each message (padded with dots; 0: just its text)")
    parser.add_argument("--already-sent", type=int, default=-1,
                        help="a power-on: the first process printed 'sent K'")
    sys.exit(asyncio.run(main(parser.parse_args())))
