"""A threaded-chat bot on the M2MC application API (seeds/000 II, the Threaded Chat).

    .venv/bin/python examples/chat_bot.py                # self-contained demo (mem://)
    .venv/bin/python examples/chat_bot.py --serve \
        --channel 'udp-multicast://239.255.77.77:7777?iface=127.0.0.1&ttl=1'

The bot joins the group ``lobby`` and answers every question (a message ending
in ``?``) with a reply linked to it, so every member shows the answer under its
question (S_b order: never before it). Without ``--serve`` it also starts a
user node in the same process, asks two questions, prints the conversation as a
thread tree and exits.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import defaultdict

from m2mc.api import Group, GroupMessage, Node, NodeConfig
from m2mc.group.events import MemberJoined


async def bot(node: Node, group: Group, stop: asyncio.Event) -> None:
    """Answer questions until ``stop`` is set."""
    async def watch_members() -> None:
        async for event in node.events():
            if isinstance(event, MemberJoined):
                await group.send(f"welcome, {event.pid}!")

    watcher = asyncio.create_task(watch_members())
    while not stop.is_set():
        try:
            message = await group.receive(timeout=0.2)
        except TimeoutError:
            continue
        if message.sender != node.pid and message.text.endswith("?"):
            await group.send(f"good question, {message.sender}: {message.text!r}",
                             reply_to=message)
    watcher.cancel()


def print_tree(messages: list[GroupMessage]) -> None:
    children: dict[str, list[GroupMessage]] = defaultdict(list)
    for m in messages:
        children[str(m.parent)].append(m)

    def show(parent: str, depth: int) -> None:
        for m in children.get(parent, []):
            print(f"{'    ' * depth}{m.sender}: {m.text}")
            show(str(m.mid), depth + 1)

    show("", 0)


async def main() -> None:
    parser = argparse.ArgumentParser(description="A threaded-chat bot on M2MC.")
    parser.add_argument("--channel", default="mem://chat-bot-demo")
    parser.add_argument("--group", default="lobby")
    parser.add_argument("--serve", action="store_true", help="run the bot until interrupted")
    args = parser.parse_args()
    stop = asyncio.Event()
    async with Node(NodeConfig(pid="bot", channel=args.channel)) as bot_node:
        lobby = await bot_node.join(args.group, order="sb")  # by name: no discovery needed
        serving = asyncio.create_task(bot(bot_node, lobby, stop))
        if args.serve:
            await serving
            return
        async with Node(NodeConfig(pid="alice", channel=args.channel)) as alice:
            room = await alice.join(args.group)  # discovered: the bot answers our advertisement
            await room.send("Did you visit Delhi?")
            await room.send("Did you visit Chennai?")
            seen: list[GroupMessage] = []
            while len(seen) < 5:  # two questions, two answers, one welcome
                seen.extend(await room.receive_many(timeout=5.0))
            print_tree(seen)
        stop.set()
        await serving


if __name__ == "__main__":
    asyncio.run(main())
