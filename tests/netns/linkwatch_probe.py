"""Watch a lab interface through a real udp-multicast:// channel (run inside a lab
namespace only): prints ``watching`` (or ``no signal``), ``back`` each time the channel
says its interface came back, and ``got <text>`` for each datagram received.

    python linkwatch_probe.py URL
"""

from __future__ import annotations

import asyncio
import sys

from m2mc.transport.url import open_channel


async def main(url: str) -> None:
    channel = open_channel(url)
    await channel.start()
    watching = channel.watch_link(lambda: print("back", flush=True))
    print("watching" if watching else "no signal", flush=True)
    while True:
        for datagram in await channel.recv_many():
            print(f"got {datagram.decode(errors='replace')}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
