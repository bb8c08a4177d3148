"""Synthetic message streams for tests, benchmarks and the simulator.

Every generator takes an injected :class:`random.Random` and returns messages
in *send* order; :func:`early_arrivals` turns that into an arrival order in
which a chosen fraction of messages arrive before their predecessor (their
S_b parent, their sender's previous message, or the previous gseq).
"""

from __future__ import annotations

import random

from m2mc.ordering.ids import ROOT, Message, MessageId

__all__ = [
    "causal_history",
    "early_arrivals",
    "fifo_stream",
    "parent_index",
    "previous_index",
    "reply_tree",
    "total_stream",
]


def _pids(senders: int) -> list[str]:
    return [f"p{i}" for i in range(senders)]


def reply_tree(rng: random.Random, n: int, *, senders: int = 16, root_prob: float = 0.2,
               window: int = 100) -> list[Message]:
    """Threaded-chat replies: each message answers one of the ``window`` messages
    sent just before it, or nothing (``ROOT``) with probability ``root_prob``."""
    pids = _pids(senders)
    seqs = [0] * senders
    out: list[Message] = []
    for i in range(n):
        s = rng.randrange(senders)
        seqs[s] += 1
        if i == 0 or rng.random() < root_prob:
            parent = ROOT
        else:
            parent = out[i - 1 - rng.randrange(min(window, i))].mid
        out.append(Message(MessageId(pids[s], seqs[s]), parent))
    return out


def causal_history(rng: random.Random, n: int, *, senders: int = 8,
                   lag: int = 20) -> list[Message]:
    """Causal broadcast: the sender of message ``i`` had delivered every message
    before ``i - lag`` (and its own); its vclock says so."""
    pids = _pids(senders)
    seqs = [0] * senders
    known = dict.fromkeys(pids, 0)  # counts among messages[: i - lag]
    senders_of: list[int] = []
    out: list[Message] = []
    for i in range(n):
        if i >= lag:
            known[pids[senders_of[i - lag]]] += 1
        s = rng.randrange(senders)
        senders_of.append(s)
        seqs[s] += 1
        vclock = dict(known)
        vclock[pids[s]] = seqs[s]
        out.append(Message(MessageId(pids[s], seqs[s]), vclock=vclock))
    return out


def fifo_stream(rng: random.Random, n: int, *, senders: int = 16) -> list[Message]:
    pids = _pids(senders)
    seqs = [0] * senders
    out: list[Message] = []
    for _ in range(n):
        s = rng.randrange(senders)
        seqs[s] += 1
        out.append(Message(MessageId(pids[s], seqs[s])))
    return out


def total_stream(rng: random.Random, n: int, *, senders: int = 16) -> list[Message]:
    """Messages already stamped with gseq ``1..n`` in send order."""
    pids = _pids(senders)
    seqs = [0] * senders
    out: list[Message] = []
    for i in range(n):
        s = rng.randrange(senders)
        seqs[s] += 1
        out.append(Message(MessageId(pids[s], seqs[s]), gseq=i + 1))
    return out


def parent_index(messages: list[Message]) -> list[int]:
    """For each message the index of its S_b parent in ``messages`` (-1: none there)."""
    where = {(m.mid.pid, m.mid.seq): i for i, m in enumerate(messages)}
    return [where.get((m.parent.pid, m.parent.seq), -1) for m in messages]


def previous_index(messages: list[Message]) -> list[int]:
    """For each message the index of its sender's previous message (-1: none)."""
    last: dict[str, int] = {}
    out: list[int] = []
    for i, m in enumerate(messages):
        out.append(last.get(m.mid.pid, -1))
        last[m.mid.pid] = i
    return out


def early_arrivals(messages: list[Message], predecessor: list[int], fraction: float,
                   rng: random.Random) -> list[Message]:
    """Arrival order: send order, except that ``fraction`` of all the messages
    (chosen among those with a predecessor, ``predecessor[i] >= 0``) arrive just
    before their predecessor."""
    eligible = [i for i, p in enumerate(predecessor) if p >= 0]
    chosen = sorted(rng.sample(eligible, min(len(eligible), round(fraction * len(messages)))))
    before: dict[int, list[int]] = {}
    early = [False] * len(messages)
    for i in chosen:
        early[i] = True
        before.setdefault(predecessor[i], []).append(i)
    out: list[Message] = []
    for i in range(len(messages)):
        if early[i]:
            continue  # emitted just before its predecessor
        stack = [i]
        while stack:
            v = stack.pop()
            if v < 0:
                out.append(messages[~v])
                continue
            stack.append(~v)
            firsts = before.get(v)
            if firsts:
                stack.extend(reversed(firsts))
    return out
