"""MSP's next deadline is the earliest of its MIRs' (and its own catch-up's and
series'), and a response series goes when it is due, whatever mix of requests,
responses and timers came before: the responder keeps its MIRs' deadlines in a heap
beside them (group/msp.py), which must say what a look at every MIR would."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.group.codec import SyncReq, SyncResp
from m2mc.group.config import GroupConfig
from m2mc.group.msp import Msp
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import MemoryStore

PIDS = ("a", "b", "c", "d", "e")


def responder(max_mirs: int) -> Msp:
    store = MemoryStore()
    for seq in range(1, 6):
        store.put("g", Message(MessageId("x", seq), ROOT, b"m"), True)
    config = GroupConfig(max_mirs=max_mirs, max_pssit=4)
    return Msp("r", "g", config, random.Random(7), store, lambda: {"x": [(1, 5)]})


def looked_at_every_one(msp: Msp) -> float | None:
    found = [m.deadline for m in msp.mirs.values() if m.deadline is not None]
    found += [at for at, _ in msp.series.values()]
    c = msp.catchup
    if c is not None and not c.done:
        found.append(c.deadline)
    return min(found, default=None)


step = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(PIDS), st.integers(1, 4)),
    st.tuples(st.just("response"), st.sampled_from(PIDS), st.integers(1, 4),
              st.integers(0, 3), st.sampled_from(("a", "z"))),
    st.tuples(st.just("time"), st.floats(0.0, 0.5)),
    st.tuples(st.just("due")),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=60), st.integers(1, 6))
def test_the_next_deadline_is_the_earliest_of_all(steps: list[tuple], max_mirs: int) -> None:
    msp = responder(max_mirs)
    now = 0.0
    for s in steps:
        if s[0] == "request":
            msp.on_request(SyncReq(s[1], s[2], {}), now)
        elif s[0] == "response":
            msp.on_response(SyncResp(s[4], s[1], s[2], [], s[3]), now)
        elif s[0] == "time":
            now += s[1]
        else:
            responses = msp.due(now)
            assert all(resp.sender == "r" for resp in responses)
            deadline = msp.next_deadline()
            assert deadline is None or deadline > now  # nothing due is left behind
        assert msp.next_deadline() == looked_at_every_one(msp)
        assert len(msp.mirs) <= max_mirs
