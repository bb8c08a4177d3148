"""A host's counters, and what it refused (docs/security.md, docs/operations.md)."""

from __future__ import annotations

from dataclasses import dataclass

from m2mc.infra.coordinator import CoordStats
from m2mc.infra.gateway import GatewayStats


@dataclass(slots=True)
class HostStats:
    decode_errors: int = 0
    elections_started: int = 0
    takeovers: int = 0
    queued_dropped: int = 0
    hosts_refused: int = 0  # statuses of new hosts while the directory was full
    bad_takeovers: int = 0  # answers whose logs did not apply (never from honest hosts)
    unknown_host: int = 0  # votes, acceptances and answers from hosts never admitted
    retired_refused: int = 0  # frames from hosts retired for good
    saves: int = 0  # commits of a durable host's promise and log (before frames left)


def security_stats(wire: dict[str, int], host: HostStats, gateway: GatewayStats,
                   records_refused: int, coordinator: CoordStats | None) -> dict[str, int]:
    """What a host refused, and why: frames (``wire``'s counters: checks, keys),
    rate limits, full tables, records that did not apply."""
    out = dict(wire)
    out.update(decode_errors=host.decode_errors, rate_limited=gateway.rate_limited,
               local_refused=gateway.local_refused, hosts_refused=host.hosts_refused,
               records_refused=records_refused, bad_takeovers=host.bad_takeovers,
               unknown_host=host.unknown_host, forward_refused=gateway.refused_full,
               queued_dropped=host.queued_dropped, retired_refused=host.retired_refused)
    if coordinator is not None:
        out.update(join_refused=coordinator.refused_full, early_dropped=coordinator.early_dropped)
    return out
