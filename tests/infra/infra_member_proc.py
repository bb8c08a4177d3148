"""A member process for the multi-process test: joins through the application API
(``Node(NodeConfig(mode="infra", ...))``), sends ``--count`` messages once told
``go`` on stdin, prints every delivery as a JSON line, obeys ``move <cell URL>``,
and exits once it delivered ``--expect`` messages (``--expect 0``: once told
``quit``). With ``--data-dir`` it saves its state there and, started again on it,
resumes its membership (docs/infra.md "Switch-off and power-on"). ``--pad N``: each
message is its name, ``|`` and N more bytes (records of 2 KiB or more are kept beside
the hosts' and the member's logs: docs/infra.md, "Durable hosts"); only the name is
printed."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from m2mc.api import Node, NodeConfig


async def main(args: argparse.Namespace) -> None:
    cells = tuple(args.cells.split(","))
    node = Node(NodeConfig(mode="infra", hosts=cells, infra_cell=cells[args.cell], pid=args.pid,
                           trace_dir=args.trace_dir, trace_flush_every=1,
                           data_dir=args.data_dir))
    await node.start()
    group = await node.join("chat", order="total", timeout=30)
    print(json.dumps({"joined": args.pid, "resumed": node.stats()["resumed"]}), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    go = asyncio.Event()
    quit_ = asyncio.Event()

    async def commands() -> None:
        while line := await reader.readline():
            word, _, arg = line.decode().strip().partition(" ")
            if word == "go":
                go.set()
            elif word == "quit":
                quit_.set()
            elif word == "move":
                await node.driver.move(arg)  # type: ignore[attr-defined]
                print(json.dumps({"moved": arg}), flush=True)
            elif word == "dump":  # for debugging a failed run
                c = node.driver.core  # type: ignore[attr-defined]
                print(json.dumps({"dump": {
                    "phase": c.phase.value, "mystable": c.mystable, "seen_high": c.seen_high,
                    "mybuf": sorted(c.mybuf)[:10], "gateway": c.gateway, "cell": c.cell,
                    "pending": c.pending_sends, "nack": str(c.nacks.mynack),
                    "stats": str(c.stats)}}), flush=True)

    async def sender() -> None:
        await go.wait()  # every member has joined: all of them must deliver everything
        for i in range(args.count):
            await group.send(f"{args.pid}-{i}" + ("|" + "x" * args.pad if args.pad else ""))
            await asyncio.sleep(args.interval)

    tasks = [loop.create_task(commands()), loop.create_task(sender())]
    got = 0
    while got < args.expect or (args.expect == 0 and not quit_.is_set()):
        try:
            m = await group.receive(timeout=0.2 if args.expect == 0 else None)
        except TimeoutError:
            continue
        got += 1
        text = m.text.split("|", 1)[0]
        print(json.dumps({"gseq": m.gseq, "mid": str(m.mid), "text": text}), flush=True)
    print(json.dumps({"done": args.pid}), flush=True)
    for t in tasks:
        t.cancel()
    await node.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--pid", required=True)
    p.add_argument("--cells", required=True)
    p.add_argument("--cell", type=int, default=0)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--trace-dir", default=None)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--pad", type=int, default=0)
    asyncio.run(main(p.parse_args()))
