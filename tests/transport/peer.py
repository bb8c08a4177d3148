"""Run as a script by test_multiprocess: one M2MP process that sends one message and listens.

    python peer.py CHANNEL_URL NAME EXPECT GO_FILE

Joins the channel, prints ``ready`` on stderr, waits for GO_FILE to exist (so every
peer listens before anyone sends), sends ``from NAME``, receives EXPECT messages,
then keeps listening briefly for anything extra, and prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from m2mc.runtime.endpoint import M2MPEndpoint

DEADLINE = 20.0
EXTRA_WAIT = 0.3


async def main(url: str, name: str, expect: int, go_file: str) -> None:
    loop = asyncio.get_running_loop()
    async with M2MPEndpoint(url, filters=[b""]) as endpoint:
        print("ready", file=sys.stderr, flush=True)
        deadline = loop.time() + DEADLINE
        while not os.path.exists(go_file) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        sent = await endpoint.send(f"from {name}".encode())
        got: list[str] = []
        extra: list[str] = []
        try:
            while len(got) < expect:
                message = await asyncio.wait_for(endpoint.receive(), deadline - loop.time())
                got.append(message.payload.decode())
            while True:
                message = await asyncio.wait_for(endpoint.receive(), EXTRA_WAIT)
                extra.append(message.payload.decode())
        except TimeoutError:
            pass
        await endpoint.drain()
    print(json.dumps({"name": name, "sent": sent, "got": sorted(got), "extra": extra}),
          flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
