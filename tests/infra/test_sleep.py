"""Members that sleep (docs/infra.md, "Members that sleep"; issue 34 item 4): a member
away longer than ``member_timeout`` (switched off, a laptop asleep, out of every
cell) is expelled by the hosts. When it comes back it joins again with its groups
and reads what it missed from the hosts' log before anything newer: it loses only
what the hosts' retention dropped meanwhile, and is told exactly how much."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from infra_harness import Net, check_groups, drain

from m2mc.infra.config import InfraConfig
from m2mc.infra.member import Phase
from m2mc.infra.persist import MemoryMemberStore

GROUPS = {"A": ("red", "blue"), "B": ("red", "blue"), "C": ("blue",)}


def deployment(cfg: InfraConfig, *, seed: int = 51, loss: float = 0.1,
               durable_hosts: bool = True) -> Net:
    net = Net(seed=seed, loss=loss, cfg=cfg, trace=True, durable_hosts=durable_hosts)
    for i, (n, groups) in enumerate(GROUPS.items()):
        net.add_member(n, net.host_ids[i], groups=groups, store=MemoryMemberStore())
    net.run_until(2.0)
    return net


def traffic(net: Net, rounds: int, tag: str, senders: tuple[str, ...] = ("A", "C")) -> None:
    for k in range(rounds):
        for n in senders:
            group = GROUPS[n][k % len(GROUPS[n])]
            net.send(n, f"{n}-{tag}{k}".encode(), group)
        net.run_until(net.now + 0.05)


def test_a_member_asleep_longer_than_member_timeout_loses_nothing_the_hosts_kept() -> None:
    net = deployment(InfraConfig(member_timeout=2.0))
    traffic(net, 10, "before", ("A", "B", "C"))
    for k in range(5):  # its own last messages: on the air when it falls asleep
        net.send("B", f"B-late{k}".encode(), "red")
    net.run_until(net.now + 0.002)
    old = net.members["B"].mid
    net.power_off("B")
    traffic(net, 100, "asleep")  # 5 s: expelled meanwhile
    b = net.power_on("B", "H3")  # wakes up in another cell
    traffic(net, 20, "after")
    drain(net)
    assert b.mid != old and b.phase == Phase.MEMBER
    assert b.stats.resumes_refused == 1 and b.stats.catchups == 1 and b.stats.lost == 0
    assert b.stats.caught_up > 50 and set(b.groups) == {"red", "blue"}
    check_groups(net)  # everything of red and blue, once, in order; B's own once
    mine = [d.mid for d in net.logs["A"].delivered if d.sender == "B"]
    assert len(mine) == len(set(mine)) == 15  # none of its late ones sent twice
    assert net.logs["B"].lost == []
    assert net.sink is not None  # one membership of each group throughout, for the trace
    assert [(e.event, e.group) for e in net.sink.events if e.node == "B"
            and e.event in ("join", "leave")] == [("join", "red"), ("join", "blue")]


def test_what_retention_dropped_while_it_slept_is_told_exactly() -> None:
    """The hosts keep 3 KB of history: a member asleep through 200 messages of red and
    blue gets the newest ones back and is told, per group, how many it lost."""
    cfg = InfraConfig(member_timeout=2.0, retention_bytes=3000, checkpoint_every=16)
    net = deployment(cfg, loss=0.0)
    traffic(net, 5, "before")
    net.power_off("B")
    traffic(net, 100, "asleep")
    b = net.power_on("B", "H2")
    drain(net)
    lost = net.logs["B"].lost
    assert {x.group for x in lost} == {"red", "blue"}
    assert b.stats.lost == sum(x.count for x in lost) > 50
    assert b.stats.caught_up > 5 and b.catchup_gap is not None
    check_groups(net)  # told == missing, for every member and group
    for x in lost:  # what it missed lies between what it had and what it got
        assert x.after < x.before and x.count > 0


def test_memory_only_hosts_keep_history_in_memory_too() -> None:
    net = deployment(InfraConfig(member_timeout=2.0), durable_hosts=False)
    net.power_off("B")
    traffic(net, 80, "asleep")
    b = net.power_on("B", "H1")
    drain(net)
    assert b.stats.catchups == 1 and b.stats.lost == 0
    check_groups(net)


def test_a_laptop_out_of_every_cell_comes_back_the_same_way() -> None:
    """No power-off: the process goes on, out of coverage, past member_timeout."""
    net = deployment(InfraConfig(member_timeout=2.0))
    b = net.members["B"]
    net.move("B", None)
    traffic(net, 80, "away")
    net.move("B", "H1")
    traffic(net, 10, "back")
    drain(net)
    assert b.stats.catchups == 1 and b.stats.lost == 0 and b.stats.resumes_refused == 0
    check_groups(net)


def test_switched_off_again_in_the_middle_of_its_catch_up_it_goes_on() -> None:
    cfg = InfraConfig(member_timeout=2.0, fetch_limit=4)  # a catch-up of many answers
    net = deployment(cfg)
    net.power_off("B")
    traffic(net, 80, "asleep")
    net.power_on("B", "H2")
    assert net.run_while(lambda: net.members["B"].stats.caught_up < 10, net.now + 10)
    assert net.members["B"].catchup is not None
    net.power_off("B")
    net.run_until(net.now + 0.5)
    b = net.power_on("B", "H3")
    assert b.catchup is not None  # saved: it goes on from where it was
    assert net.run_while(lambda: b.catchup is not None, net.now + 30)
    drain(net)
    check_groups(net)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), loss=st.sampled_from([0.0, 0.2]),
       sleeps=st.lists(st.tuples(st.integers(0, 50), st.integers(1, 120),
                                 st.sampled_from(["off", "away"])), min_size=1, max_size=3),
       retention=st.sampled_from([0, 4000]), crash_in=st.integers(0, 30))
def test_sleepers_deliver_every_message_of_their_groups_or_are_told(
        seed: int, loss: float, sleeps: list[tuple[int, int, str]], retention: int,
        crash_in: int) -> None:
    """Short and long sleeps (switched off, or out of coverage), retention or not, a
    crash in the middle of the return: per group, every member delivers each message
    sequenced while it was in the group once and in order, or is told it lost it."""
    cfg = InfraConfig(member_timeout=1.5, retention_bytes=retention, checkpoint_every=16)
    net = deployment(cfg, seed=seed, loss=loss)
    back: dict[int, tuple[str, str]] = {}
    for k in range(200):
        for at, length, how in sleeps:
            if at == k and "B" not in net.off and net.where["B"] is not None:
                if how == "off":
                    net.power_off("B")
                else:
                    net.move("B", None)
                back[k + length] = ("B", how)
        if k in back and (k - 1) not in back:
            n, how = back[k]
            if how == "off" and n in net.off:
                net.power_on(n, net.host_ids[k % 3])
                if crash_in:
                    net.crash_after(n, crash_in)
            elif how == "away":
                net.move(n, net.host_ids[k % 3])
        if "B" in net.off and not any(t > k for t in back):
            net.power_on("B", "H1")
        for n in ("A", "C"):
            if net.rng.random() < 0.5:
                net.send(n, f"{n}-{k}".encode(), GROUPS[n][k % len(GROUPS[n])])
        net.run_until(net.now + 0.03)
    if "B" in net.off:
        net.power_on("B", "H1")
    net.move("B", "H1") if net.where["B"] is None else None
    drain(net)
    assert net.run_while(lambda: net.members["B"].catchup is not None, net.now + 60)
    net.run_until(net.now + 1.0)
    check_groups(net)


def _committed_groups(net: Net, node: str) -> set[str]:
    """The groups the hosts' committed tables give the member's current join-id."""
    h = net.coordinator()
    assert h is not None
    mid = net.members[node].mid
    assert mid is not None
    return set(net.hosts[h].gateway.log.state.groups_of(mid))


def test_its_joins_and_leaves_sequenced_while_it_slept_take_effect_when_sent_again() -> None:
    """B joins green and leaves blue, and is switched off before it hears them: the
    hosts sequenced them under its old join-id. Its new JOINED names the groups it
    knew it was in (red, blue); the catch-up leaves them alone, and B sends both items
    again under the new join-id: it ends in red and green, as it asked, and so do the
    hosts' tables; it never delivers a message of a group it is not in."""
    net = deployment(InfraConfig(member_timeout=2.0), loss=0.0)
    traffic(net, 5, "before", ("A", "B", "C"))
    b = net.members["B"]
    old = b.mid
    net.join_group("B", "green")
    net.leave_group("B", "blue")
    h = net.coordinator()
    assert h is not None
    state = net.hosts[h].gateway.log.state
    net.run_while(lambda: "green" not in state.groups_of(old) or "blue" in state.groups_of(old),
                  net.now + 5, step=0.0005)
    assert "green" in state.groups_of(old) and set(b.groups) == {"red", "blue"}
    net.power_off("B")
    net.send("A", b"A-green", "red")
    traffic(net, 60, "asleep")
    b = net.power_on("B", "H2")
    traffic(net, 10, "after")
    drain(net)
    assert b.mid != old and b.stats.catchups == 1 and b.stats.lost == 0
    assert set(b.groups) == {"red", "green"} == _committed_groups(net, "B")
    assert b.stats.groups_refused == 0
    check_groups(net)
    assert net.sink is not None
    joins = [(e.event, e.group) for e in net.sink.events if e.node == "B"
             and e.event in ("join", "leave")]
    assert joins == [("join", "red"), ("join", "blue"), ("join", "green"), ("leave", "blue")]


def test_a_catch_up_waits_for_the_application_to_read() -> None:
    """Back-pressure (max_queued_messages): a returning member asks for the next part
    of its catch-up only while the application has room; paused, it asks nothing and
    sets no timer for it (no busy loop); given room, it goes on."""
    cfg = InfraConfig(member_timeout=2.0, fetch_limit=8)
    net = deployment(cfg, loss=0.0)
    net.power_off("B")
    traffic(net, 80, "asleep")
    b = net.power_on("B", "H2")
    b.make_room(b.stats.delivered + 10, net.now)
    assert net.run_while(lambda: not b.paused, net.now + 10)
    assert b.catchup is not None
    at, until = b.stats.delivered, b.deliver_until
    assert until is not None and at - until <= 8  # past the bound by one answer at most
    asked = b.stats.history_requests
    net.run_until(net.now + 5)  # history_retry passes many times: nothing is asked
    assert b.stats.history_requests == asked and b.stats.delivered == at
    assert b.reads.fetches.deadline(cfg.history_retry, b.paused) is None  # no timer for it
    b.make_room(b.stats.delivered + 10_000, net.now)
    assert net.run_while(lambda: b.catchup is not None, net.now + 30)
    drain(net)
    assert b.stats.lost == 0 and b.stats.delivery_pauses >= 1
    check_groups(net)
