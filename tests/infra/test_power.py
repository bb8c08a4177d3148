"""Switch-off and power-on of a member (seeds/001 4.2, last paragraph; docs/infra.md
"Switch-off and power-on"): the saved state round-trips, a member switched off and
on again resumes its membership when the hosts still hold it and joins afresh when
they do not, no message id is ever used for two messages whatever the crash point,
and saved state that cannot be used is refused or left behind, never a crash."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from infra_harness import Net, check_complete, check_garbage_collected, check_total_order
from test_properties import EXTENSIONS

from m2mc.core import carry_out
from m2mc.errors import SavedStateError, UsageError
from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import MemberId
from m2mc.infra.member import Delivered, MemberCore, Phase, Uplink
from m2mc.infra.persist import MemoryMemberStore, SavedMember, StoredMember, decode_saved
from m2mc.infra.state import pack_groups
from m2mc.trace.schema import ListSink

B = MemberId("B", 7)
CELLS = ("H1", "H2", "H3")


def rec(g: int, group: str = "g") -> m.Record:
    return m.Record(g, g, m.APP, B, g, g, 0, f"b{g}".encode(), group)


def has_joined(s0: int, mid: MemberId, group: str = "g") -> m.Record:
    return m.Record(s0, s0, m.JOINED, mid, body=pack_groups((group,)))


def attached(core: MemberCore) -> None:
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)


def new_core(store: MemoryMemberStore, trace: ListSink | None = None) -> MemberCore:
    return MemberCore("A", InfraConfig(), random.Random(1), group="g", store=store, trace=trace)


def output(core: MemberCore, store: MemoryMemberStore) -> list[Uplink]:
    """A driver's output step: take the frames and events, commit the core's save
    (then its trace); only then may the frames leave."""
    ups = core.drain()
    core.events()
    carry_out(core.take_save(0.0), store.commit, core.trace)
    return ups


def ack(core: MemberCore, now: float = 0.0) -> None:
    out = core.sender.outstanding
    assert out is not None
    core.receive(m.Ack("G", "A", out.rseq), now)


def a_member_with_history(store: MemoryMemberStore) -> MemberCore:
    """A member that joined at 1, delivered 2-3 and one of its own three messages."""
    core = new_core(store)
    attached(core)
    mid = core.join(0.0)
    output(core, store)
    ack(core)
    core.receive(m.Normals("G", (has_joined(1, mid), rec(2), rec(3))), 0.0)
    for body in (b"x", b"y", b"z"):
        core.send(body, 0.0)
    core.receive(m.Normals("G", (m.Record(4, 4, m.APP, mid, 1, 1, 0, b"x", "g", 1),)), 0.0)
    output(core, store)
    return core


# ----------------------------------------------------------------- round trip
def test_saved_state_round_trips_and_a_new_core_takes_it_up() -> None:
    store = MemoryMemberStore()
    old = a_member_with_history(store)
    saved = decode_saved(store.load())  # type: ignore[arg-type]
    assert saved == SavedMember(
        "A", 3, "g", "member", old.mid.join_id, 4, 3, 1, False,  # type: ignore[union-attr]
        (m.NewItem(2, 2, b"y", "g"), m.NewItem(3, 3, b"z", "g")), groups=(("g", 1),))
    assert saved.resumable
    new = new_core(store)
    new.restore(saved)
    assert (new.mid, new.phase, new.mystable, new.mynew, new.app_seq) == (
        old.mid, Phase.MEMBER, 4, 3, 3)
    assert new.pending_sends == 2 and new.stats.resumed == 1
    commits = store.commits
    output(new, store)
    assert store.commits == commits  # nothing changed: nothing saved again
    assert new.send(b"w", 1.0) == "A:4"  # numbering goes on
    attached(new)
    ups = [u.message for u in output(new, store)]
    news = [i for f in ups if isinstance(f, m.NewReq) for i in f.items]
    assert [(i.nseq, i.body) for i in news] == [(2, b"y"), (3, b"z"), (4, b"w")]
    hello = next(f for f in ups if isinstance(f, m.Hello))
    assert hello.mid == old.mid and hello.member and hello.mystable == 4


def test_a_message_id_is_saved_before_its_frame_can_leave() -> None:
    store = MemoryMemberStore()
    core = a_member_with_history(store)
    core.send(b"new", 1.0)
    assert store.app_seq == 3  # chosen, not saved: nothing has left yet
    ack(core, 1.0)
    for up in output(core, store):
        if isinstance(up.message, m.NewReq):
            for item in up.message.items:
                assert item.app_seq in store.pending and store.app_seq >= item.app_seq


def test_trace_events_wait_for_the_commit_that_makes_them_true() -> None:
    sink, store = ListSink(), MemoryMemberStore()
    core = new_core(store, sink)
    attached(core)
    mid = core.join(0.0)
    core.receive(m.Normals("G", (has_joined(1, mid), rec(2))), 0.0)
    assert sink.events == [] and store.commits == 0
    output(core, store)
    assert [e.event for e in sink.events] == ["join", "recv", "deliver"]
    assert json.loads(store.membership or "")["mystable"] == 2


def test_the_core_never_commits_its_driver_does() -> None:
    """Frames and events come out of the core without a commit; the save the driver
    takes holds every change they depend on, and the trace they make true."""
    sink, store = ListSink(), MemoryMemberStore()
    core = new_core(store, sink)
    attached(core)
    mid = core.join(0.0)
    core.receive(m.Normals("G", (has_joined(1, mid), rec(2))), 0.0)
    core.send(b"mine", 0.0)
    assert core.drain() and core.events()
    assert store.commits == 0 and sink.events == []
    save = core.take_save(0.0)
    assert save is not None and save.record.app_seq == 1
    assert [i.body for i in save.record.put] == [b"mine"]
    assert [e.event for e in save.trace_events] == ["join", "recv", "deliver", "send"]
    assert store.commits == 0  # still: committing is the driver's
    carry_out(save, store.commit, sink)
    assert store.commits == 1 and store.app_seq == 1 and len(sink.events) == 4
    assert core.take_save(0.0) is None  # nothing changed since


# ----------------------------------------------------------------- on the network
def test_power_on_resumes_the_membership_and_delivers_what_was_missed() -> None:
    """Off in cell H2 while A sends 20 messages, on again in cell H3: the same
    member identity, every multicast sequenced meanwhile delivered (P4)."""
    net = Net(seed=21, loss=0.1, trace=True)
    net.add_member("A", "H1")
    b = net.add_member("B", "H2", store=MemoryMemberStore())
    net.run_until(2.0)
    mid = b.mid
    net.send("B", b"before")
    net.run_until(2.5)
    net.power_off("B")
    for i in range(20):
        net.send("A", f"a{i}".encode())
        net.run_until(net.now + 0.1)
    net.run_until(net.now + 1.0)
    b = net.power_on("B", "H3")  # moved cell while off
    assert b.mid == mid and b.phase == Phase.MEMBER and b.stats.resumed == 1
    net.send("B", b"after")
    assert net.run_while(lambda: net.pending() > 0, net.now + 10)
    net.run_until(net.now + 1.0)
    log = net.logs["B"]
    assert len(log.joined) == 1 and not log.left  # one membership throughout
    assert [d.body for d in log.delivered].count(b"before") == 1
    assert {f"a{i}".encode() for i in range(20)} <= {d.body for d in log.delivered}
    check_complete(net)
    assert b.stats.nacks > 0  # what it missed came by NACK
    c = net.hosts[net.coordinator()].coordinator  # type: ignore[index]
    assert c is not None and [x for x in c.work.rows if x.node == "B"] == [mid]
    for n in ("A", "B"):
        net.leave(n)
    assert net.run_while(lambda: any(x.phase != Phase.LEFT for x in net.members.values()),
                         net.now + 20)
    net.run_until(net.now + 2.0)
    check_garbage_collected(net)


def test_power_on_after_the_hosts_expelled_it_catches_up_and_rejoins() -> None:
    """Off longer than member_timeout: the hosts expelled it. Powered on, it is told
    (NotMember), joins again with its groups and a fresh join-id, and reads what it
    missed from the hosts' log before anything newer: nothing lost, no group left
    (docs/infra.md, "Members that sleep"; tests/infra/test_sleep.py goes further)."""
    cfg = InfraConfig(member_timeout=2.0)
    net = Net(seed=22, cfg=cfg, trace=True)
    net.add_member("A", "H1")
    b = net.add_member("B", "H2", store=MemoryMemberStore())
    net.run_until(2.0)
    old = b.mid
    net.power_off("B")
    net.send("A", b"while off")
    net.run_until(8.0)  # longer than member_timeout: expelled, its copies freed
    b = net.power_on("B", "H1")
    net.run_until(10.0)
    assert b.stats.resumes_refused == 1 and b.stats.catchups == 1 and b.stats.lost == 0
    log = net.logs["B"]
    assert log.left and log.left[-1].expelled and log.left[-1].mid == old
    assert len(log.joined) == 2 and b.mid != old  # a fresh join-id
    assert [d.body for d in log.delivered] == [b"while off"]  # caught up
    assert [type(e).__name__ for e in log.groups] == ["GroupJoined"]  # never out of it
    assert net.sink is not None
    assert [e.event for e in net.sink.events if e.node == "B" and e.event in ("join", "leave")
            ] == ["join"]  # one membership of "infra" throughout
    net.send("A", b"after")
    net.run_until(12.0)
    assert log.delivered[-1].body == b"after"
    check_total_order(net)


def test_own_messages_sent_just_before_the_switch_off_are_delivered_once() -> None:
    net = Net(seed=23, loss=0.3)
    net.add_member("A", "H1")
    net.add_member("B", "H2", store=MemoryMemberStore())
    net.run_until(2.0)
    sent = [net.send("B", f"b{i}".encode()) for i in range(5)]
    net.run_until(net.now + 0.003)  # some on the air, none confirmed
    net.power_off("B")
    net.run_until(net.now + 1.0)
    net.power_on("B", "H2")
    assert net.run_while(lambda: net.pending() > 0, net.now + 10)
    net.run_until(net.now + 1.0)
    for n in ("A", "B"):
        got = [d.mid for d in net.logs[n].delivered]
        assert [x for x in got if x in sent] == sent  # each once, in sending order
    check_complete(net)


# ----------------------------------------------------------------- any crash point
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), loss=st.sampled_from([0.0, 0.2]),
       cycles=st.lists(st.tuples(st.integers(0, 59), st.integers(0, 3), st.integers(1, 40),
                                 st.integers(5, 60), st.sampled_from(CELLS)),
                       min_size=1, max_size=6),
       crash_leaving=st.booleans(), ext=st.sampled_from(sorted(EXTENSIONS)))
# Switched off while leaving, on again in a cell that skipped (4.3) or never relayed
# (4.1) its "has left": the gateway now sends it on the greeting (footnote 4).
@example(seed=248, loss=0.0, cycles=[(3, 2, 14, 28, "H3"), (8, 0, 12, 27, "H1"),
                                     (20, 0, 3, 20, "H1"), (31, 0, 30, 15, "H1"),
                                     (0, 3, 1, 20, "H3"), (0, 0, 20, 56, "H2")],
         crash_leaving=True, ext="all")
@example(seed=187, loss=0.0, cycles=[(0, 0, 1, 5, "H1"), (20, 0, 35, 26, "H2"),
                                     (10, 3, 14, 38, "H3")],
         crash_leaving=True, ext="subscribe")
# Switched on in an empty cell after the traffic ended: with 4.1 the cell's beacons
# show what was sequenced while it was out of the subscr-set.
@example(seed=10000, loss=0.0, cycles=[(7, 1, 9, 47, "H1"), (25, 0, 2, 43, "H1"),
                                       (25, 2, 10, 21, "H2")],
         crash_leaving=False, ext="all")
def test_no_message_id_reused_and_nothing_missed_whatever_the_crash_point(
        seed: int, loss: float, cycles: list[tuple[int, int, int, int, str]],
        crash_leaving: bool, ext: str) -> None:
    """Members crash right after an arbitrary input (a datagram, a timer, a send:
    before what it produced left) and come back in any cell. No message id ever
    names two messages (the harness checks every NEW on the uplink and every send),
    everything sent is sequenced once, and P1-P7 hold over the whole run, with and
    without each extension of seeds/001 section 4."""
    cfg = InfraConfig(member_timeout=5.0, **EXTENSIONS[ext])  # type: ignore[arg-type]
    net = Net(seed=seed, loss=loss, cfg=cfg)
    names = [f"M{i}" for i in range(4)]
    for i, n in enumerate(names):
        net.add_member(n, CELLS[i % 3], store=MemoryMemberStore())
    net.run_until(2.0)
    off_since: dict[str, float] = {}
    back_at: dict[str, tuple[float, str]] = {}
    for k in range(60):
        for n in names:
            if n not in net.off and net.members[n].phase in (Phase.JOINING, Phase.MEMBER) \
                    and net.rng.random() < 0.3:
                net.send(n, f"{n}-{k}".encode())
        for at, who, inputs, off_rounds, cell in cycles:
            n = names[who]
            if at == k and n not in net.off and n not in back_at:
                net.crash_after(n, inputs)
                back_at[n] = (off_rounds * 0.02, cell)
        _power_cycle(net, off_since, back_at, leave=False)
        net.run_until(net.now + 0.02)
    while net.off or back_at:  # everybody back on
        _power_cycle(net, off_since, back_at, leave=False)
        net.run_until(net.now + 0.02)
    assert net.run_while(lambda: net.pending() > 0, net.now + 60), "sends never sequenced"
    for n in names:
        net.leave(n)
        if crash_leaving:
            net.crash_after(n, 1 + net.rng.randrange(20))
            back_at[n] = (0.3, CELLS[net.rng.randrange(3)])
    net.run_until(net.now + 0.1)
    while net.off or back_at or any(x.phase != Phase.LEFT for x in net.members.values()):
        _power_cycle(net, off_since, back_at, leave=True)
        net.run_until(net.now + 0.05)
        assert net.now < 200, {n: x.phase for n, x in net.members.items()}
    net.run_until(net.now + cfg.member_timeout + 2.0)  # a JOIN a crash abandoned expires
    check_total_order(net)  # P1, P2, P6
    check_complete(net)  # P4, P5: every message sent once, delivered by every member
    for n in names:  # P3
        log = net.logs[n]
        assert log.joined and log.left and not log.left[-1].expelled, n
        assert not any(x.expelled for x in log.left), f"{n} was expelled"
    check_garbage_collected(net)  # P7
    sent = {mid for n in names for mid in net.logs[n].sent}
    assert sent == {mid for n in names for mid in net.logs[n].left_process}


def _power_cycle(net: Net, off_since: dict[str, float],
                 back_at: dict[str, tuple[float, str]], *, leave: bool) -> None:
    """Switch back on the members whose time off is over."""
    for n in sorted(net.off):
        off_since.setdefault(n, net.now)
    for n in list(off_since):
        pause, cell = back_at.get(n, (0.0, "H1"))
        if net.now >= off_since[n] + pause:
            del off_since[n]
            back_at.pop(n, None)
            core = net.power_on(n, cell, join=not leave)
            if leave and core.phase in (Phase.MEMBER, Phase.JOINING, Phase.IDLE):
                if core.phase == Phase.IDLE:  # crashed before its join was through
                    core.join(net.now)
                core.leave(net.now)
                net.move(n, cell)
    for n in list(back_at):  # a crash point that was never reached
        if n not in net.off and n not in net._crash_in:
            del back_at[n]


# ----------------------------------------------------------------- bad saved state
def test_unreadable_numbering_is_a_typed_error() -> None:
    for bad in ("12", -1, None, True, 1.5):
        with pytest.raises(SavedStateError, match="message numbering"):
            decode_saved(StoredMember("A", bad, None))


@pytest.mark.parametrize("membership, reason", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"v": 99}', "format"),
    ('{"v": 1, "group": "g", "phase": "dancing", "leave": false}', "phase"),
    ('{"v":1,"group":"g","phase":"member","leave":false,"mystable":-3,"mynew":0,'
     '"confirmed":0,"join_id":5}', "mystable"),
    ('{"v":1,"group":"g","phase":"member","leave":false,"mystable":3,"mynew":0,'
     '"confirmed":0,"join_id":null}', "without a join-id"),
    ('{"v":1,"group":"g","phase":"member","leave":false,"mystable":3,"mynew":1,'
     '"confirmed":2,"join_id":5}', "confirms more"),
    ('{"v":1,"group":"g","phase":"member","leave":false,"mystable":3,"mynew":1,'
     '"confirmed":0,"join_id":4294967296}', "join-id"),
])
def test_a_corrupt_membership_is_left_behind_for_a_fresh_join(membership: str,
                                                              reason: str) -> None:
    stored = StoredMember("A", 7, membership, ((6, 1, b"p"),))
    saved = decode_saved(stored)
    assert reason in saved.problem and not saved.resumable
    assert saved.app_seq == 7 and saved.pending == (m.NewItem(1, 6, b"p", saved.group),)
    core = new_core(MemoryMemberStore())
    core.restore(saved)
    assert core.stats.restore_discarded == 1 and reason in core.restore_problem
    assert core.phase == Phase.IDLE and core.mid is None
    attached(core)
    mid = core.join(0.0)  # a fresh join; the pending message goes with it
    core.receive(m.Normals("G", (has_joined(1, mid, saved.group),)), 0.0)
    core.drain()
    ack(core)
    (new,) = [u.message for u in core.drain() if isinstance(u.message, m.NewReq)]
    assert new.items == (m.NewItem(1, 6, b"p", saved.group),)
    assert core.send(b"q", 0.0) == "A:8"  # never below a number that was used


@pytest.mark.parametrize("pending, reason", [
    (((0, 1, b"x"),), "unreadable"),
    ((("3", 1, b"x"),), "unreadable"),
    (((3, 1, "text"),), "unreadable"),
    (((3, 2, b"x"), (4, 2, b"y")), "sending order"),
    (((3, 9, b"x"),), "do not fit"),
])
def test_bad_pending_messages_are_left_behind_with_a_reason(
        pending: tuple[tuple[object, object, object], ...], reason: str) -> None:
    membership = ('{"v":1,"group":"g","phase":"member","leave":false,"mystable":3,'
                  '"mynew":2,"confirmed":0,"join_id":5}')
    saved = decode_saved(StoredMember("A", 5, membership, pending))
    assert reason in saved.problem and saved.phase == "idle"


def test_saved_state_of_another_computer_or_a_used_core_is_refused() -> None:
    saved = SavedMember("Z", 3)
    with pytest.raises(SavedStateError, match="'Z'"):
        new_core(MemoryMemberStore()).restore(saved)
    core = new_core(MemoryMemberStore())
    attached(core)
    core.join(0.0)
    with pytest.raises(UsageError, match="restore"):
        core.restore(SavedMember("A", 3))


def test_a_joining_member_joins_afresh_at_power_on() -> None:
    store = MemoryMemberStore()
    core = new_core(store)
    attached(core)
    first = core.join(0.0)
    core.send(b"early", 0.0)  # queued until it is a member
    output(core, store)
    new = new_core(store)
    new.restore(decode_saved(store.load()))  # type: ignore[arg-type]
    assert new.phase == Phase.IDLE and new.mid is None and new.pending_sends == 1
    attached(new)
    assert new.join(0.0) != first


def test_without_a_store_nothing_changes() -> None:
    sink = ListSink()
    core = MemberCore("A", InfraConfig(), random.Random(1), trace=sink)
    attached(core)
    mid = core.join(0.0)
    core.receive(m.Normals("G", (has_joined(1, mid, "infra"), rec(2, "infra"))), 0.0)
    assert [e.event for e in sink.events] == ["join", "recv", "deliver"]  # at once
    assert core.durable is None and core.stats.commits == 0
    assert [e for e in core.events() if isinstance(e, Delivered)]
