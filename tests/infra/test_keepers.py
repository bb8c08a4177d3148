"""Only the keepers' acknowledgments commit (seeds/001 4.1; docs/decisions.md, "Only the
keepers' acknowledgments commit").

Found by tests/infra/test_properties_restarts.py's random search: three durable hosts,
subscriptions on. H2 (the wanted replica) crashed; before the master H1 noticed, it
committed record 61 on the acknowledgment of H3, a gateway that was subscribed then. Its
cell emptied, it left the subscr-set, and the Commit for 61 named H2 the replica: so H3
freed its tables. H1 crashed in turn; H2 came back and took over with a log ending at
60, and numbered another record 61. When H1 came back, its own record 61 was not the
master's, it refused every record after it, and the members behind it stalled (before
that, a member could have delivered H1's 61: a total-order break).

A record is safe only on a quorum of hosts that will keep it, so the master counts only
the hosts it tells to keep the log (its keepers), and it tells one it may stop only once
the others hold everything committed."""

from __future__ import annotations

import pytest
from infra_harness import Net
from test_properties import EXTENSIONS, check_all
from test_properties_restarts import Fault, run_with_faults

from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.coordinator import Coordinator
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.keepers import Keepers
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState

E = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)
LIVE = ["H1", "H2", "H3"]


def coordinator() -> Coordinator:
    return Coordinator("H1", E, InfraConfig(subscribe=True).check(), ReplicaLog(),
                       CoordState(), 0.0)


def sequence(c: Coordinator, nseq: int) -> int:
    """One more multicast of A's; the log's new end."""
    item = m.NewItem(nseq, nseq, b"x", "g")
    c.handle_forward(m.Forward("H2", nseq + 1, m.NewReq("A", "H2", 1, A, (item,))), 0.0)
    return c.log.high


def announced(c: Coordinator) -> set[tuple[str, ...]]:
    """The replica lists of the Commits the master sent (one copy per host)."""
    return {x.replicas for _, x in c.drain() if isinstance(x, m.Commit)}


def settled() -> Coordinator:
    """A master whose keepers have shrunk to the wanted replica, H2."""
    c = coordinator()
    c.handle_forward(m.Forward("H2", 1, m.JoinReq("A", "H2", 1, A, ("g",))), 0.0)
    c.flush(LIVE, 2, 0.0, LIVE)
    c.drain()
    for h in ("H2", "H3"):
        c.handle_accepted(m.Accepted(E, h, c.log.high), 0.0)
    assert c.update_commit(2, set(LIVE))
    c.flush(LIVE, 2, 0.0, LIVE)
    assert announced(c) == {("H2",)}
    return c


def test_every_host_keeps_the_log_until_the_wanted_replicas_hold_it() -> None:
    c = coordinator()
    c.handle_forward(m.Forward("H2", 1, m.JoinReq("A", "H2", 1, A, ("g",))), 0.0)
    c.handle_accepted(m.Accepted(E, "H3", c.log.high), 0.0)  # H3, not the wanted H2
    assert c.update_commit(2, set(LIVE))  # every host keeps for now: H3's copy counts
    c.flush(LIVE, 2, 0.0, [*LIVE, "H4"])
    # ... and the Commit says so, naming every host known, the dead H4 too.
    assert announced(c) == {("H2", "H3", "H4")}


def test_an_acknowledgment_from_a_host_that_may_free_its_tables_commits_nothing() -> None:
    c = settled()
    c.handle_subscribe("H3", c.log.high, 0.0)  # H3 has members: it gets every record
    high = sequence(c, 1)
    c.handle_accepted(m.Accepted(E, "H3", high), 0.0)
    assert not c.update_commit(2, set(LIVE))  # H2, the keeper, has not got it yet
    c.handle_accepted(m.Accepted(E, "H2", high), 0.0)
    assert c.update_commit(2, set(LIVE)) and c.commit == high


def test_a_new_replica_is_a_keeper_at_once_and_the_old_one_stays_until_it_is_covered() -> None:
    c = settled()
    c.handle_subscribe("H3", 0, 0.0)  # a gateway that had freed its tables
    high = sequence(c, 1)
    live = ["H1", "H3"]  # H2 is down: H3 is now the wanted replica
    c.flush(live, 2, 0.0, LIVE)
    assert c.keepers.hosts == frozenset({"H2", "H3"})  # H3 does not hold what is committed yet
    assert not c.update_commit(2, set(live))
    c.handle_accepted(m.Accepted(E, "H3", high), 0.0)
    assert c.update_commit(2, set(live)) and c.commit == high
    c.flush(live, 2, 0.0, LIVE)
    assert c.keepers.hosts == frozenset({"H3"})  # H3 holds all that is committed: H2 may go
    assert announced(c) == {("H3",)}


def test_keepers_shrink_only_past_the_log_the_takeover_adopted() -> None:
    k = Keepers("H1", start_high=10)
    k.update(["H2"], lambda h: 10, master_high=10, commit=9, quorum=2)
    assert k.hosts is None  # 10 was committed in an older epoch: not covered yet
    k.update(["H2"], lambda h: 10, master_high=10, commit=10, quorum=2)
    assert k.hosts == {"H2"} and k.announce(["H1", "H2", "H3"]) == ("H2",)


@pytest.mark.parametrize("faults", [
    [Fault(at=35, hosts=("H2",), rounds=9), Fault(at=42, hosts=("H1",), rounds=19)],
    [Fault(at=33, hosts=("H2",), rounds=11), Fault(at=43, hosts=("H1",), rounds=18)],
])
def test_overlapping_host_restarts_leave_every_send_sequenced(faults: list[Fault]) -> None:
    net = Net(seed=235, loss=0.0, cfg=InfraConfig(**EXTENSIONS["all"]))  # type: ignore[arg-type]
    run_with_faults(net, faults)
    check_all(net)
    assert all(h.log.refused == 0 for h in net.hosts.values())
