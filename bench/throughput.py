"""Group-layer throughput next to raw UDP multicast and to pyre (ZeroMQ ZRE), same run.

    .venv/bin/python bench/throughput.py [--receivers 3] [--count 20000] [--size 100]
                                         [--trials 3] [--quick]

Three systems move ``--count`` messages of ``--size`` bytes from one sender
process to ``--receivers`` receiver processes on this machine:

* ``m2mc``: ``m2mc bench throughput`` (the group layer: S_b ordering, NACK repair,
  MSP, the SQLite log; loopback multicast 239.255.x.y, iface 127.0.0.1, TTL 1);
* ``raw``: plain ``sendto`` of each message as one datagram on loopback multicast,
  plain ``recv`` counting at each receiver (losses are simply not counted);
* ``pyre``: zeromq-pyre, a ZRE group (``SHOUT``), run inside a network namespace
  of its own that has only the loopback interface (``unshare -rn``), since its
  discovery broadcasts beacons on the network.

The rate of a system is per receiver: messages that receiver delivered divided by
the time from the first send to its last delivery; the slowest receiver counts.
The trials alternate the three systems so they see the same machine load; the
medians are reported with ``ratio_vs_pyre`` and ``ratio_vs_raw`` (targets: >= 10
and >= 0.3). If pyre or the namespace cannot run here, its entry says why and no
ratio is made up. Prints one JSON object (last line).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
PYTHON = sys.executable
END = b"\x00END-OF-RAW-BENCH"
START_WAIT = 30.0
IDLE = 3.0


def _mcast_url(rng: random.Random) -> tuple[str, int]:
    return f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}", rng.randrange(20000, 60000)


# ------------------------------------------------------------------------ raw UDP
def _raw_socket(group: str, port: int) -> socket.socket:
    from m2mc.transport.multicast import open_multicast_socket
    from m2mc.transport.url import parse_channel_url

    spec = parse_channel_url(f"udp-multicast://{group}:{port}?iface=127.0.0.1&ttl=1")
    return open_multicast_socket(spec)  # type: ignore[arg-type]


def raw_receiver(group: str, port: int) -> dict[str, Any]:
    sock = _raw_socket(group, port)
    sock.setblocking(True)
    sock.settimeout(START_WAIT)
    print("ready", file=sys.stderr, flush=True)
    count, last = 0, None
    while True:
        try:
            data = sock.recv(4096)
        except TimeoutError:
            break
        if data == END:
            break
        count += 1
        last = time.time()
        sock.settimeout(IDLE)
    return {"received": count, "last": last}


def raw_sender(group: str, port: int, count: int, size: int) -> dict[str, Any]:
    sock = _raw_socket(group, port)
    sock.setblocking(True)
    payload = os.urandom(size)
    dest = (group, port)
    start = time.time()
    for _ in range(count):
        sock.sendto(payload, dest)
    end = time.time()
    for _ in range(20):
        sock.sendto(END, dest)
        time.sleep(0.01)
    return {"start": start, "end": end}


def run_raw(receivers: int, count: int, size: int, rng: random.Random) -> dict[str, Any]:
    group, port = _mcast_url(rng)
    role = [PYTHON, str(HERE), "--role"]
    recv = [subprocess.Popen([*role, "raw-recv", group, str(port)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(receivers)]
    for p in recv:
        assert p.stderr is not None
        p.stderr.readline()  # "ready"
    send = subprocess.run([*role, "raw-send", group, str(port), str(count), str(size)],
                          capture_output=True, text=True, check=True)
    start = json.loads(send.stdout.splitlines()[-1])["start"]
    results = [json.loads(p.communicate(timeout=60)[0].splitlines()[-1]) for p in recv]
    return _summary(results, start, count)


def _summary(results: list[dict[str, Any]], start: float, count: int) -> dict[str, Any]:
    rates = [r["received"] / (r["last"] - start) if r.get("last") and r["last"] > start else 0.0
             for r in results]
    return {"msgs_per_s": round(min(rates), 1), "received_min": min(r["received"] for r in results),
            "sent": count}


# --------------------------------------------------------------------------- pyre
PYRE_SCRIPT = r"""
ip link set lo up || exit 3
ip route add 224.0.0.0/4 dev lo 2>/dev/null
for i in $(seq 1 {receivers}); do
  {python} {here} --role pyre-recv {count} > {tmp}/recv-$i.json 2> {tmp}/recv-$i.err &
done
{python} {here} --role pyre-send {count} {size} {receivers} > {tmp}/send.json 2> {tmp}/send.err
wait
"""


def pyre_receiver(count: int) -> dict[str, Any]:
    import zmq
    from pyre import Pyre

    node = Pyre(f"r{os.getpid()}")
    node.join("bench")
    node.start()
    poller = zmq.Poller()
    poller.register(node.socket(), zmq.POLLIN)
    got, last = 0, None
    deadline = time.time() + 120
    idle_since = time.time()
    while got < count and time.time() < deadline:
        if dict(poller.poll(500)).get(node.socket()):
            frames = node.recv()
            if frames and frames[0] == b"SHOUT":
                got += 1
                last = time.time()
                idle_since = last
        elif got and time.time() - idle_since > IDLE:
            break
    node.stop()
    return {"received": got, "last": last}


def pyre_sender(count: int, size: int, receivers: int) -> dict[str, Any]:
    import zmq
    from pyre import Pyre

    node = Pyre(f"s{os.getpid()}")
    node.join("bench")
    node.start()
    poller = zmq.Poller()
    poller.register(node.socket(), zmq.POLLIN)
    peers: set[bytes] = set()
    deadline = time.time() + START_WAIT
    while len(peers) < receivers and time.time() < deadline:
        if dict(poller.poll(200)).get(node.socket()):
            frames = node.recv()
            if frames and frames[0] == b"JOIN":
                peers.add(frames[1])
    time.sleep(0.5)  # let every peer finish its own handshakes
    payload = os.urandom(size)
    start = time.time()
    for _ in range(count):
        node.shout("bench", payload)
    end = time.time()
    time.sleep(IDLE + 2)  # let the receivers drain before the peers go away
    node.stop()
    return {"start": start, "end": end, "peers": len(peers)}


def run_pyre(receivers: int, count: int, size: int) -> dict[str, Any]:
    try:
        import pyre  # noqa: F401
    except ImportError as exc:
        return {"error": f"zeromq-pyre is not importable: {exc}"}
    if not shutil.which("unshare") or not shutil.which("ip"):
        return {"error": "unshare or ip (iproute2) is missing: no loopback-only namespace"}
    with tempfile.TemporaryDirectory(prefix="m2mc-pyre-") as tmp:
        script = PYRE_SCRIPT.format(receivers=receivers, python=PYTHON, here=HERE, count=count,
                                    size=size, tmp=tmp)
        proc = subprocess.run(["unshare", "-rn", "sh", "-c", script], capture_output=True,
                              text=True, timeout=300)
        if proc.returncode != 0:
            return {"error": f"the network namespace could not be used (unshare -rn exit "
                             f"{proc.returncode}): {proc.stderr.strip()[:200]}"}
        try:
            send = json.loads(Path(tmp, "send.json").read_text().splitlines()[-1])
            results = [json.loads(Path(tmp, f"recv-{i}.json").read_text().splitlines()[-1])
                       for i in range(1, receivers + 1)]
        except (OSError, IndexError, ValueError):
            err = " ".join(Path(tmp, n).read_text()[-200:] for n in os.listdir(tmp)
                           if n.endswith(".err"))
            return {"error": f"pyre did not run: {err.strip()[:300]}"}
        if send.get("peers", 0) < receivers:
            return {"error": f"pyre sender saw {send.get('peers')} of {receivers} peers"}
        return _summary(results, send["start"], count)


# --------------------------------------------------------------------------- m2mc
def run_m2mc(receivers: int, count: int, size: int) -> dict[str, Any]:
    proc = subprocess.run([PYTHON, "-m", "m2mc.cli", "bench", "throughput", "--receivers",
                           str(receivers), "--count", str(count), "--size", str(size)],
                          capture_output=True, text=True, timeout=600)
    lines = proc.stdout.strip().splitlines()
    if not lines:
        return {"error": f"m2mc bench failed: {proc.stderr.strip()[-300:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--receivers", type=int, default=3)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one trial of 5000 messages")
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        return _role(args.role)
    if args.quick:
        args.trials, args.count = 1, 5000
    rng = random.Random()
    runs: dict[str, list[dict[str, Any]]] = {"m2mc": [], "raw": [], "pyre": []}
    for _ in range(args.trials):
        runs["raw"].append(run_raw(args.receivers, args.count, args.size, rng))
        runs["m2mc"].append(run_m2mc(args.receivers, args.count, args.size))
        if not runs["pyre"] or "error" not in runs["pyre"][0]:
            runs["pyre"].append(run_pyre(args.receivers, args.count, args.size))
    out: dict[str, Any] = {"receivers": args.receivers, "count": args.count, "size": args.size,
                           "trials": args.trials, "load_average": os.getloadavg()[0]}
    medians: dict[str, float | None] = {}
    for name, results in runs.items():
        good = [r["msgs_per_s"] for r in results if "msgs_per_s" in r]
        errors = [r["error"] for r in results if "error" in r]
        medians[name] = statistics.median(good) if good else None
        out[name] = {"msgs_per_s": medians[name], "trials": results}
        if errors and not good:
            out[name]["error"] = errors[0]
    m, p, r = medians["m2mc"], medians["pyre"], medians["raw"]
    # Per-trial ratios (each pair ran back to back under the same load), then the median.
    pairs_p = [a["msgs_per_s"] / b["msgs_per_s"] for a, b in zip(runs["m2mc"], runs["pyre"],
                                                                  strict=False)
               if a.get("msgs_per_s") and b.get("msgs_per_s")]
    pairs_r = [a["msgs_per_s"] / b["msgs_per_s"] for a, b in zip(runs["m2mc"], runs["raw"],
                                                                  strict=False)
               if a.get("msgs_per_s") and b.get("msgs_per_s")]
    out["ratio_vs_pyre"] = round(statistics.median(pairs_p), 2) if pairs_p and p else None
    out["ratio_vs_raw"] = round(statistics.median(pairs_r), 3) if pairs_r and r and m else None
    out["targets"] = {"ratio_vs_pyre": 10.0, "ratio_vs_raw": 0.3}
    print(json.dumps(out), flush=True)
    return 0


def _role(role: list[str]) -> int:
    name, rest = role[0], role[1:]
    if name == "raw-recv":
        result = raw_receiver(rest[0], int(rest[1]))
    elif name == "raw-send":
        result = raw_sender(rest[0], int(rest[1]), int(rest[2]), int(rest[3]))
    elif name == "pyre-recv":
        result = pyre_receiver(int(rest[0]))
    elif name == "pyre-send":
        result = pyre_sender(int(rest[0]), int(rest[1]), int(rest[2]))
    else:
        raise SystemExit(f"unknown role {name}")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
