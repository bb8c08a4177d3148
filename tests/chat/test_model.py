"""The thread tree: the same conversation whatever order messages arrive in."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc_chat.model import ROOT, ChatMessage, ThreadTree, mid_key


def msg(mid: str, parent: str = ROOT, text: str = "", t: float = 0.0) -> ChatMessage:
    author = mid.rpartition(":")[0]
    return ChatMessage(mid=mid, parent=parent, author=author, nick=author.upper(),
                       text=text or f"text of {mid}", sent_at=t)


def seed_example() -> list[ChatMessage]:
    """seeds/000 Fig. 3-4: C asks two questions; A answers Chennai, B answers Delhi."""
    return [msg("C:1", text="Did you visit Delhi?", t=1),
            msg("C:2", text="Did you visit Chennai?", t=2),
            msg("A:1", "C:2", "No", t=3),
            msg("B:1", "C:1", "Yes", t=3)]


def shown(tree: ThreadTree) -> list[tuple[int, str]]:
    return [(depth, tree.get(mid).text if mid in tree else f"<missing {mid}>")  # type: ignore[union-attr]
            for depth, mid in tree.walk()]


def test_answers_hang_under_the_question_they_answer() -> None:
    tree = ThreadTree()
    for m in seed_example():
        tree.add(m)
    assert shown(tree) == [(0, "Did you visit Delhi?"), (1, "Yes"),
                           (0, "Did you visit Chennai?"), (1, "No")]


def test_reply_before_its_parent_waits_under_a_placeholder_then_moves() -> None:
    tree = ThreadTree()
    result = tree.add(msg("B:1", "C:1", "Yes", t=3))
    assert result.added and result.restructured
    assert tree.is_placeholder("C:1")
    assert shown(tree) == [(0, "<missing C:1>"), (1, "Yes")]
    assert len(tree) == 1
    result = tree.add(msg("C:1", text="Did you visit Delhi?", t=1))
    assert result.restructured
    assert not tree.is_placeholder("C:1")
    assert shown(tree) == [(0, "Did you visit Delhi?"), (1, "Yes")]


def test_placeholder_moves_under_its_own_parent_when_it_arrives() -> None:
    tree = ThreadTree()
    tree.add(msg("A:1", t=1))
    tree.add(msg("C:1", "B:1", t=3))      # grandchild first
    tree.add(msg("B:1", "A:1", t=2))      # then the missing middle
    assert [(d, m) for d, m in tree.walk()] == [(0, "A:1"), (1, "B:1"), (2, "C:1")]


def test_duplicate_is_ignored() -> None:
    tree = ThreadTree()
    assert tree.add(msg("A:1")).added
    assert not tree.add(msg("A:1", text="changed")).added
    assert tree.get("A:1").text == "text of A:1"  # type: ignore[union-attr]
    assert len(tree) == 1


def test_cycle_from_a_faulty_sender_is_broken_at_the_top() -> None:
    tree = ThreadTree()
    tree.add(msg("A:1", "B:1"))   # A:1 answers B:1 (placeholder)
    tree.add(msg("B:1", "A:1"))   # B:1 claims to answer A:1: a cycle
    assert tree.anomalies == 1
    assert [m for _, m in tree.walk()] == ["B:1", "A:1"]
    tree.add(msg("C:1", "C:1"))
    assert tree.anomalies == 2
    assert tree.parent_of("C:1") == ROOT


def test_siblings_in_sender_time_order_transcript_in_mid_order() -> None:
    tree = ThreadTree()
    tree.add(msg("b:10", t=1))
    tree.add(msg("b:9", t=2))
    tree.add(msg("a:1", t=3))
    assert tree.display_order() == ["b:10", "b:9", "a:1"]
    assert [n["mid"] for n in tree.transcript()] == ["a:1", "b:9", "b:10"]
    assert tree.nth(1) == "b:10"
    assert tree.sibling_index("a:1") == 2


def test_unread_marks_and_next_unread_wraps() -> None:
    tree = ThreadTree()
    for m in seed_example():
        tree.add(m, unread=m.author != "A")
    assert tree.unread_count == 3
    assert tree.next_unread() == "C:1"
    assert tree.next_unread("C:1") == "B:1"
    assert tree.next_unread("B:1") == "C:2"
    assert tree.next_unread("C:2") == "C:1"   # wraps
    assert tree.subtree_unread("C:1") == 1
    assert tree.mark_read("B:1")
    assert not tree.mark_read("B:1")
    assert tree.mark_all_read() == 2
    assert tree.next_unread() is None


def test_collapse_hides_the_subtree_on_screen_only() -> None:
    tree = ThreadTree()
    for m in seed_example():
        tree.add(m)
    tree.set_collapsed("C:1", True)
    assert [m for _, m in tree.walk(skip_collapsed=True)] == ["C:1", "C:2", "A:1"]
    assert len(tree.display_order()) == 4
    tree.collapse_all()
    assert tree.collapsed_mids() == {"C:1", "C:2"}
    tree.expand_all()
    assert not tree.collapsed_mids()


def test_mid_key_sorts_sequence_numbers_as_numbers() -> None:
    assert sorted(["p:10", "p:9", "o:100", "p:x"], key=mid_key) == ["o:100", "p:9", "p:10", "p:x"]


def test_a_very_deep_thread_walks_and_transcribes() -> None:
    tree = ThreadTree()
    parent = ROOT
    for i in range(1, 3001):
        tree.add(msg(f"a:{i}", parent, t=i))
        parent = f"a:{i}"
    assert tree.depth("a:3000") == 2999
    assert len(list(tree.walk())) == 3000
    node = tree.transcript()[0]
    for _ in range(2999):
        node = node["children"][0]
    assert node["mid"] == "a:3000"


@st.composite
def conversations(draw: st.DrawFn) -> list[ChatMessage]:
    n = draw(st.integers(min_value=1, max_value=25))
    pids = ["a", "b", "c"]
    seqs = dict.fromkeys(pids, 0)
    out: list[ChatMessage] = []
    for i in range(n):
        pid = draw(st.sampled_from(pids))
        seqs[pid] += 1
        parent = draw(st.sampled_from([ROOT, *(m.mid for m in out)])) if out else ROOT
        t = draw(st.integers(min_value=0, max_value=5))
        out.append(msg(f"{pid}:{seqs[pid]}", parent, text=f"m{i}", t=t))
    return out


@settings(max_examples=200, deadline=None)
@given(conversations(), st.randoms(use_true_random=False))
def test_any_arrival_order_gives_the_same_tree(messages: list[ChatMessage],
                                               rnd: random.Random) -> None:
    in_order = ThreadTree()
    for m in messages:
        in_order.add(m)
    shuffled = messages[:] + rnd.sample(messages, k=len(messages) // 2)  # with duplicates
    rnd.shuffle(shuffled)
    scrambled = ThreadTree()
    for m in shuffled:
        scrambled.add(m)
    assert scrambled.transcript() == in_order.transcript()
    assert list(scrambled.walk()) == list(in_order.walk())
    assert len(scrambled) == len(messages)
    assert not any(scrambled.is_placeholder(m.mid) for m in messages)
    walked = [mid for _, mid in scrambled.walk()]
    assert sorted(walked) == sorted(m.mid for m in messages)  # every node exactly once
