"""What IP fragmentation does to datagrams under steady frame loss, and what cutting
them into packet-sized pieces ourselves does instead (docs/decisions.md, "Cell frames
never rely on IP fragmentation").

    sudo .venv/bin/python bench/ip_reassembly.py [--size 3000] [--rate 200]
                                                  [--seconds 30] [--loss 15]

Two network namespaces on a bridge (tests/netns/netns_lab.py; root needed), nftables
dropping ``--loss`` percent of the UDP frames towards the receiver. The sender sends
``--rate`` datagrams a second for ``--seconds``, twice, alternating nothing else:

* ``fragmented``: datagrams of ``--size`` bytes, which IP cuts into fragments of the
  bridge's 1,500-byte MTU and the receiving kernel puts together;
* ``pieces``: the same bytes as datagrams of at most 1,472 bytes each, counted as
  whole when every one of a group arrived (what m2mc.infra.pieces does).

Reports, for each, the groups received in every 5-second span, their share of those
sent, and the receiver's reassembly counters from /proc/net/snmp. Prints one JSON
object. Sends only inside the namespaces it creates.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "netns"))

from netns_lab import Lab

PORT = 47991
SPAN = 5.0

RECEIVER = """
import socket, sys, time
size, piece, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", {port}))
s.settimeout(0.2)
groups, spans, start = {{}}, [], None
while start is None or time.time() - start < seconds + 3:
    try:
        data = s.recv(70000)
    except socket.timeout:
        continue
    now = time.time()
    start = start if start is not None else now
    gid, index, count = int.from_bytes(data[:4], "big"), data[4], data[5]
    got = groups.setdefault(gid, set())
    got.add(index)
    if len(got) == count:
        span = int((now - start) // {span})
        spans += [0] * (span + 1 - len(spans))
        spans[span] += 1
        groups[gid] = set(range(256))  # done: duplicates do not count twice
spans += [0] * (int(seconds // {span}) - len(spans))
print(spans, flush=True)
"""

SENDER = """
import socket, sys, time
dest, size, piece, rate, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \\
    float(sys.argv[4]), float(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
step = piece - 6
count = -(-size // step)
start, i = time.time(), 0
while time.time() - start < seconds:
    for k in range(count):
        body = bytes(min(step, size - k * step))
        s.sendto(i.to_bytes(4, "big") + bytes([k, count]) + body, (dest, {port}))
    i += 1
    time.sleep(max(0.0, start + i / rate - time.time()))
print(i, flush=True)
"""


def snmp(lab: Lab, host: Any) -> dict[str, int]:
    lines = lab.exec(host, ["cat", "/proc/net/snmp"]).stdout.decode().splitlines()
    names, values = [line.split()[1:] for line in lines if line.startswith("Ip:")][:2]
    return {n: int(v) for n, v in zip(names, values, strict=True) if n.startswith("Reasm")}


def one(lab: Lab, size: int, piece: int, rate: float, seconds: float) -> dict[str, Any]:
    sender, receiver = lab.hosts
    before = snmp(lab, receiver)
    rx = lab.spawn(receiver, [sys.executable, "-c",
                              RECEIVER.format(port=PORT, span=SPAN), str(size), str(piece),
                              str(seconds)])
    time.sleep(0.5)
    tx = lab.spawn(sender, [sys.executable, "-c", SENDER.format(port=PORT),
                            receiver.address, str(size), str(piece), str(rate), str(seconds)])
    sent = int(tx.communicate(timeout=seconds + 30)[0])
    spans = json.loads(rx.communicate(timeout=seconds + 30)[0])
    after = snmp(lab, receiver)
    per_span = rate * SPAN
    return {"sent": sent, "received": sum(spans), "share": round(sum(spans) / sent, 3),
            "per_span": spans, "share_per_span": [round(n / per_span, 2) for n in spans],
            "reassembly": {k: after[k] - before.get(k, 0) for k in after}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--loss", type=int, default=15)
    args = parser.parse_args()
    lab = Lab(size=2).create()
    try:
        lab.set_loss(args.loss, towards=[lab.hosts[1]])
        out = {"size": args.size, "rate": args.rate, "seconds": args.seconds,
               "loss_percent": args.loss,
               "fragmented": one(lab, args.size, 65_000, args.rate, args.seconds),
               "pieces": one(lab, args.size, 1472, args.rate, args.seconds)}
    finally:
        lab.destroy()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
