"""A long-lived M2MP sender for tests/netns/test_iface.py (run inside lab namespaces only).

    python iface_sender.py URL [--by-address]

Opens the channel once, then sends each line of stdin as one M2MP message and
prints ``{"id": ..., "datagrams_out": N, "send_errors": E}`` (the channel's totals
so far). ``--by-address`` makes a name stand for the interface's address when the
channel opens, as on systems without ``ip_mreqn``, instead of its index.
"""

from __future__ import annotations

import asyncio
import json
import sys

from m2mc.runtime.endpoint import M2MPEndpoint
from m2mc.transport import iface


async def main(url: str) -> int:
    loop = asyncio.get_running_loop()
    async with M2MPEndpoint(url) as endpoint:
        print("ready", flush=True)
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            message_id = await endpoint.send(line.strip().encode())
            await endpoint.drain()
            stats = endpoint.channel.stats
            print(json.dumps({"id": message_id, "datagrams_out": stats.datagrams_out,
                              "send_errors": stats.send_errors}), flush=True)
    return 0


if __name__ == "__main__":
    if "--by-address" in sys.argv[2:]:
        iface.BY_INDEX = False
    sys.exit(asyncio.run(main(sys.argv[1])))
