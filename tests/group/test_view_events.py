"""``view`` trace events (docs/group.md section 4): a node's first view of a group (its
join) lists the members it knows; every later one says who came in and who went out,
and the group's size. Read in order, a node's views give its members at every change,
and no event names anyone whose membership did not change (the whole list at every
change made a group's start cost n events of n names at each of n members)."""

from __future__ import annotations

import json

from m2mc.trace.schema import TraceEvent

from .harness import Net


def replay(views: list[TraceEvent]) -> tuple[set[str], list[dict[str, object]]]:
    """The members a node's views add up to, and the details after the first."""
    first = json.loads(views[0].detail or "{}")
    members = set(first["members"])
    later = []
    for event in views[1:]:
        detail = json.loads(event.detail or "{}")
        joined, left = set(detail["joined"]), set(detail["left"])
        assert (joined or left) and joined.isdisjoint(members) and left <= members, detail
        members = (members | joined) - left
        assert detail["size"] == len(members)
        later.append(detail)
    return members, later


def test_views_say_what_changed_and_add_up_to_each_node_s_members() -> None:
    net = Net(seed=3)
    pids = ["a", "b", "c", "d", "e"]
    for pid in pids:
        net.add(pid)
    gid = str(net.do("a", lambda n: n.create_group("views", net.now)))
    net.run(0.5)
    for pid in pids[1:]:
        net.do(pid, lambda n: n.join_group(gid, net.now))
        net.run(0.3)
    net.run(3.0)
    net.do("e", lambda n: n.leave_group(gid, net.now))
    net.run(5.0)
    for pid in pids[:-1]:
        views = [e for e in net.trace.events if e.event == "view" and e.node == pid]
        assert json.loads(views[0].detail or "{}")["members"][0] in pids
        members, later = replay(views)
        assert members == set(net.nodes[pid].groups[gid].row.membership.current()) == {
            "a", "b", "c", "d"}
        # one change each: the others' joins (those it learnt of after its own) and e's leave
        assert all(len(d["joined"]) + len(d["left"]) == 1 for d in later)  # type: ignore[arg-type]
        assert later[-1] == {"joined": [], "left": ["e"], "size": 4}
