"""Hypothesis stateful tests: each core against a model of what must be deliverable.

Messages are sent, arrive in any order, arrive again (duplicates, or a repair
after a refusal at the bound). After every step: each delivered message was
deliverable when delivered and is delivered once; nothing held could be
delivered; the bound holds; ``has``/``digest`` agree with the model. At the end
the group layer's repair (everything sent again, in send order) delivers all.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from m2mc.ordering import ROOT, Message, MessageId, OrderingCore, make_core

SENDERS = ("A", "B", "C")


class CoreMachine(RuleBasedStateMachine):
    order = ""

    def __init__(self) -> None:
        super().__init__()
        self.core: OrderingCore = make_core(self.order)
        self.max_held = 0
        self.sent: list[Message] = []
        self.in_flight: list[Message] = []
        self.delivered_ids: set[MessageId] = set()
        self.count: dict[str, int] = {}  # per sender, delivered (always a prefix here)
        self.seqs: dict[str, int] = {}

    # -- per-order model ---------------------------------------------------------

    def new_message(self, pid: str, seq: int, choice: int) -> Message:
        raise NotImplementedError

    def deliverable(self, m: Message) -> bool:
        raise NotImplementedError

    # -- rules --------------------------------------------------------------------

    @initialize(max_held=st.integers(0, 6))
    def start(self, max_held: int) -> None:
        self.max_held = max_held
        self.core = make_core(self.order, max_held=max_held)

    @rule(sender=st.sampled_from(SENDERS), choice=st.integers(0, 10**6))
    def send(self, sender: str, choice: int) -> None:
        seq = self.seqs[sender] = self.seqs.get(sender, 0) + 1
        m = self.new_message(sender, seq, choice)
        self.sent.append(m)
        self.in_flight.append(m)

    @precondition(lambda self: bool(self.in_flight))
    @rule(i=st.integers(0, 10**6), keep=st.booleans())
    def arrive(self, i: int, keep: bool) -> None:
        m = self.in_flight[i % len(self.in_flight)]
        self.feed(m)
        if not keep and self.core.has(m.mid):
            self.in_flight.remove(m)

    @precondition(lambda self: bool(self.sent))
    @rule(i=st.integers(0, 10**6))
    def arrive_again(self, i: int) -> None:
        self.feed(self.sent[i % len(self.sent)])

    def feed(self, m: Message) -> None:
        core = self.core
        known = core.has(m.mid)
        duplicates, refused = core.duplicates, core.refused
        out = core.receive(m)
        if known:
            assert out == [] and core.duplicates == duplicates + 1
        if core.refused > refused:
            assert out == [] and not core.has(m.mid)
            assert core.held_count == self.max_held
        for d in out:
            assert d.mid not in self.delivered_ids
            assert self.deliverable(d)
            self.delivered_ids.add(d.mid)
            self.count[d.mid.pid] = self.count.get(d.mid.pid, 0) + 1
            assert core.delivered(d.mid)

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def nothing_held_could_be_delivered(self) -> None:
        held = self.core.held_messages()  # type: ignore[attr-defined]
        assert self.core.held_count == len(held) <= self.max_held
        for h in held:
            assert not self.deliverable(h)
            assert self.core.has(h.mid) and not self.core.delivered(h.mid)

    @invariant()
    def digest_is_what_we_have(self) -> None:
        have: dict[str, set[int]] = {}
        for mid in self.delivered_ids:
            have.setdefault(mid.pid, set()).add(mid.seq)
        for h in self.core.held_messages():  # type: ignore[attr-defined]
            have.setdefault(h.mid.pid, set()).add(h.mid.seq)
        expected: dict[str, list[tuple[int, int]]] = {}
        for pid in sorted(have):
            runs: list[tuple[int, int]] = []
            for s in sorted(have[pid]):
                runs = ([*runs[:-1], (runs[-1][0], s)] if runs and runs[-1][1] == s - 1
                        else [*runs, (s, s)])
            expected[pid] = runs
        assert self.core.digest() == expected

    def teardown(self) -> None:
        for m in self.sent:  # repair: everything again, in send order
            self.feed(m)
        assert self.delivered_ids == {m.mid for m in self.sent}
        assert self.core.held_count == 0


class SbMachine(CoreMachine):
    order = "sb"

    def new_message(self, pid: str, seq: int, choice: int) -> Message:
        k = choice % (len(self.sent) + 1)
        parent = self.sent[k].mid if k < len(self.sent) else ROOT
        return Message(MessageId(pid, seq), parent)

    def deliverable(self, m: Message) -> bool:
        return m.parent == ROOT or m.parent in self.delivered_ids


class FifoMachine(CoreMachine):
    order = "fifo"

    def new_message(self, pid: str, seq: int, choice: int) -> Message:
        return Message(MessageId(pid, seq))

    def deliverable(self, m: Message) -> bool:
        return m.mid.seq == self.count.get(m.mid.pid, 0) + 1


class CausalMachine(CoreMachine):
    order = "causal"

    def __init__(self) -> None:
        super().__init__()
        self.knowledge: dict[str, dict[str, int]] = {}

    def new_message(self, pid: str, seq: int, choice: int) -> Message:
        known = dict(self.knowledge.get(pid, {}))
        if self.sent and choice % 3:  # the sender had delivered one more message (and its past)
            other = self.sent[choice % len(self.sent)].vclock or {}
            for k, v in other.items():
                known[k] = max(known.get(k, 0), v)
        known[pid] = seq
        self.knowledge[pid] = known
        return Message(MessageId(pid, seq), vclock=dict(known))

    def deliverable(self, m: Message) -> bool:
        vclock: Any = m.vclock
        pid = m.mid.pid
        return m.mid.seq == self.count.get(pid, 0) + 1 and all(
            v <= self.count.get(k, 0) for k, v in vclock.items() if k != pid)


class TotalMachine(CoreMachine):
    order = "total"

    def new_message(self, pid: str, seq: int, choice: int) -> Message:
        return Message(MessageId(pid, seq), gseq=len(self.sent) + 1)

    def deliverable(self, m: Message) -> bool:
        return m.gseq == len(self.delivered_ids) + 1


_settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestSbMachine = _settings(SbMachine).TestCase
TestFifoMachine = _settings(FifoMachine).TestCase
TestCausalMachine = _settings(CausalMachine).TestCase
TestTotalMachine = _settings(TotalMachine).TestCase
