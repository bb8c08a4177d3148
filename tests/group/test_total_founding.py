"""The founder of a total-order log brings every member it hears into the
configuration before it stamps a message (docs/group.md section 5): messages sent
before the log existed are committed by a majority of the members, never by the
founder alone. (Stamped in a configuration of one, they were held by the founder
only; when it closed, the others could never elect a successor without it and
stopped for good: tests/group/test_multiprocess_total.py.)"""

from __future__ import annotations

from m2mc.group.config import GroupConfig
from m2mc.group.messages import Ack, MemberEntry
from m2mc.group.total.mop import TotalMop
from m2mc.ordering import Message, MessageId
from m2mc.store import MemoryStore

MEMBERS = {pid: MemberEntry(pid, 1, True) for pid in ("a", "b", "c", "s")}


def test_a_backlog_is_stamped_in_the_configuration_of_every_member_heard() -> None:
    mop = TotalMop("a", "g", "total", GroupConfig(), MemoryStore())
    log = mop.log
    log.is_member = lambda pid: pid in MEMBERS
    log.may_found = True  # a group joined by name: its lowest member founds the log
    # s sent 100 messages before anyone founded the log: they wait, unstamped.
    for seq in range(1, 101):
        assert mop.accept(Message(MessageId("s", seq), payload=b"m"))[1] == []
    log.tick(0.0, MEMBERS)  # no log heard of: wait sequencer_timeout ...
    later = log.config.sequencer_timeout
    log.last_heard = dict.fromkeys(MEMBERS, later - 0.5)  # (their statuses go on)
    log.tick(later, MEMBERS)  # ... then a founds it
    assert log.is_leader and log.config_end() == set(MEMBERS)
    mop.stamp_waiting()
    assert mop.pump() == []  # nothing is committed by a alone ...
    assert log.commit_b < log.high
    for pid in ("b", "s"):  # ... but once a majority holds it
        log.on_ack(Ack(pid, log.ballot[0], "a", log.high), 1.0)
    delivered = mop.pump()
    assert [m.mid.seq for m in delivered] == list(range(1, len(delivered) + 1))
    assert delivered and [m.gseq for m in delivered] == [m.mid.seq for m in delivered]
