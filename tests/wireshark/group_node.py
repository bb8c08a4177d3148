"""One ad hoc node for the capture tests, driven line by line from stdin (public API).

    python group_node.py --pid a --channel URL --trace DIR [--name NAME]
                         [--retention-bytes N --retention-mode M]

Commands (each answered on stdout by ``ok <command>`` once done, or
``error <command>: <why>``):

    join GID ORDER [KEYFILE SUITE]   join by name (keyed with the key file and suite)
    create DESC                      create a group (its id follows: ``created <gid>``)
    discover                         advertise, and collect answers for a second
    rename NAME...                   take another display name (the rest of the line)
    send GID COUNT SIZE              COUNT messages of SIZE bytes; every other one replies
                                     to the last message delivered in the group
    stream GID SIZE                  one streamed message of SIZE bytes (Group.send_stream)
    bodies GID N                     wait until N streamed messages' bodies of the group
                                     were read whole (each delivered one is read)
    members GID PID,PID,...          wait until those are members
    wait GID N                       wait until N messages of the group were delivered
    settle GID N                     wait until N messages were delivered or skipped (gone
                                     everywhere: docs/group.md section 8)
    count GID                        print ``count GID <messages delivered so far>``
    skipped GID                      print ``skipped GID <messages skipped so far>``
    leave GID                        leave the group
    quit                             close the node (trace flushed) and exit
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from m2mc.api import Group, GroupMessage, Node, NodeConfig
from m2mc.group.config import GroupConfig
from m2mc.group.events import MessagesSkipped


def say(text: str) -> None:
    print(text, flush=True)


async def main(args: argparse.Namespace) -> int:
    group_config = GroupConfig(retention_bytes=args.retention_bytes,
                               retention_mode=args.retention_mode)
    config = NodeConfig(pid=args.pid, name=args.name, channel=args.channel, trace_dir=args.trace,
                        run_id=args.run, trace_flush_every=1, group=group_config)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    delivered: dict[str, list[GroupMessage]] = {}
    groups: dict[str, Group] = {}
    readers: list[asyncio.Task[None]] = []
    skipped: dict[str, int] = {}
    bodies: dict[str, int] = {}

    async def watch(node: Node) -> None:
        async for event in node.events():
            if isinstance(event, MessagesSkipped):
                skipped[event.gid] = skipped.get(event.gid, 0) + event.count

    async def body(group: Group, message: GroupMessage) -> None:
        await group.stream(message).read()
        bodies[group.gid] = bodies.get(group.gid, 0) + 1

    async def read(group: Group) -> None:
        async for message in group:
            delivered[group.gid].append(message)
            if message.is_stream and message.sender != args.pid:
                readers.append(asyncio.create_task(body(group, message)))

    def track(group: Group) -> None:
        if group.gid not in groups:
            groups[group.gid] = group
            delivered.setdefault(group.gid, [])
            readers.append(asyncio.create_task(read(group)))

    async def until(condition: object, what: str) -> None:
        for _ in range(1200):  # a minute
            if callable(condition) and condition():
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(what)

    async with Node(config) as node:
        readers.append(asyncio.create_task(watch(node)))
        say("ready")
        while True:
            line = (await reader.readline()).decode().strip()
            if not line or line == "quit":
                break
            words = line.split()
            try:
                match words:
                    case ["join", gid, order]:
                        track(await node.join(gid, order=order))
                    case ["join", gid, order, key_file, suite]:
                        track(await node.join(gid, order=order, key_file=key_file, suite=suite))
                    case ["create", desc]:
                        group = await node.create_group(desc)
                        track(group)
                        say(f"created {group.gid}")
                    case ["discover"]:
                        await node.discover(timeout=1.0)
                    case ["rename", *name]:
                        node.set_name(" ".join(name))
                    case ["send", gid, count, size]:
                        group = groups[gid]
                        for i in range(int(count)):
                            seen = delivered[gid]
                            parent = seen[-1] if seen and i % 2 else None
                            text = f"{args.pid} {i} ".encode()
                            await group.send(text.ljust(int(size), b"."), reply_to=parent)
                    case ["stream", gid, size]:
                        await groups[gid].send_stream(bytes(range(256)) * (int(size) // 256))
                    case ["bodies", gid, count]:
                        await until(lambda g=gid, n=int(count): bodies.get(g, 0) >= n, line)
                    case ["members", gid, pids]:
                        wanted = set(pids.split(","))
                        await until(lambda w=wanted, g=gid: w <= set(groups[g].members), line)
                    case ["wait", gid, count]:
                        await until(lambda g=gid, n=int(count): len(delivered[g]) >= n, line)
                    case ["settle", gid, count]:
                        await until(lambda g=gid, n=int(count):
                                    len(delivered[g]) + skipped.get(g, 0) >= n, line)
                    case ["count", gid]:
                        say(f"count {gid} {len(delivered[gid])}")
                    case ["skipped", gid]:
                        say(f"skipped {gid} {skipped.get(gid, 0)}")
                    case ["leave", gid]:
                        await groups[gid].leave()
                    case _:
                        raise ValueError("unknown command")
                say(f"ok {line}")
            except Exception as exc:  # the test reads the reason
                say(f"error {line}: {type(exc).__name__} {exc}")
        for task in readers:
            task.cancel()
    say("closed")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--run", default="wireshark")
    parser.add_argument("--name", default="", help="display name (none by default)")
    parser.add_argument("--retention-bytes", type=int, default=0)
    parser.add_argument("--retention-mode", default="full")
    sys.exit(asyncio.run(main(parser.parse_args())))
