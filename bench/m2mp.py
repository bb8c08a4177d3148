"""M2MP throughput over loopback multicast, next to raw UDP multicast of the same packets.

    .venv/bin/python bench/m2mp.py [--receivers 3] [--redundancy 1] [--flow-window N] [--quick]
    .venv/bin/python bench/m2mp.py --packet-sizes 508,1472,65000   # 64 KiB messages only

For 100-byte and 64 KiB messages: one sender process and N receiver processes
on a fresh loopback multicast group. First the raw reference: the sender blasts
the very packets M2MP would send (plain ``sendto`` in a loop) and each receiver
counts them (plain ``recv``). Then M2MP: ``M2MPEndpoint.send`` for every message
(with flow control), ``receive`` at each receiver. Rates are measured at the
receivers, from the sender's first send to the receiver's last arrival, and
averaged over receivers; raw and M2MP runs alternate ``--trials`` times and the
medians are reported, since the machine's load drifts. Prints one JSON object;
``ratio`` is the median over trials of the M2MP packet rate over the raw packet
rate of the same trial (target: at least 0.5). Since other work on the machine
moves wall-clock rates a lot, it also reports CPU microseconds per packet summed
over all processes, for raw and M2MP, and their quotient ``cpu_ratio``.

``--packet-sizes`` measures 64 KiB messages only, once per packet size (``packet=``
on the sender's channel URL, docs/m2mp.md; the receivers keep the default URL, as a
508-byte node reading a larger sender would): raw UDP sends the same packets at
that size. ``packet_sizes`` in the JSON has, per size, M2MP and raw MB/s and
``ratio`` as above, and ``mb_per_s_vs_raw_508``: M2MP's MB/s over raw UDP's at 508
bytes in the same run, the reference the default packet size is held to.
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
import time
from typing import Any

from m2mc.runtime.endpoint import M2MPEndpoint
from m2mc.transport.multicast import open_multicast_socket
from m2mc.transport.url import MulticastSpec, parse_channel_url
from m2mc.wire.m2mp import M2MPConfig
from m2mc.wire.packet import MAX_PACKET, check_packet_size, fragment_count, fragments

END = b"END-OF-RAW-BENCH"  # not an M2MP-sized header; only the raw receivers look for it
IDLE = 2.0  # a receiver stops after this long without traffic (after the first arrival)
START_WAIT = 30.0


def payloads(count: int, size: int) -> list[bytes]:
    rng = random.Random(size)
    return [rng.randbytes(size) for _ in range(count)]


# ---------------------------------------------------------------- roles
def raw_receiver(url: str) -> dict[str, Any]:
    spec = parse_channel_url(url)
    assert isinstance(spec, MulticastSpec)
    sock = open_multicast_socket(spec)
    sock.setblocking(True)
    sock.settimeout(START_WAIT)
    print("ready", file=sys.stderr, flush=True)
    cpu = time.process_time()
    count = size = 0
    first = last = 0.0
    while True:
        try:
            data = sock.recv(65536)  # any packet size (a larger one: --packet-sizes)
        except TimeoutError:
            break
        if data == END:
            break
        now = time.monotonic()
        if not count:
            first = now
            sock.settimeout(IDLE)
        count += 1
        size += len(data) - 8
        last = now
    return {"packets": count, "payload_bytes": size, "first": first, "last": last,
            "cpu": time.process_time() - cpu}


def raw_sender(url: str, count: int, size: int, packet: int = MAX_PACKET) -> dict[str, Any]:
    spec = parse_channel_url(url)
    assert isinstance(spec, MulticastSpec)
    sock = open_multicast_socket(spec)
    sock.setblocking(True)
    rng = random.Random(1)
    packets = [p for payload in payloads(count, size)
               for p in fragments(rng.getrandbits(32), payload, packet)]
    destination = (spec.group, spec.port)
    sendto = sock.sendto
    cpu = time.process_time()
    start = time.monotonic()
    for packet in packets:
        sendto(packet, destination)
    end = time.monotonic()
    cpu = time.process_time() - cpu
    for _ in range(50):  # the end marker, repeated in case some copies are dropped
        time.sleep(0.01)
        sendto(END, destination)
    return {"packets": len(packets), "start": start, "end": end, "cpu": cpu}


async def m2mp_receiver(url: str, count: int) -> dict[str, Any]:
    async with M2MPEndpoint(url, M2MPConfig(), filters=[b""],
                            max_receive_queue=1 << 20) as endpoint:
        print("ready", file=sys.stderr, flush=True)
        cpu = time.process_time()
        received = size = 0
        first = last = 0.0

        async def watchdog() -> None:
            # Stop when idle: START_WAIT before the first message, IDLE after it.
            loop = asyncio.get_running_loop()
            seen, progress = 0, loop.time()
            while True:
                await asyncio.sleep(0.1)
                if received != seen:
                    seen, progress = received, loop.time()
                elif loop.time() - progress > (IDLE if received else START_WAIT):
                    await endpoint.close()
                    return

        guard = asyncio.ensure_future(watchdog())
        async for message in endpoint:  # no per-message timeout: that costs a task each
            last = time.monotonic()
            if not received:
                first = last
            received += 1
            size += len(message.payload)
            if received == count:
                break
        guard.cancel()
        cpu = time.process_time() - cpu
        stats = endpoint.stats
    return {"messages": received, "payload_bytes": size, "first": first, "last": last,
            "cpu": cpu, "dropped_in_socket_or_inbox": stats["channel_dropped_inbound"],
            "abandoned": stats["abandoned"]}


async def m2mp_sender(url: str, count: int, size: int, redundancy: int,
                      window: int, packet: int = MAX_PACKET) -> dict[str, Any]:
    messages = payloads(count, size)
    config = M2MPConfig(redundancy=redundancy, flow_window=window or None)
    sender_url = url if packet == MAX_PACKET else f"{url}&packet={packet}"
    async with M2MPEndpoint(sender_url, config) as endpoint:
        cpu = time.process_time()
        start = time.monotonic()
        for payload in messages:
            await endpoint.send(payload)
        await endpoint.drain()
        end = time.monotonic()
        cpu = time.process_time() - cpu
        stats = endpoint.stats
    return {"messages": count, "start": start, "end": end, "cpu": cpu,
            "flow_timeouts": stats["flow_timeouts"], "flow_window": endpoint.config.flow_window}


# --------------------------------------------------------- orchestration
def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, "--role", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_ready(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stderr is not None
    line = proc.stderr.readline()  # the child prints "ready" once joined (or dies)
    if b"ready" not in line:
        raise RuntimeError(f"receiver failed to start: {line!r}")


def collect(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    if proc.returncode:
        raise RuntimeError(f"bench child failed: {err.decode()[-500:]}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def run_pair(kind: str, url: str, receivers: int, count: int, size: int,
             redundancy: int, window: int, packet: int = MAX_PACKET
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    procs = [spawn(f"{kind}-recv", url, str(count)) for _ in range(receivers)]
    try:
        for proc in procs:
            wait_ready(proc)
        sender = spawn(f"{kind}-send", url, str(count), str(size), str(redundancy), str(window),
                       str(packet))
        sent = collect(sender)
        return sent, [collect(proc) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def _url(rng: random.Random) -> str:
    group = f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}"
    return f"udp-multicast://{group}:{rng.randrange(20000, 60000)}?iface=127.0.0.1&ttl=1"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def measure(receivers: int, count: int, size: int, redundancy: int, window: int, trials: int,
            rng: random.Random, packet: int = MAX_PACKET) -> dict[str, Any]:
    """Raw and M2MP runs, interleaved ``trials`` times (the machine's load drifts); medians."""
    per_message = fragment_count(size, packet)
    total_packets = count * per_message
    raw_rates, raw_delivered, raw_seconds = [], [], []
    msg_rates, delivered, seconds, flow_timeouts, drops = [], [], [], [], []
    raw_cpu, m2mp_cpu = [], []  # CPU seconds of all processes per packet sent
    flow_window = window
    for _ in range(trials):
        raw_sent, raw_got = run_pair("raw", _url(rng), receivers, count, size, redundancy,
                                     window, packet)
        rates = [r["packets"] / max(r["last"] - raw_sent["start"], 1e-9)
                 for r in raw_got if r["packets"]]
        raw_rates.append(sum(rates) / len(rates) if rates else 0.0)
        raw_delivered.append(sum(r["packets"] for r in raw_got) / (total_packets * receivers))
        raw_seconds.append(raw_sent["end"] - raw_sent["start"])
        raw_cpu.append((raw_sent["cpu"] + sum(r["cpu"] for r in raw_got)) / total_packets)

        sent, got = run_pair("m2mp", _url(rng), receivers, count, size, redundancy, window,
                             packet)
        flow_window = sent["flow_window"]
        rates = [r["messages"] / max(r["last"] - sent["start"], 1e-9)
                 for r in got if r["messages"]]
        msg_rates.append(sum(rates) / len(rates) if rates else 0.0)
        delivered.append(sum(r["messages"] for r in got) / (count * receivers))
        seconds.append(sent["end"] - sent["start"])
        flow_timeouts.append(sent["flow_timeouts"])
        drops.append(sum(r["dropped_in_socket_or_inbox"] for r in got))
        m2mp_cpu.append((sent["cpu"] + sum(r["cpu"] for r in got)) / total_packets)
    msg_rate, raw_rate = _median(msg_rates), _median(raw_rates)
    packet_rate = msg_rate * per_message
    # Each trial's raw and M2MP runs are back to back, so their ratio sees the same load.
    ratios = [m * per_message / r for m, r in zip(msg_rates, raw_rates, strict=True) if r]
    return {
        "message_bytes": size, "messages": count, "packets_per_message": per_message,
        "packet_size": packet,
        "trials": trials,
        "m2mp": {"messages_per_s": round(msg_rate, 1),
                 "mb_per_s": round(msg_rate * size / 1e6, 3),
                 "packets_per_s": round(packet_rate, 1),
                 "delivered_fraction": round(_median(delivered), 4),
                 "sender_seconds": round(_median(seconds), 3),
                 "flow_timeouts": max(flow_timeouts),
                 "flow_window": flow_window,
                 "inbox_drops": max(drops),
                 "messages_per_s_each_trial": [round(r, 1) for r in msg_rates]},
        "raw_udp_multicast": {"packets_per_s": round(raw_rate, 1),
                              "mb_per_s": round(raw_rate * size / per_message / 1e6, 3),
                              "delivered_fraction": round(_median(raw_delivered), 4),
                              "sender_seconds": round(_median(raw_seconds), 3),
                              "packets_per_s_each_trial": [round(r, 1) for r in raw_rates]},
        "ratio": round(_median(ratios), 3) if ratios else None,
        "ratio_each_trial": [round(r, 3) for r in ratios],
        # Load-independent view: CPU microseconds per packet, all processes together;
        # their quotient is the rate ratio a CPU-bound machine would show.
        "cpu_us_per_packet": {"m2mp": round(_median(m2mp_cpu) * 1e6, 2),
                              "raw": round(_median(raw_cpu) * 1e6, 2)},
        "cpu_ratio": round(_median(raw_cpu) / _median(m2mp_cpu), 3) if m2mp_cpu else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--receivers", type=int, default=3)
    parser.add_argument("--redundancy", type=int, default=1,
                        help="M2MP redundancy (1: exactly the raw packets; default 1)")
    parser.add_argument("--flow-window", type=int, default=0,
                        help="packets in flight under M2MP flow control (1: the seed's "
                             "stop-and-wait; default 0: the endpoint's default)")
    parser.add_argument("--trials", type=int, default=5,
                        help="interleaved raw/M2MP runs per size; medians are reported")
    parser.add_argument("--quick", action="store_true", help="fewer messages (a smoke run)")
    parser.add_argument("--packet-sizes", default="",
                        help="comma-separated M2MP packet sizes (e.g. 508,1472,65000): "
                             "64 KiB messages at each, against raw UDP at each")
    args = parser.parse_args()
    if args.role:
        role, url, *rest = args.role
        numbers = [int(x) for x in rest]
        result: dict[str, Any]
        if role == "raw-recv":
            result = raw_receiver(url)
        elif role == "raw-send":
            result = raw_sender(url, numbers[0], numbers[1], numbers[4])
        elif role == "m2mp-recv":
            result = asyncio.run(m2mp_receiver(url, numbers[0]))
        else:
            result = asyncio.run(m2mp_sender(url, *numbers[:5]))
        print(json.dumps(result), flush=True)
        return 0
    scale = 5 if args.quick else 1
    rng = random.Random()
    if args.packet_sizes:
        return packet_sizes(args, [int(s) for s in args.packet_sizes.split(",")], scale, rng)
    results = [measure(args.receivers, 20000 // scale, 100, args.redundancy, args.flow_window,
                       args.trials, rng),
               measure(args.receivers, 150 // scale, 64 * 1024, args.redundancy,
                       args.flow_window, args.trials, rng)]
    ratios = [r["ratio"] for r in results if r["ratio"] is not None]
    print(json.dumps({
        "bench": "m2mp", "receivers": args.receivers, "redundancy": args.redundancy,
        "cpus": os.cpu_count(), "python": sys.version.split()[0], "results": results,
        "target_ratio": 0.5, "target_met": bool(ratios) and min(ratios) >= 0.5,
    }, indent=2))
    return 0


def packet_sizes(args: argparse.Namespace, sizes: list[int], scale: int,
                 rng: random.Random) -> int:
    """64 KiB messages at each packet size (``--packet-sizes``), raw UDP alongside."""
    for size in sizes:
        check_packet_size(size)
    by_size = {size: measure(args.receivers, 150 // scale, 64 * 1024, args.redundancy,
                             args.flow_window, args.trials, rng, size) for size in sizes}
    base = by_size.get(MAX_PACKET) or measure(args.receivers, 150 // scale, 64 * 1024,
                                              args.redundancy, args.flow_window, args.trials,
                                              rng)
    raw_508 = base["raw_udp_multicast"]["mb_per_s"]
    summary = {str(size): {
        "m2mp_mb_per_s": r["m2mp"]["mb_per_s"], "raw_mb_per_s": r["raw_udp_multicast"]["mb_per_s"],
        "ratio": r["ratio"], "cpu_us_per_packet": r["cpu_us_per_packet"],
        "m2mp_delivered_fraction": r["m2mp"]["delivered_fraction"],
        "raw_delivered_fraction": r["raw_udp_multicast"]["delivered_fraction"],
        "mb_per_s_vs_raw_508": round(r["m2mp"]["mb_per_s"] / raw_508, 3) if raw_508 else None,
    } for size, r in by_size.items()}
    print(json.dumps({
        "bench": "m2mp.packet_sizes", "receivers": args.receivers,
        "redundancy": args.redundancy, "cpus": os.cpu_count(),
        "python": sys.version.split()[0], "message_bytes": 64 * 1024,
        "packet_sizes": summary, "results": list(by_size.values()),
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
