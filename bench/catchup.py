"""Catch-up time: a node rejoins a group after missing ``--missed`` messages.

    .venv/bin/python bench/catchup.py [--missed 10000] [--size 100] [--trials 3]

Three processes on a fresh loopback multicast group (239.255.x.y, iface
127.0.0.1, TTL 1), each with its SQLite log: ``A`` (this process) and ``B`` stay
in the group; ``C`` joins, receives a few messages, leaves and exits. ``A`` then
sends ``--missed`` messages (S_b chains of replies). ``C`` is started again on
its log and rejoins; MSP (SyncReq with the digest of what C holds, SyncResp from
A or B, the other suppressing itself) and the repair layer bring it up to date.
The time is measured inside C, from its join call to the delivery of the last
missed message. Prints one JSON object (last line); target: under 2 seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
GROUP = "catchup"


def _url(rng: random.Random) -> str:
    return (f"udp-multicast://239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}:"
            f"{rng.randrange(20000, 60000)}?iface=127.0.0.1&ttl=1")


def _config(pid: str, url: str, data: str) -> Any:
    from m2mc.api import NodeConfig

    return NodeConfig(pid=pid, channel=url, data_dir=data)


async def member(pid: str, url: str, data: str) -> None:
    """B: stays in the group and reads everything (so it can answer C too)."""
    from m2mc.api import Node

    async with Node(_config(pid, url, data)) as node:
        group = await node.join(GROUP, order="sb")
        print("ready", file=sys.stderr, flush=True)

        async def report() -> None:
            while True:
                await asyncio.sleep(0.2)
                stats = node._node().group_stats(GROUP)
                print(json.dumps({k: stats[k] for k in ("responses_sent", "responses_suppressed",
                                                        "delivered")}), flush=True)

        task = asyncio.create_task(report())
        try:
            while True:  # until the harness kills this process
                await group.receive_many()
        finally:
            task.cancel()


async def rejoiner_first(url: str, data: str, warmup: int) -> None:
    """C, first life: join, read the warm-up messages, leave, exit."""
    from m2mc.api import Node

    async with Node(_config("c", url, data)) as node:
        group = await node.join(GROUP, order="sb")
        print("ready", file=sys.stderr, flush=True)
        got = 0
        while got < warmup:
            got += len(await group.receive_many(timeout=30.0))
        await group.leave()
        await asyncio.sleep(0.2)
    print("left", file=sys.stderr, flush=True)


async def rejoiner_again(url: str, data: str, expect: int) -> dict[str, Any]:
    """C, second life: rejoin and time the catch-up."""
    from m2mc.api import Node
    from m2mc.group.events import CatchUpProgress

    async with Node(_config("c", url, data)) as node:
        start = time.monotonic()
        group = await node.join(GROUP, order="sb")
        got = 0
        while got < expect:
            try:
                got += len(await group.receive_many(timeout=10.0))
            except TimeoutError:
                break
        seconds = time.monotonic() - start
        progress = 0
        async for event in _drain(node):
            if isinstance(event, CatchUpProgress):
                progress += 1
        stats = node._node().group_stats(GROUP)
    return {"delivered": got, "seconds": round(seconds, 3), "progress_events": progress,
            "sync_requests": stats.get("requests_sent"), "nacks": stats.get("nacks_sent")}


async def _drain(node: Any) -> Any:
    events = node.events()
    while True:
        try:
            yield await asyncio.wait_for(anext(events), 0.01)
        except (TimeoutError, StopAsyncIteration):
            return


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(HERE), "--role", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_line(proc: subprocess.Popen[str], needle: str) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        if needle in line:
            return
    raise RuntimeError(f"child exited before {needle!r}")


async def trial(missed: int, size: int, warmup: int) -> dict[str, Any]:
    from m2mc.api import Node

    url = _url(random.Random())
    with tempfile.TemporaryDirectory(prefix="m2mc-catchup-") as tmp:
        b = _spawn("member", "b", url, str(Path(tmp) / "b"))
        c = _spawn("first", url, str(Path(tmp) / "c"), str(warmup))
        try:
            await asyncio.to_thread(_wait_line, b, "ready")
            await asyncio.to_thread(_wait_line, c, "ready")
            async with Node(_config("a", url, str(Path(tmp) / "a"))) as node:
                group = await node.join(GROUP, order="sb")
                while len(group.members) < 3:
                    await asyncio.sleep(0.02)
                for i in range(warmup):
                    await group.send(f"warm-up {i}")
                await asyncio.to_thread(_wait_line, c, "left")
                c.wait(30)
                payload = os.urandom(size)
                send_start = time.monotonic()
                previous = None
                for i in range(missed):
                    previous = await group.send(payload, reply_to=previous if i % 10 else None)
                sent_done = time.monotonic()
                while node._node().send_backlog:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.5)  # let B settle what it missed, if anything
                again = _spawn("again", url, str(Path(tmp) / "c"), str(missed))
                out, err = await asyncio.to_thread(again.communicate, timeout=120)
                lines = out.strip().splitlines()
                if not lines:
                    return {"error": err.strip()[-300:]}
                result: dict[str, Any] = json.loads(lines[-1])
                result["sender_seconds"] = round(sent_done - send_start, 3)
                await asyncio.sleep(0.5)
                a_stats = node._node().group_stats(GROUP)
                result["a_sync_responses"] = a_stats.get("responses_sent")
                result["a_sync_suppressed"] = a_stats.get("responses_suppressed")
                result["a_flow_timeouts"] = node._node().m2mp.stats.flow_timeouts
                b.terminate()
                b_out = b.communicate()[0].strip().splitlines()
                if b_out:
                    b_stats = json.loads(b_out[-1])
                    result["b_sync_responses"] = b_stats["responses_sent"]
                    result["b_sync_suppressed"] = b_stats["responses_suppressed"]
                return result
        finally:
            for proc in (b, c):
                if proc.poll() is None:
                    proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--missed", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        name, rest = args.role[0], args.role[1:]
        if name == "member":
            asyncio.run(member(rest[0], rest[1], rest[2]))
        elif name == "first":
            asyncio.run(rejoiner_first(rest[0], rest[1], int(rest[2])))
        else:
            print(json.dumps(asyncio.run(rejoiner_again(rest[0], rest[1], int(rest[2])))),
                  flush=True)
        return 0
    results = [asyncio.run(trial(args.missed, args.size, args.warmup)) for _ in range(args.trials)]
    good = [r["seconds"] for r in results if "seconds" in r and r["delivered"] >= args.missed]
    out = {"missed": args.missed, "size": args.size, "trials": results,
           "seconds_median": statistics.median(good) if good else None,
           "seconds_max": max(good) if good else None, "target_seconds": 2.0,
           "all_caught_up": len(good) == len(results), "load_average": os.getloadavg()[0]}
    print(json.dumps(out), flush=True)
    return 0 if out["all_caught_up"] else 1


if __name__ == "__main__":
    sys.exit(main())
