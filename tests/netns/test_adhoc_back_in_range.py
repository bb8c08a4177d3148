"""Coming back into range on a real network (issue 15): four ``m2mc chat --script``
members, one per namespace, the switch dropping 20% of the frames. One member, d, goes
out of range (its link down) while the others write, and meanwhile b creates a new
group. When d's link comes back, d's interface watcher tells its group layer, which
advertises (d discovers the new group, joins it and writes in it, no restart) and
catches up; what d wrote while away reaches the others. All four transcripts hold the
same trees with every message, and ``m2mc analyze`` on the traces says VALID.

Coordination is by files (``wait_file``) and by the chat's own waits (``wait_for``,
``wait_group``, ``join``): nothing depends on timing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from netns_lab import Lab
from netns_processes import M2MC, Lines, wait_until

pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nft") is None,
                                 reason="nftables is not installed (apt-get install nftables)")]

GROUP, PORT = "239.255.90.23", 47023
LOSS = 20
STEP_TIMEOUT = 240
OPS_TOTAL = 14  # 4 hellos, d's goodbye, 2 + 2 + 2 while d is away, d's 2 from away, d back
NEWS_TOTAL = 4  # b's first, a's, c's, and d's once it is back


def scripts(flags: Path) -> dict[str, str]:
    away, down, end = flags / "away", flags / "down", flags / "end"
    # Everyone stays until everyone has everything (a member that left early could not
    # answer a late catch-up), then the test says "end".
    tail = (f"join ops\nwait_for {OPS_TOTAL}\njoin news\nwait_for {NEWS_TOTAL}\n"
            f"wait_file {end}\n")
    return {
        "a": f"""create ops
wait_members 4
send hello from a
wait_for 5
wait_file {away}
send a: while d is away
reply 1 a: answering the first hello while d is away
wait_group news
join news
send a: reading the news
{tail}""",
        "b": f"""join ops
wait_members 4
send hello from b
wait_for 5
wait_file {away}
send b: while d is away, one
send b: while d is away, two
create news
send b: first in news
{tail}""",
        "c": f"""join ops
wait_members 4
send hello from c
wait_for 5
wait_file {away}
reply 2 c: answering while d is away
send c: while d is away
join news
send c: news to me
{tail}""",
        "d": f"""join ops
wait_members 4
send hello from d
wait_for 4
send d: going out of range
wait_for 5
wait_file {down}
send d: written while away, one
reply 1 d: written while away, two
join news
send d: back, and in the news
join ops
send d: back in ops
{tail}""",
    }


def test_a_member_back_in_range_finds_the_new_group_and_catches_up_both_ways(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    trace, flags = tmp_path / "trace", tmp_path / "flags"
    trace.mkdir()
    flags.mkdir()
    (trace / "run.json").write_text(json.dumps({"run": "netns-back", "loss": LOSS,
                                                "nodes": 4}))
    procs: dict[str, tuple[subprocess.Popen[bytes], Lines, Lines]] = {}
    for (name, text), host in zip(scripts(flags).items(), lab.hosts, strict=True):
        script = tmp_path / f"{name}.txt"
        script.write_text(text)
        url = f"udp-multicast://{GROUP}:{PORT}?iface={host.address}&ttl=1"
        process = lab.spawn(host, [*M2MC, "-v", "chat", "--nick", name, "--device-id", name,
                                   "--data-dir", str(tmp_path / name), "--channel", url,
                                   "--script", str(script),
                                   "--transcript", str(tmp_path / f"{name}.json"),
                                   "--step-timeout", str(STEP_TIMEOUT),
                                   "--trace-dir", str(trace), "--run-id", "netns-back"],
                            env=child_env, cwd=tmp_path)
        procs[name] = (process, Lines(process.stdout), Lines(process.stderr))
    d = lab.hosts[3]
    err = {name: lines for name, (_, _, lines) in procs.items()}

    def tails() -> dict[str, list[str]]:
        return {name: lines.snapshot()[-3:] for name, lines in err.items()}

    try:
        lab.set_loss(LOSS)
        # Everyone has the hellos and d's goodbye; d's link goes down; then d writes,
        # out of range, and the others write and b creates "news".
        wait_until(lambda: all(err[n].has(f"WaitFile(path='{flags / 'away'}')")()
                               for n in "abc")
                   and err["d"].has(f"WaitFile(path='{flags / 'down'}')")(),
                   "everyone to have d's goodbye", STEP_TIMEOUT, tails)
        link = lab.exec(d, ["ip", "link", "set", "eth0", "down"])
        assert link.returncode == 0, link.stderr
        (flags / "down").write_text("")
        (flags / "away").write_text("")
        wait_until(lambda: all(err[n].has(f"WaitFor(count={OPS_TOTAL})")() for n in "abc")
                   and err["d"].has("Join(target='news')")(),
                   "a, b and c to wait for d's messages, d for the news", STEP_TIMEOUT, tails)
        assert not err["d"].has("Send(text='d: back, and in the news')")()  # still away
        link = lab.exec(d, ["ip", "link", "set", "eth0", "up"])  # ... and back
        assert link.returncode == 0, link.stderr
        wait_until(lambda: all(err[n].has(f"WaitFile(path='{flags / 'end'}')")()
                               for n in "abcd"),
                   "everyone to have every message", STEP_TIMEOUT, tails)
        (flags / "end").write_text("")
        for process, _, _ in procs.values():
            process.wait(timeout=STEP_TIMEOUT + 60)
    finally:
        lab.heal()
        for process, _, _ in procs.values():
            if process.poll() is None:
                process.kill()
    for name, (_, _, lines) in procs.items():  # each one's log kept for a post-mortem
        (tmp_path / f"{name}.log").write_text("\n".join(lines.closed()) + "\n")
    for name, (process, _, lines) in procs.items():
        assert process.returncode == 0, (name, lines.closed()[-20:])

    transcripts = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in procs}
    trees = {name: [(g["desc"], g["count"], g["tree"]) for g in t["groups"]]
             for name, t in transcripts.items()}
    assert trees["a"] == trees["b"] == trees["c"] == trees["d"]
    assert sorted((desc, count) for desc, count, _ in trees["a"]) == [("news", NEWS_TOTAL),
                                                                      ("ops", OPS_TOTAL)]

    def texts(nodes: list[dict[str, object]]) -> set[str]:
        out: set[str] = set()
        for node in nodes:
            out.add(str(node["text"]))
            out |= texts(node["children"])  # type: ignore[arg-type]
        return out

    every = set().union(*(texts(tree) for _, _, tree in trees["a"]))
    for name, text in scripts(flags).items():
        for line in text.splitlines():
            verb, _, rest = line.partition(" ")
            if verb == "send":
                assert rest in every, (name, rest)
            elif verb == "reply":
                assert rest.partition(" ")[2] in every, (name, rest)
    # d came back by its interface, not by a restart, and said so in its trace.
    rows = [json.loads(line) for line in (trace / "d.jsonl").read_text().splitlines()]
    assert not [r for r in rows if r["event"] in ("restart", "crash")]
    back = [r for r in rows if r["event"] == "sync_req"
            and json.loads(r["detail"] or "{}").get("back") == "interface"]
    assert back, "d's sync request on its return"

    out_dir = tmp_path / "analysis"
    analysis = subprocess.run([*M2MC, "analyze", str(trace), "--out", str(out_dir), "--quiet",
                               "--verify-only"],
                              capture_output=True, text=True, env=child_env, timeout=900,
                              check=False)
    assert analysis.returncode == 0, analysis.stdout[-2000:] + analysis.stderr[-2000:]
    verify = json.loads((out_dir / "verify.json").read_text())
    assert verify["valid"] is True, verify
    assert verify["counts"]["nodes"] == 4
    assert verify["counts"]["messages"] == OPS_TOTAL + NEWS_TOTAL
