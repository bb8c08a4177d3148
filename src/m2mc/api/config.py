"""How to run a node, :class:`NodeConfig` (split from :mod:`m2mc.api`, which
re-exports it), and what a key argument may be."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m2mc.group.config import GroupConfig
from m2mc.kinds import NodeMode
from m2mc.security.keys import GroupKey
from m2mc.transport.url import DEFAULT_CHANNEL_URL
from m2mc.wire.m2mp import M2MPConfig

__all__ = ["KeyArg", "NodeConfig"]

KeyArg = GroupKey | str | bytes | None  # a GroupKey, key text (hex/base64) or raw key bytes


@dataclass(slots=True)
class NodeConfig:
    """How to run a node. ``pid``: this process's identity (kept in ``data_dir``
    when there is one, else random). ``name``: a display name the other members see
    from our first packet on (at most 128 bytes of UTF-8; "" for none; the chat sets
    its nick). ``data_dir``: where the durable log lives
    (None keeps everything in memory; in infrastructure mode the member's saved
    state: docs/infra.md). ``trace_dir``: write docs/interfaces.md §4
    trace events there as ``<pid>.jsonl``."""

    pid: str | None = None
    name: str = ""
    channel: str = DEFAULT_CHANNEL_URL
    data_dir: str | Path | None = None
    trace_dir: str | Path | None = None
    run_id: str = ""
    trace_flush_every: int = 8192  # 1 writes each event at once (survives kill -9)
    trace_packets: bool = False  # also packet_in/packet_out rows, one per datagram
    group: GroupConfig = field(default_factory=GroupConfig)
    # M2MP under a group node sends each packet once: the group layer repairs what is
    # lost (NACK, docs/group.md section 7), as in the simulator (docs/decisions.md).
    m2mp: M2MPConfig = field(default_factory=lambda: M2MPConfig(redundancy=1))
    max_queued_messages: int = 100_000  # per group, others' messages delivered, not yet read
    # The node's own messages, handed back to the application too (seeds/000 III.B.4) unless
    # deliver_own is off. They never pause the node; unread, they take at most
    # max_queued_own_bytes per group (payload + 128 each), the oldest dropped past it.
    deliver_own: bool = True
    max_queued_own_bytes: int = 16 << 20
    max_queued_events: int = 10_000  # node events not yet read (oldest dropped past it)
    # Once per process, after the first node's start-up: gc.collect(), then gc.freeze(),
    # so the collector's full passes skip the ~24,000 objects start-up made (modules,
    # classes...), 7-15 ms each (m2mc.runtime.gc_freeze, docs/decisions.md).
    freeze_gc: bool = True
    # The collector's youngest generation collected every gc_threshold new objects
    # (CPython: 700) once a node has started; raised, never lowered; 0 leaves it
    # (m2mc.runtime.gc_freeze, docs/decisions.md).
    gc_threshold: int = 20_000
    # Keyed groups known at start (group id -> key source): a keyed group reloaded from
    # data_dir runs only with its key (else it waits for join(gid, key=...)).
    keys: Mapping[str, GroupKey] = field(default_factory=dict)
    # Infrastructure mode (docs/infra.md): mode="infra" attaches this process as a
    # member to the hosts whose cells (udp-multicast:// URLs) are listed in `hosts`.
    mode: str = NodeMode.ADHOC  # a NodeMode, or its string: "adhoc" | "infra"
    hosts: tuple[str, ...] = ()
    infra_cell: str | None = None  # the cell to start in (default: the first of hosts)
    infra: Any = None  # an m2mc.infra.config.InfraConfig (default settings if None)
    infra_key: Any = None  # deployment key (m2mc.infra_runtime.keying.DeploymentKey); None: none
    # Serve Prometheus metrics on this ADDR:PORT (docs/operations.md); None: none.
    metrics: str | None = None
