"""Leave and rejoin, crash and restart from the SQLite log, partitions that heal."""

from __future__ import annotations

from pathlib import Path

from m2mc.ordering import MessageId
from m2mc.store.sqlite import SqliteStore

from .harness import Net


def _chatter(net: Net, gid: str, senders: list[str], count: int, step: float = 0.02) -> None:
    last: MessageId | None = None
    for i in range(count):
        last = net.send(senders[i % len(senders)], gid, f"m{i}".encode(),
                        reply_to=last if i % 3 else None)
        net.run(step)


def test_leave_then_rejoin_is_current_again_and_catches_up() -> None:
    net = Net(seed=11, loss=0.1)
    for pid in ("a", "b", "c"):
        net.add(pid)
    gid = str(net.do("a", lambda n: n.create_group("g", net.now)))
    net.run(0.3)
    for pid in ("b", "c"):
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(1.0)
    _chatter(net, gid, ["a", "b", "c"], 20)
    net.do("c", lambda n: n.leave_group(gid, net.now))
    net.run(1.0)
    assert net.nodes["a"].members(gid) == ["a", "b"]
    assert not net.nodes["c"].is_member(gid)
    _chatter(net, gid, ["a", "b"], 20)
    during = len(net.delivered["c"][gid])
    net.do("c", lambda n: n.join_group(gid, net.now))
    net.run(3.0)
    assert net.nodes["a"].members(gid) == ["a", "b", "c"]
    assert net.nodes["b"].members(gid) == ["a", "b", "c"]
    assert len(net.delivered["c"][gid]) > during  # the messages sent while away arrived
    _chatter(net, gid, ["a", "b", "c"], 10)
    net.run(3.0)
    net.check_group(gid, ["a", "b", "c"])


def test_crash_and_restart_keeps_history_and_never_reuses_ids(tmp_path: Path) -> None:
    net = Net(seed=13, loss=0.05)
    for pid in ("a", "b", "c"):
        net.add(pid, SqliteStore(tmp_path / f"{pid}.sqlite3"))
    gid = str(net.do("a", lambda n: n.create_group("g", net.now)))
    net.run(0.3)
    for pid in ("b", "c"):
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(1.0)
    _chatter(net, gid, ["a", "b", "c"], 30)
    before = net.delivered["c"][gid][:]
    c_sent = [s.mid for s in net.sent if s.mid.pid == "c"]
    net.crash("c")  # like kill -9: the store object is simply abandoned
    _chatter(net, gid, ["a", "b"], 30)
    net.stores["c"] = SqliteStore(tmp_path / "c.sqlite3")  # a new process opens the file
    node = net.restart("c")
    assert node.is_member(gid)
    net.run(3.0)
    mid = net.send("c", gid, b"after restart")
    assert mid.seq == max(m.seq for m in c_sent) + 1
    net.run(2.0)
    got = net.delivered["c"][gid]
    assert got[:len(before)] == before
    net.check_group(gid, ["a", "b", "c"])


def test_partition_heals_and_both_sides_converge() -> None:
    net = Net(seed=17, loss=0.05)
    pids = ["a", "b", "c", "d"]
    for pid in pids:
        net.add(pid)
    gid = str(net.do("a", lambda n: n.create_group("g", net.now)))
    net.run(0.3)
    for pid in pids[1:]:
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(1.0)
    net.partition(["a", "b"], ["c", "d"])
    _chatter(net, gid, ["a", "c"], 20)
    _chatter(net, gid, ["b", "d"], 20)
    net.heal()
    net.run(8.0)
    net.check_group(gid, pids)


def test_concurrent_named_join_without_creator() -> None:
    """Nodes joining a group by name (as the simulator's scenarios do) find each other."""
    net = Net(seed=19)
    for pid in ("a", "b", "c"):
        net.add(pid)
        net.do(pid, lambda n: n.join_group("chat", net.now, order="sb"))
    net.run(2.0)
    for pid in ("a", "b", "c"):
        assert net.nodes[pid].members("chat") == ["a", "b", "c"]
    _chatter(net, "chat", ["a", "b", "c"], 15)
    net.run(2.0)
    net.check_group("chat", ["a", "b", "c"])
