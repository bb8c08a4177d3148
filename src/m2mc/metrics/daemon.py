"""What the M2MP daemon (``m2mc daemon``) exports: datagrams routed between local
processes and the external channel, what was dropped and why, the external
channel's counters, and its two bounded queues (clients, external backlog).

Runs on the daemon's event loop at scrape time (:mod:`m2mc.metrics.server`).
"""

from __future__ import annotations

from m2mc import __version__
from m2mc.metrics import catalogue as cat
from m2mc.metrics.sink import Samples
from m2mc.runtime.daemon import M2MPDaemon


def daemon_snapshot(daemon: M2MPDaemon, node: str) -> Samples:
    s = Samples(node)
    s.add("m2mc_node_info", 1, mode="daemon", version=__version__)
    s.stats(cat.ROUTER, daemon.router.stats)
    s.stats(cat.DAEMON, daemon.stats)
    s.stats(cat.CHANNEL, daemon.external.stats)
    s.queue("clients", len(daemon.router.clients), daemon.router.max_clients)
    s.queue("external_backlog", daemon.external_backlog, daemon.max_external_backlog)
    return s
