"""Coming back into range (docs/group.md section 4) and MSP both ways (section 6), on
the sans-IO core in virtual time (tests/group/harness.py).

A node that was out of range notices it is back by the driver's word
(``network_changed``: its interface came up) or by hearing the others again after a
silence longer than the members' keepalive; it then advertises (GJLP: it learns of the
groups created meanwhile), re-announces the groups it created and runs MSP for every
group, with back-off and suppression so that a crowd coming back does not storm. Its
sync request names what it holds, and the others ask at once for what they lack, so its
messages sent while away reach them within the NACK and repair back-offs of the
request, with status keepalives too far away to be the cause.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from m2mc.group.codec import HEADER_SIZE, Kind
from m2mc.group.config import GroupConfig
from m2mc.group.events import GroupDiscovered, Reconnected
from m2mc.ordering import MessageId
from m2mc.wire.packet import HEADER_SIZE as M2MP_HEADER

from .harness import Net

QUIET = GroupConfig(status_interval=1000.0)  # no status (nor keepalive) within a test


def kind_of(datagram: bytes) -> int | None:
    """The group message kind of a datagram that starts a message (fragment 0)."""
    if len(datagram) <= M2MP_HEADER + HEADER_SIZE or int.from_bytes(datagram[4:8]) & 0x7FFF_FFFF:
        return None
    return datagram[M2MP_HEADER + 11]


def counting(net: Net) -> Counter[int]:
    """Group messages sent from now on, by kind (each once: M2MP sends every packet twice,
    redundancy 2, under one message id)."""
    kinds: Counter[int] = Counter()
    seen: set[bytes] = set()

    def count(datagram: bytes) -> None:
        kind = kind_of(datagram)
        if kind is not None and datagram[:4] not in seen:
            seen.add(datagram[:4])
            kinds[kind] += 1

    net.counter = count
    return kinds


def events_of(net: Net, pid: str, kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in net.events.get(pid, []) if isinstance(e, kind)]


def group_of(net: Net, members: str, desc: str = "ops") -> str:
    """``members[0]`` creates a group, the others join it once discovered."""
    gid = str(net.do(members[0], lambda n: n.create_group(desc, net.now)))
    net.run(0.5)
    for pid in members[1:]:
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(1.0)
    return gid


def recv_times(net: Net, mids: list[MessageId]) -> dict[tuple[str, str], float]:
    """(node, mid) -> when the message reached the node's ordering core."""
    wanted = {str(m) for m in mids}
    return {(e.node, e.mid): e.t for e in net.trace.events
            if e.event == "recv" and e.mid in wanted and e.peer != e.node}


def test_interface_signal_brings_new_groups_history_and_own_messages_across() -> None:
    net = Net(seed=3, config=lambda: GroupConfig(status_interval=1000.0))
    for pid in "abcd":
        net.add(pid)
    ops = group_of(net, "abcd")
    net.partition(list("abc"))  # d is out of range
    others = [net.send("a", ops, b"while d was away"),
              net.send("b", ops, b"and another")]
    news = str(net.do("b", lambda n: n.create_group("news", net.now)))
    away = [net.send("d", ops, f"from d, away {i}".encode()) for i in range(3)]
    net.run(6.0)
    assert all(m not in net.delivered[p][ops] for p in "abc" for m in away)
    net.heal()
    back = net.now
    net.do("d", lambda n: n.network_changed(net.now))
    assert events_of(net, "d", Reconnected) == [Reconnected("interface", None)]
    net.run(1.0)
    # d learnt of the group created meanwhile, and caught up ...
    assert news in [e.info.gid for e in events_of(net, "d", GroupDiscovered)]
    assert all(m in net.delivered["d"][ops] for m in others)
    # ... and its messages from while it was away reached everyone within the NACK
    # and repair back-offs of its sync request (no status went out: status_interval is
    # 1000 s), through the others' NACK, which its repair answered.
    request = min(e.t for e in net.trace.events
                  if e.node == "d" and e.event == "sync_req" and e.t >= back)
    cfg = GroupConfig()
    bound = cfg.nack_backoff + cfg.repair_backoff + 3 * net.delay[1] + 0.001
    times = recv_times(net, away)
    assert set(times) == {(p, str(m)) for p in "abc" for m in away}
    assert max(times.values()) - request <= bound, (max(times.values()) - request, bound)
    stats = {p: net.nodes[p].group_stats(ops) for p in "abc"}
    assert sum(s["requests_ahead"] for s in stats.values()) == 3
    assert sum(s["holder_nacks"] for s in stats.values()) == 3
    assert sum(s["nacks_sent"] for s in stats.values()) == 1  # suppressed: one for all
    assert net.nodes["d"].group_stats(ops)["retransmitted"] == 3
    net.run(2.0)
    net.check_group(ops, list("abcd"))


def test_without_network_changed_a_short_absence_is_not_a_return() -> None:
    net = Net(seed=4)
    for pid in "abc":
        net.add(pid)
    ops = group_of(net, "abc")
    net.partition(list("ab"))
    net.send("a", ops, b"x")
    net.run(10.0)  # well under the silence (3.5 keepalives)
    net.heal()
    net.run(5.0)
    assert events_of(net, "c", Reconnected) == []
    net.check_group(ops, list("abc"))  # statuses and NACKs brought it anyway


def test_hearing_the_group_again_after_a_long_silence_is_a_return() -> None:
    net = Net(seed=5)
    for pid in "abc":
        net.add(pid)
    ops = group_of(net, "abc")
    silence = net.nodes["c"].reconnect.silence
    assert silence == pytest.approx(35.0)  # 3.5 keepalives of 10 status intervals
    net.partition(list("ab"))
    lost = net.send("a", ops, b"while c was away")
    news = str(net.do("b", lambda n: n.create_group("news", net.now)))
    away = net.send("c", ops, b"c, away")
    net.run(silence + 5.0)
    assert events_of(net, "c", Reconnected) == []
    net.heal()
    net.run(3.0)  # the first keepalive c hears after the silence
    (back,) = events_of(net, "c", Reconnected)
    assert back.reason == "silence" and back.silent_for is not None
    assert back.silent_for > silence
    assert news in [e.info.gid for e in events_of(net, "c", GroupDiscovered)]
    assert lost in net.delivered["c"][ops]
    assert all(away in net.delivered[p][ops] for p in "ab")
    assert net.nodes["c"].node_stats()["reconnects_by_silence"] == 1
    requests = [e for e in net.trace.events if e.node == "c" and e.event == "sync_req"]
    assert '"back":"silence"' in (requests[-1].detail or "")


def test_a_node_alone_in_its_groups_takes_no_silence_for_a_return() -> None:
    net = Net(seed=6)
    net.add("a")
    net.do("a", lambda n: n.create_group("solo", net.now))
    net.run(100.0)
    net.add("b")  # a hears b's advertisement after 100 s of silence: not a return
    net.run(2.0)
    assert events_of(net, "a", Reconnected) == []


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_quiet_pair_on_a_lossy_network_takes_no_gap_for_a_return(seed: int) -> None:
    # The worst case for false returns: two members who write nothing, where status
    # suppression leaves one of them heard from only at its keepalive (every 10-11 s).
    net = Net(seed=seed, loss=0.1)
    for pid in "ab":
        net.add(pid)
    group_of(net, "ab")
    net.run(600.0)
    assert events_of(net, "a", Reconnected) == [] and events_of(net, "b", Reconnected) == []


def test_signals_within_the_holdoff_make_one_reaction() -> None:
    net = Net(seed=7, config=lambda: QUIET)
    for pid in "ab":
        net.add(pid)
    group_of(net, "ab")
    net.run(10.0)
    kinds = counting(net)
    for _ in range(5):  # an interface flapping
        net.do("b", lambda n: n.network_changed(net.now))
        net.run(0.3)
    net.run(2.0)
    assert events_of(net, "b", Reconnected) == [Reconnected("interface", None)]
    assert net.nodes["b"].node_stats()["reconnects_held"] == 4
    assert kinds[Kind.ADV] == 2 and kinds[Kind.SYNC_REQ] == 1  # two ADV rounds, one MSP


def test_the_creator_re_announces_its_groups_made_while_away() -> None:
    net = Net(seed=8, config=lambda: QUIET)
    for pid in "abc":
        net.add(pid)
    group_of(net, "abc")
    net.partition(list("ab"))
    made = str(net.do("c", lambda n: n.create_group("made while away", net.now)))
    net.run(6.0)
    assert all(made not in [e.info.gid for e in events_of(net, p, GroupDiscovered)]
               for p in "ab")
    net.heal()
    net.do("c", lambda n: n.network_changed(net.now))
    net.run(1.0)
    assert all(made in [e.info.gid for e in events_of(net, p, GroupDiscovered)] for p in "ab")
    assert net.nodes["c"].node_stats()["groups_reannounced"] == 1


def test_a_crowd_coming_back_at_once_does_not_storm() -> None:
    """Twenty nodes return together to two who stayed: one advertisement for all, a few
    GJLP replies, and about one MSP response per returning node, instead of the seed's
    everyone-answers-everyone (22 replies per advertisement and 21 responses per request)."""
    net = Net(seed=9, config=lambda: QUIET)
    stay, crowd = ["s0", "s1"], [f"r{i:02d}" for i in range(20)]
    for pid in stay + crowd:
        net.add(pid)
    ops = group_of(net, stay + crowd)
    net.partition(stay, crowd)  # the crowd moves away together
    for i in range(5):
        net.send("s0", ops, f"stayed {i}".encode())
        net.send(crowd[i], ops, f"went {i}".encode())
    news = str(net.do("s1", lambda n: n.create_group("news", net.now)))
    net.run(6.0)  # longer than reconnect_holdoff after the start (which reacts too)
    net.heal()
    kinds = counting(net)
    since = len(net.trace.events)
    for pid in crowd:
        net.do(pid, lambda n: n.network_changed(net.now))
    net.run(3.0)
    replies = kinds[Kind.GRPS_INFO] + kinds[Kind.SYNC_RESP]
    # The 5 messages the crowd missed travel once or twice in all the MSP responses,
    # not once per request (every requester hears every response: Msp.broadcast).
    carried = sum(json.loads(e.detail or "{}").get("messages", 0)
                  for e in net.trace.events[since:] if e.event == "sync_resp")
    assert carried <= 10, carried
    assert kinds[Kind.ADV] <= 3, kinds
    assert kinds[Kind.GRPS_INFO] <= 6, kinds
    assert kinds[Kind.SYNC_REQ] == 20
    assert kinds[Kind.SYNC_RESP] <= 2 * 20, kinds
    assert replies / len(crowd) <= 2.5, kinds
    assert kinds[Kind.NACK] <= 6, kinds
    assert all(news in [e.info.gid for e in events_of(net, p, GroupDiscovered)] for p in crowd)
    net.run(3.0)
    net.check_group(ops, stay + crowd)


def test_a_sync_request_naming_nothing_new_asks_for_nothing() -> None:
    net = Net(seed=10, config=lambda: QUIET)
    for pid in "ab":
        net.add(pid)
    ops = group_of(net, "ab")
    net.send("a", ops, b"seen by both")
    net.run(1.0)
    net.do("b", lambda n: n.network_changed(net.now))
    net.run(1.0)
    stats = net.nodes["a"].group_stats(ops)
    assert stats["requests_ahead"] == 0 and stats["holder_nacks"] == 0
    assert stats["nacks_sent"] == 0
