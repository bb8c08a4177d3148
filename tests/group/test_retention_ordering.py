"""Retention never takes from a node what its own ordering still needs
(docs/group.md section 8): whatever the arrival order, the bounds, the eviction
passes and the restarts, an S_b, FIFO or causal node keeps every message it holds
(received, not delivered yet), delivers every message exactly once, each after
its parent (and its causal past), and a restarted node neither delivers an
evicted message again nor keeps a held one waiting for an evicted parent."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from m2mc.group.config import GroupConfig
from m2mc.group.mop import Mop
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import GroupStore, MemoryStore, RetentionPolicy
from m2mc.store.sqlite import SqliteStore

G = "g"
SENDERS = ("a", "b", "c")


def history(order: str, picks: list[tuple[int, int]]) -> list[Message]:
    """Messages in the order they were sent, each by a sender that had delivered
    every earlier one: its parent is any earlier message (or the root), its clock
    counts every earlier message."""
    out: list[Message] = []
    counts = dict.fromkeys(SENDERS, 0)
    for sender_i, parent_i in picks:
        sender = SENDERS[sender_i % len(SENDERS)]
        counts[sender] += 1
        parent = ROOT if not out or parent_i == 0 else out[parent_i % len(out)].mid
        vclock = {p: n for p, n in counts.items() if n} if order == "causal" else None
        out.append(Message(MessageId(sender, counts[sender]), parent, b"p" * 60, vclock, None))
    return out


OPS = st.lists(st.one_of(
    st.tuples(st.just("arrive"), st.integers(0, 10_000)),
    st.tuples(st.just("tick"), st.floats(0.05, 1.5)),
    st.tuples(st.just("restart"), st.just(0)),
), max_size=80)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order=st.sampled_from(["sb", "fifo", "causal"]), durable=st.booleans(),
       mode=st.sampled_from(["full", "ids"]),
       picks=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50)), min_size=1,
                      max_size=30),
       arrival_seed=st.randoms(use_true_random=False), ops=OPS)
def test_retention_never_takes_what_the_ordering_needs(
        order: str, durable: bool, mode: str, picks: list[tuple[int, int]],
        arrival_seed: object, ops: list[tuple[str, float]]) -> None:
    sent = history(order, picks)
    arrival = list(sent)
    arrival_seed.shuffle(arrival)  # type: ignore[attr-defined]
    # A bound of about two messages and an age of one second: eviction all the time.
    policy = RetentionPolicy(age=1.0, max_bytes=300, mode=mode, max_ids=3)
    path = Path(tempfile.mkdtemp()) / "log.db"

    def open_store() -> GroupStore:
        store: GroupStore = SqliteStore(path) if durable else MemoryStore()
        store.set_retention(policy)
        return store

    store = open_store()
    mop = Mop("me", G, order, GroupConfig(), store)
    now = 0.0
    delivered: list[MessageId] = []
    accepted: set[MessageId] = set()
    next_arrival = 0

    def check() -> None:
        assert len(delivered) == len(set(delivered)), "a message was delivered twice"
        done = set(delivered)
        for mid in accepted - done:  # held here: the log must still have it
            assert store.get(G, mid) is not None, f"held {mid} was evicted"

    for op, value in ops:
        if op == "arrive":
            # Mostly the next new message; sometimes a copy of one that came already.
            if next_arrival < len(arrival) and int(value) % 4:
                m = arrival[next_arrival]
                next_arrival += 1
            else:
                m = arrival[int(value) % len(arrival)]
            _, out = mop.accept(m)
            accepted.add(m.mid)
            delivered.extend(d.mid for d in out)
        elif op == "tick":
            now += value
            store.commit(now)
        else:  # crash after a commit (the node commits before anything leaves it)
            store.commit(now)
            if durable:
                store.close()
                store = open_store()
            mop = Mop("me", G, order, GroupConfig(), store)
            delivered.extend(d.mid for d in mop.restore(store.load_messages(G)))
        check()
    for m in sent:  # everything arrives in the end (repair), in the order it was sent
        _, out = mop.accept(m)
        delivered.extend(d.mid for d in out)
        store.commit(now)
    check()
    assert sorted(delivered) == sorted(m.mid for m in sent)
    position = {mid: i for i, mid in enumerate(delivered)}
    for m in sent:
        if not m.parent.is_root:
            assert position[m.parent] < position[m.mid], f"{m.mid} before {m.parent}"
        if order == "causal":
            assert m.vclock is not None
            for pid, n in m.vclock.items():
                if n and pid != m.mid.pid:
                    assert position[MessageId(pid, n)] < position[m.mid]
        if order in ("fifo", "causal") and m.mid.seq > 1:
            assert position[MessageId(m.mid.pid, m.mid.seq - 1)] < position[m.mid]
    restarts = sum(op == "restart" for op, _ in ops)
    event(f"evicted: {min(store.evicted, 3)}, restarts: {min(restarts, 2)}")
    store.close()
