"""Large messages as streams: MB/s and peak memory as the file grows (issue 17 item 5).

    PYTHONPATH=src .venv/bin/python bench/streams.py [--sizes 10M,100M,1G]
                                                     [--modes group,m2mp,raw] [--runs N]

For each size a file of random bytes is written into a temporary directory (deleted
afterwards, with everything the runs stored) and moved, once per system, from one
sender process to one receiver process on loopback (multicast 239.255.x.y, iface
127.0.0.1, TTL 1; nothing leaves the machine):

* ``group``: the group layer through the public API: two ``Node`` processes with
  ``data_dir`` in an S_b group joined by name; the sender ``Group.send_stream(file)``,
  the receiver reads the body with ``Group.stream(message)`` and hashes it piece by
  piece (both hold only pieces; the bodies go to each node's body store on disk);
* ``m2mp``: ``m2mc send --file`` and ``m2mc listen --count 1`` (the CLI's own code,
  run by its ``main``; the listener reads the message as a stream);
* ``raw``: a plain socket sender of 508-byte datagrams (an M2MP packet's size: 8
  bytes of sequence number, 500 of the file), no redundancy, no flow control, and
  a plain ``recv`` receiver counting bytes (losses are not repaired, only counted).

Rates are MB/s (10^6 bytes) of the file at the receiver: its size divided by the
time from the sender's first byte (taken just before the send call, after the
process started and joined) to the receiver's last; for ``raw``, the bytes that
arrived over the same span, with the loss beside it. Peak RSS is each child's
``ru_maxrss`` (``os.wait4``), in MiB. ``flatness`` is, per system and role, the peak
RSS at the largest size over that at the smallest (1G over 10M with the defaults)
that completed: 1.0 means memory does not grow with the file. Both ends check the
SHA-256 (group, m2mp). M2MP never sends a packet again, so a fragment lost in both
copies (the receiver fell behind its socket buffer) abandons the message (``gap``):
that size's entry then says so, with the time until then and the peak RSS. In group
mode each entry also has the receiver's and the sender's stream counters
(``stream_chunks_refused``: chunks the receiver refused as too far ahead of its
window, which the sender's pacing should make 0; ``stream_paced``: how often the
sender waited for it). ``--runs N`` moves each file N times: the size's entry is then
the runs' summary (how many completed, median MB/s, the most peak RSS, the chunks
refused in all) with each run in ``each``; progress goes to stderr. Prints one JSON
object.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
PYTHON = sys.executable
MODES = ("group", "m2mp", "raw")
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
GROUP_NAME = "bench-streams"
DATAGRAM_DATA = 500  # bytes of the file per raw datagram (an M2MP fragment's)
END = b"\xffEND-OF-RAW-STREAM"
READY_WAIT = 60.0
# Counters of each end in the group mode's JSON (docs/operations.md): refused chunks
# are those a receiver took as too far ahead of its window (the pacing's business).
RECV_STATS = ("stream_chunks_refused", "stream_chunks_received", "stream_chunk_duplicates",
              "stream_nacks_sent", "stream_acks_sent")
SEND_STATS = ("stream_chunks_sent", "stream_chunks_repaired", "stream_paced",
              "stream_laggards")


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = UNITS.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in UNITS else text
    try:
        value = int(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 10M, 1G)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"size must be > 0, got {text!r}")
    return value


def label(size: int) -> str:
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def channel_url(rng: random.Random) -> str:
    return (f"udp-multicast://239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}:"
            f"{rng.randrange(20000, 60000)}?iface=127.0.0.1&ttl=1")


def make_file(directory: Path, size: int, seed: int) -> Path:
    path = directory / f"file-{label(size)}.bin"
    rng = random.Random(seed)
    with path.open("wb") as out:
        left = size
        while left:
            n = min(left, 1 << 20)
            out.write(rng.randbytes(n))
            left -= n
    return path


# ------------------------------------------------------------------ child processes
class Child:
    """A child process whose peak RSS is read by ``os.wait4`` when it ends."""

    result: dict[str, Any] | None = None  # set once it ended

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)

    def wait_line(self, stream: str, starts: str, deadline: float) -> str:
        pipe = self.proc.stderr if stream == "stderr" else self.proc.stdout
        assert pipe is not None
        while time.time() < deadline:
            line = pipe.readline().decode(errors="replace")
            if not line:
                self.result = self.finish()
                raise RuntimeError(f"child ended before {starts!r}: {self.result}")
            if line.startswith(starts):
                return line
        raise TimeoutError(starts)

    def finish(self, stdin: bytes | None = None) -> dict[str, Any]:
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            if stdin:
                proc.stdin.write(stdin)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        out = proc.stdout.read().decode(errors="replace")
        err = proc.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return {"rc": proc.returncode, "stdout": out, "stderr": err[-2000:],
                "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 2)}

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            os.waitpid(self.proc.pid, 0)
            self.proc.returncode = -9


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(HERE.parent.parent / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def me(*args: str) -> list[str]:
    return [PYTHON, str(HERE), "child", *args]


def last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            parsed: dict[str, Any] = json.loads(line)
            return parsed
    raise ValueError(f"no JSON line in {text[-500:]!r}")


def run_pair(mode: str, path: Path, size: int, work: Path, url: str,
             timeout: float) -> dict[str, Any]:
    env = child_env()
    deadline = time.time() + timeout
    receiver = sender = None
    try:
        if mode == "group":
            receiver = Child(me("group-recv", url, str(work / "r")), env)
            receiver.wait_line("stderr", "ready", time.time() + READY_WAIT)
            sender = Child(me("group-send", url, str(work / "s"), str(path)), env)
        elif mode == "m2mp":
            receiver = Child(me("cli", "listen", "--channel", url, "--count", "1",
                                "--timeout", "30"), env)
            receiver.wait_line("stderr", "m2mc listen: listening", time.time() + READY_WAIT)
            sender = Child(me("cli", "send", "--channel", url, "--file", str(path)), env)
        else:
            receiver = Child(me("raw-recv", url), env)
            receiver.wait_line("stderr", "ready", time.time() + READY_WAIT)
            sender = Child(me("raw-send", url, str(path)), env)
        if mode == "m2mp":  # the listener's line comes when the last piece is in
            try:
                line = receiver.wait_line("stdout", "{", deadline)
            except RuntimeError:  # it ended without one: the message was abandoned
                return _abandoned(sender, receiver, time.time())
            end = time.time()
            sent = sender.finish()
            got = receiver.finish()
            got["stdout"] = line + got["stdout"]
            start = float(sent["stderr"].split("start ", 1)[1].split()[0])
            recv_json = json.loads(line)
            send_json = last_json(sent["stdout"])
            recv_json.update(first=None, last=end)
        else:
            got = receiver.finish() if mode == "raw" else _group_receiver(receiver, deadline)
            sent = sender.finish(b"quit\n")
            recv_json = last_json(got["stdout"])
            send_json = last_json(sent["stdout"])
            start = float(send_json["start"])
    except Exception as exc:
        for child in (sender, receiver):
            if child is not None:
                child.kill()
        return {"error": f"{type(exc).__name__}: {exc}"}
    span = recv_json["last"] - start
    received = int(recv_json["len"])
    out: dict[str, Any] = {
        "mb_per_s": round(received / span / 1e6, 2) if span > 0 else None,
        "seconds": round(span, 2), "received_bytes": received,
        "sender_peak_rss_mib": sent["peak_rss_mib"], "receiver_peak_rss_mib": got["peak_rss_mib"],
        "sender_cpu_s": sent["cpu_s"], "receiver_cpu_s": got["cpu_s"]}
    if mode == "raw":
        out["loss"] = round(1 - received / size, 4)
    else:
        out["complete"] = received == size and recv_json["sha256"] == send_json["sha256"]
    if mode == "group":
        out["receiver_stats"] = recv_json.get("stats", {})
        out["sender_stats"] = send_json.get("stats", {})
    if sent["rc"] or got["rc"]:
        out["exit_status"] = {"sender": sent["rc"], "receiver": got["rc"]}
        out["stderr"] = {"sender": sent["stderr"][-400:], "receiver": got["stderr"][-400:]}
    return out


def _abandoned(sender: Child, receiver: Child, end: float) -> dict[str, Any]:
    """``m2mc listen`` ended without its line: what M2MP does when a packet is lost in
    every copy (it never sends one again): the figures up to there, and why."""
    got = receiver.result or receiver.finish()
    sent = sender.finish()
    start = float(sent["stderr"].split("start ", 1)[1].split()[0])
    reason = got["stderr"].strip().splitlines()[-1:] or [f"exit status {got['rc']}"]
    return {"error": reason[0], "seconds_until_abandoned": round(end - start, 2),
            "sender_peak_rss_mib": sent["peak_rss_mib"],
            "receiver_peak_rss_mib": got["peak_rss_mib"],
            "sender_cpu_s": sent["cpu_s"], "receiver_cpu_s": got["cpu_s"]}


def _group_receiver(receiver: Child, deadline: float) -> dict[str, Any]:
    line = receiver.wait_line("stdout", "{", deadline)
    got = receiver.finish()
    got["stdout"] = line + got["stdout"]
    return got


# ------------------------------------------------------------------ the roles
async def group_recv(url: str, data_dir: str) -> None:
    from m2mc.api import Node, NodeConfig

    async with Node(NodeConfig(pid="recv", channel=url, data_dir=data_dir)) as node:
        group = await node.join(GROUP_NAME, order="sb")
        print("ready", file=sys.stderr, flush=True)
        async for message in group:
            if not message.is_stream:
                continue
            sha = hashlib.sha256()
            size = 0
            first = None
            async for piece in group.stream(message):
                if first is None:
                    first = time.time()
                sha.update(piece)
                size += len(piece)
            last = time.time()
            stats = node.stats()
            print(json.dumps({"len": size, "sha256": sha.hexdigest(), "first": first,
                              "last": last, "stats": {k: stats.get(k, 0) for k in RECV_STATS}}),
                  flush=True)
            return


async def group_send(url: str, data_dir: str, path: str) -> None:
    from m2mc.api import Node, NodeConfig

    config = NodeConfig(pid="send", channel=url, data_dir=data_dir, deliver_own=False)
    async with Node(config) as node:
        group = await node.join(GROUP_NAME, order="sb")
        for _ in range(int(READY_WAIT / 0.05)):
            if "recv" in group.members:
                break
            await asyncio.sleep(0.05)
        else:
            raise TimeoutError("the receiver never became a member")
        sha = hashlib.sha256()

        class Hashing:  # the file, hashed as send_stream reads it
            def __init__(self, f: Any) -> None:
                self.f = f

            def read(self, n: int) -> bytes:
                piece: bytes = self.f.read(n)
                sha.update(piece)
                return piece

        start = time.time()
        with open(path, "rb") as f:
            await group.send_stream(Hashing(f), size=os.path.getsize(path))
        queued = time.time()
        print(json.dumps({"start": start, "queued": queued, "sha256": sha.hexdigest()}),
              flush=True)
        # Stay (answering the receiver's NACKs) until the bench says the body is in.
        await asyncio.to_thread(sys.stdin.readline)
        stats = node.stats()
        print(json.dumps({"start": start, "queued": queued, "sha256": sha.hexdigest(),
                          "stats": {k: stats.get(k, 0) for k in SEND_STATS}}), flush=True)


def multicast_spec(url: str) -> Any:
    from m2mc.transport.url import MulticastSpec, parse_channel_url

    spec = parse_channel_url(url)
    assert isinstance(spec, MulticastSpec)
    return spec


def raw_socket(url: str) -> socket.socket:
    from m2mc.transport.multicast import open_multicast_socket

    return open_multicast_socket(multicast_spec(url))


def raw_recv(url: str) -> None:
    sock = raw_socket(url)
    sock.setblocking(True)
    sock.settimeout(READY_WAIT)
    print("ready", file=sys.stderr, flush=True)
    size, first, last = 0, None, None
    while True:
        try:
            data = sock.recv(2048)
        except TimeoutError:
            break
        if data == END:
            break
        if first is None:
            first = time.time()
            sock.settimeout(3.0)
        size += len(data) - 8
        last = time.time()
    print(json.dumps({"len": size, "first": first, "last": last or time.time()}), flush=True)


def raw_send(url: str, path: str) -> None:
    spec = multicast_spec(url)
    sock = raw_socket(url)
    sock.setblocking(True)
    target = (spec.group, spec.port)
    seq = 0
    start = time.time()
    with open(path, "rb") as f:
        while piece := f.read(DATAGRAM_DATA * 2048):
            for offset in range(0, len(piece), DATAGRAM_DATA):
                sock.sendto(seq.to_bytes(8, "big") + piece[offset:offset + DATAGRAM_DATA],
                            target)
                seq += 1
    for _ in range(20):
        time.sleep(0.05)
        sock.sendto(END, target)
    print(json.dumps({"start": start, "datagrams": seq}), flush=True)


def run_child(args: list[str]) -> int:
    role, rest = args[0], args[1:]
    if role == "group-recv":
        asyncio.run(group_recv(*rest))
    elif role == "group-send":
        asyncio.run(group_send(*rest))
    elif role == "raw-recv":
        raw_recv(*rest)
    elif role == "raw-send":
        raw_send(*rest)
    elif role == "cli":  # m2mc itself, its start time on stderr first
        from m2mc.cli import main as cli_main

        print(f"start {time.time()}", file=sys.stderr, flush=True)
        return cli_main(rest)
    else:
        raise SystemExit(f"unknown role {role}")
    return 0


# ------------------------------------------------------------------ the run
def main() -> int:
    if sys.argv[1:2] == ["child"]:
        return run_child(sys.argv[2:])
    parser = argparse.ArgumentParser(
        description="MB/s and peak RSS of large messages sent as streams: the group "
                    "layer, M2MP (m2mc send/listen) and raw UDP, on loopback. Prints one "
                    "JSON object.")
    parser.add_argument("--sizes", default="10M,100M,1G",
                        type=lambda t: [parse_size(s) for s in t.split(",") if s.strip()],
                        help="file sizes, comma-separated (default: 10M,100M,1G)")
    parser.add_argument("--modes", default=",".join(MODES),
                        type=lambda t: [m.strip() for m in t.split(",") if m.strip()],
                        help="systems to run: group,m2mp,raw (default: all three)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds one transfer may take before it counts as failed")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--runs", type=int, default=1,
                        help="transfers per size and system (default 1); with more, each "
                             "size's entry is a list of runs and a summary beside it")
    args = parser.parse_args()
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.sizes:
        print(f"bench/streams.py: error: unknown mode {bad[0]!r}" if bad
              else "bench/streams.py: error: no size given", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="m2mc-bench-streams-"))
    results: dict[str, dict[str, Any]] = {m: {} for m in args.modes}
    load = [os.getloadavg()[0]]
    began = time.time()
    try:
        for size in sorted(set(args.sizes)):
            path = make_file(root, size, args.seed)
            for mode in args.modes:
                runs = []
                for run in range(args.runs):
                    work = root / f"{mode}-{label(size)}-{run}"
                    work.mkdir()
                    runs.append(run_pair(mode, path, size, work, channel_url(rng),
                                         args.timeout))
                    shutil.rmtree(work, ignore_errors=True)
                    load.append(os.getloadavg()[0])
                    if args.runs > 1:
                        print(json.dumps({"progress": f"{mode} {label(size)} run {run + 1}",
                                          "result": runs[-1]}), file=sys.stderr, flush=True)
                results[mode][label(size)] = runs[0] if args.runs == 1 else summary(runs)
            path.unlink()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({
        "bench": "streams", "sizes": [label(s) for s in sorted(set(args.sizes))],
        "python": sys.version.split()[0], "cpus": os.cpu_count(),
        "load_average_1m": {"start": load[0], "max": max(load), "end": load[-1]},
        "wall_s": round(time.time() - began, 1), "results": results,
        "flatness": flatness(results)}))
    return 0


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs of one size and system: each run, and how many completed (whole,
    checked), their median and range of MB/s, the most peak RSS of each role, and the
    chunks refused in all (group mode)."""
    done = [r for r in runs if r.get("complete") or ("loss" in r and "error" not in r)]
    rates = sorted(r["mb_per_s"] for r in done if r.get("mb_per_s") is not None)
    out: dict[str, Any] = {"runs": len(runs), "completed": len(done)}
    if rates:
        out.update(mb_per_s_median=rates[len(rates) // 2], mb_per_s_min=rates[0],
                   mb_per_s_max=rates[-1])
    for role in ("sender", "receiver"):
        peaks = [r[f"{role}_peak_rss_mib"] for r in runs if f"{role}_peak_rss_mib" in r]
        if peaks:
            out[f"{role}_peak_rss_mib"] = max(peaks)
    refused = [r["receiver_stats"].get("stream_chunks_refused", 0) for r in runs
               if "receiver_stats" in r]
    if refused:
        out["stream_chunks_refused"] = sum(refused)
    out["each"] = runs
    return out


def flatness(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Peak RSS at the largest size over that at the smallest, per system and role."""
    out: dict[str, Any] = {}
    for mode, by_size in results.items():
        done = {k: v for k, v in by_size.items() if "error" not in v and v.get("completed", 1)}
        if len(done) < 2:
            continue
        sizes = sorted(done, key=parse_size)
        small, large = done[sizes[0]], done[sizes[-1]]
        out[mode] = {"of": f"{sizes[-1]}/{sizes[0]}"} | {
            role: round(large[f"{role}_peak_rss_mib"] / small[f"{role}_peak_rss_mib"], 2)
            for role in ("sender", "receiver")}
    return out


if __name__ == "__main__":
    sys.exit(main())
