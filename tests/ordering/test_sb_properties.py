"""S_b ordering under random reply trees and random arrival orders (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.ordering import ROOT, Message, MessageId, SbOrder


@st.composite
def reply_trees(draw: st.DrawFn, max_size: int = 40) -> list[Message]:
    n = draw(st.integers(1, max_size))
    senders = draw(st.integers(1, 4))
    seqs = [0] * senders
    out: list[Message] = []
    for i in range(n):
        s = draw(st.integers(0, senders - 1))
        seqs[s] += 1
        p = draw(st.integers(-1, i - 1))
        out.append(Message(MessageId(f"p{s}", seqs[s]), ROOT if p < 0 else out[p].mid,
                           payload=i.to_bytes(2, "big")))
    return out


@st.composite
def arrivals(draw: st.DrawFn, messages: list[Message]) -> list[Message]:
    """A random permutation with random duplicates inserted anywhere."""
    order = [messages[i] for i in draw(st.permutations(range(len(messages))))]
    if not messages:
        return order
    for i, pos in draw(st.lists(st.tuples(st.integers(0, len(messages) - 1),
                                          st.integers(0, 10**6)), max_size=len(messages))):
        order.insert(pos % (len(order) + 1), messages[i])
    return order


class NaiveSb:
    """The seed's protocol taken literally (seeds/003 IV.C, VI.C Algorithm 3): a
    list of out-of-sequence rows scanned linearly, depth-first release in row order."""

    def __init__(self) -> None:
        self.delivered: set[MessageId] = {ROOT}
        self.osms: list[Message] = []

    def receive(self, m: Message) -> list[Message]:
        if m.mid in self.delivered or any(r.mid == m.mid for r in self.osms):
            return []
        if m.parent not in self.delivered:
            self.osms.append(m)
            return []
        out: list[Message] = []
        self._update_ot(m, out)
        return out

    def _update_ot(self, m: Message, out: list[Message]) -> None:
        self.delivered.add(m.mid)
        out.append(m)
        for row in [r for r in self.osms if r.parent == m.mid]:
            self.osms.remove(row)
            self._update_ot(row, out)


def intervals(seqs: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in sorted(seqs):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_sb_matches_the_seed_protocol_and_delivers_everything_once(data: st.DataObject) -> None:
    messages = data.draw(reply_trees())
    arrival = data.draw(arrivals(messages))
    core, naive = SbOrder(), NaiveSb()
    delivered: list[Message] = []
    arrived: set[MessageId] = set()
    by_mid = {m.mid: m for m in messages}
    for m in arrival:
        arrived.add(m.mid)
        out = core.receive(m)
        assert out == naive.receive(m)
        delivered += out
        done = {d.mid for d in delivered}
        # Minimal delivery delay: delivered == every arrived message whose whole
        # chain of ancestors has arrived; nothing held could have been delivered.
        def chain_arrived(x: MessageId) -> bool:
            while x != ROOT:
                if x not in arrived:
                    return False
                x = by_mid[x].parent
            return True
        assert done == {x for x in arrived if chain_arrived(x)}
        for h in core.held_messages():
            assert h.parent != ROOT and not core.delivered(h.parent)
        assert core.held_count == len(arrived) - len(done)
    # Exactly once, parent first.
    assert sorted(d.mid for d in delivered) == sorted(by_mid)
    position = {d.mid: i for i, d in enumerate(delivered)}
    for d in delivered:
        assert d.parent == ROOT or position[d.parent] < position[d.mid]
    assert core.duplicates == len(arrival) - len(messages)
    assert core.held_count == 0 and core.missing() == []


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_sb_with_losses_holds_exactly_the_orphans_and_names_what_is_missing(
        data: st.DataObject) -> None:
    messages = data.draw(reply_trees())
    lost = set(data.draw(st.sets(st.sampled_from([m.mid for m in messages]))))
    arrival = data.draw(arrivals([m for m in messages if m.mid not in lost]))
    core = SbOrder()
    for m in arrival:
        core.receive(m)
    by_mid = {m.mid: m for m in messages}

    def reachable(x: MessageId) -> bool:
        while x != ROOT:
            if x in lost:
                return False
            x = by_mid[x].parent
        return True

    received = {m.mid for m in messages} - lost
    assert {x for x in received if core.delivered(x)} == {x for x in received if reachable(x)}
    held = {h.mid for h in core.held_messages()}
    assert held == {x for x in received if not reachable(x)}
    assert core.missing() == sorted({by_mid[h].parent for h in held} - held)
    assert set(core.missing()) <= lost
    per_sender: dict[str, set[int]] = {}
    for x in received:
        per_sender.setdefault(x.pid, set()).add(x.seq)
    assert core.digest() == {pid: intervals(s) for pid, s in sorted(per_sender.items())}


@settings(max_examples=100, deadline=None)
@given(data=st.data(), max_held=st.integers(0, 5))
def test_sb_bound_refuses_then_a_resend_completes(data: st.DataObject, max_held: int) -> None:
    """At the bound, refused messages are not recorded; sending again what the
    store refused (the group layer's repair) eventually delivers everything."""
    messages = data.draw(reply_trees(max_size=25))
    arrival = data.draw(arrivals(messages))
    core = SbOrder(max_held=max_held)
    delivered: list[Message] = []
    for m in arrival:
        before = core.refused
        delivered += core.receive(m)
        assert core.held_count <= max_held
        if core.refused > before:
            assert not core.has(m.mid)
    for m in messages:  # repair: resend in send order
        delivered += core.receive(m)
    assert sorted(d.mid for d in delivered) == sorted(m.mid for m in messages)
    assert core.held_count == 0
