"""In a large lossy group the first repair goes unasked (group/repeats.py): a node's own
records go again with the status after sending when some member is likely to lack
them, so those who lost them have them without a NACK; a loss-free or small group
sends nothing more than before."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from m2mc.group.codec import Body, Nack, Repair
from m2mc.group.config import GroupConfig
from m2mc.group.repeats import MAX_PENDING, Repeats
from m2mc.ordering import Message, MessageId

from .harness import Net

GID = "g-repeat"


def record(seq: int) -> Message:
    return Message(MessageId("me", seq), None, b"x")


# ---------------------------------------------------------------- the core
def test_the_loss_is_the_share_of_new_records_that_came_by_repair() -> None:
    repeats = Repeats(0.8)
    assert repeats.loss == 0.0 and repeats.lacking(100) == 0.0
    for _ in range(200):  # one record in ten comes by repair
        repeats.fresh(9)
        repeats.repaired(1)
    assert 0.08 < repeats.loss < 0.12
    assert repeats.lacking(100) > 0.99  # some member of 100 lacks it: all but certain
    assert repeats.lacking(2) < 0.12
    repeats.fresh(2000)  # a network that stopped losing: the estimate follows
    assert repeats.loss < 0.001


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50)), max_size=60))
def test_the_loss_stays_a_probability(steps: list[tuple[bool, int]]) -> None:
    repeats = Repeats(0.8)
    for by_repair, n in steps:
        (repeats.repaired if by_repair else repeats.fresh)(n)
        assert 0.0 <= repeats.loss <= 1.0
        assert 0.0 <= repeats.lacking(1000) <= 1.0


def test_records_go_again_only_with_a_bare_status_and_a_likely_lack() -> None:
    repeats = Repeats(0.8)
    repeats.repaired(64)  # a lossy network
    repeats.own(record(1))
    assert repeats.take(100, bare=False) == []  # a status with news: nothing more
    repeats.own(record(2))
    assert repeats.take(100, bare=True) == [record(2)]  # (the first went with its turn)
    assert repeats.take(100, bare=True) == []  # each record once
    repeats.own(record(3))
    assert repeats.take(1, bare=True) == []  # nobody else to lack it
    quiet = Repeats(0.8)
    quiet.own(record(4))
    assert quiet.take(100, bare=True) == []  # a loss-free network
    assert repeats.sent == 1


def test_at_most_max_pending_records_wait_for_their_copy() -> None:
    repeats = Repeats(0.0)
    for seq in range(1, 3 * MAX_PENDING):
        repeats.own(record(seq))
    again = repeats.take(10, bare=True)
    assert [m.mid.seq for m in again] == list(range(1, MAX_PENDING + 1))


# ---------------------------------------------------------------- in a group
def chat(size: int, loss: float, repeat_above: float = GroupConfig().repeat_above,
         rounds: int = 4) -> tuple[Net, list[str], dict[str, int]]:
    """A group of ``size`` where every member sends ``rounds`` messages in turn;
    the group messages sent, by kind (Repeat: a REPAIR sent unasked)."""
    net = Net(seed=11, loss=loss, tracing=False,
              config=lambda: GroupConfig(repeat_above=repeat_above))
    pids = [f"m{i:02d}" for i in range(size)]
    sent: dict[str, int] = {}
    for pid in pids:
        net.add(pid)
        node = net.nodes[pid]

        def spy(tag: bytes, body: Body, original=node.send_body, **kw: bool) -> None:
            original(tag, body, **kw)
            kind = type(body).__name__
            sent[kind] = sent.get(kind, 0) + 1

        # (a node sends its statuses and NACKs through send_body, its repairs through
        # the output side's own)
        node.send_body = node.output.send_body = spy  # type: ignore[method-assign]
    net.do(pids[0], lambda n: n.create_group("room", net.now, gid=GID))
    net.run(0.5)
    for pid in pids[1:]:
        net.do(pid, lambda n: n.join_group(GID, net.now, order="sb"))
    net.run(5.0)
    sent.clear()
    for r in range(rounds):
        for pid in pids:
            net.send(pid, GID, f"{pid} says {r}".encode())
            net.run(0.2)
    net.run(60.0)
    net.check_group(GID, pids)  # every member delivered every message, in order
    sent["Repeat"] = sum(net.nodes[p].groups[GID].repeats.sent for p in pids)
    return net, pids, sent


def test_a_large_lossy_group_sends_its_data_again_and_asks_for_far_less() -> None:
    # 20 members at 15% loss: some member lacks each message with chance 0.95.
    _, pids, repeating = chat(20, 0.15)
    _, _, asking = chat(20, 0.15, repeat_above=2.0)  # (never)
    messages = 4 * len(pids)
    assert asking["Repeat"] == 0
    assert repeating["Repeat"] > 0.7 * messages  # once the members measured the loss
    assert repeating[Nack.__name__] < 0.6 * asking[Nack.__name__]
    # NACKs are answered as before: the repairs are those of the messages lost twice
    assert repeating[Repair.__name__] - repeating["Repeat"] < 0.6 * asking[Repair.__name__]


def test_a_loss_free_large_group_sends_nothing_again() -> None:
    _, _, sent = chat(20, 0.0, rounds=2)
    assert sent["Repeat"] == 0 and Repair.__name__ not in sent


def test_a_small_lossy_group_sends_nothing_again() -> None:
    # Up to status_slice members the status after sending is a full one, never bare.
    _, _, sent = chat(8, 0.3, rounds=2)
    assert sent["Repeat"] == 0
