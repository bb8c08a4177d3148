"""Prometheus metrics of a Node, an infrastructure host and the M2MP daemon.

``NodeConfig(metrics="127.0.0.1:9464")`` (or ``--metrics ADDR:PORT`` on ``m2mc
host``, ``m2mc daemon`` and ``m2mc chat``) serves the Prometheus text format with
the official ``prometheus-client`` (the ``metrics`` extra). The counters are the
ones the code keeps anyway (the stats dataclasses); a custom collector reads them
at scrape time, so exporting costs the message path nothing. docs/operations.md
lists every metric and the alarms worth setting.

Modules: :mod:`.catalogue` (every metric, and where each stats field goes),
:mod:`.sink` (one scrape's samples), :mod:`.labels` (the bound on group labels),
:mod:`.server` (registry, collector, HTTP server), :mod:`.adhoc`, :mod:`.infra`
and :mod:`.daemon` (what each kind of process exports), :mod:`.address`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from m2mc.errors import ConfigError
from m2mc.metrics.address import parse_metrics_address

if TYPE_CHECKING:
    from m2mc.metrics.server import MetricsServer, Snapshot

__all__ = ["metrics_flag", "parse_metrics_address", "start_metrics"]

INSTALL_HINT = "pip install 'm2mc[metrics]'"


def start_metrics(address: str, snapshot: Snapshot, node: str) -> MetricsServer:
    """Serve ``snapshot``'s samples on ``address``, read on the running event loop.
    :class:`ConfigError` for a bad address, a port in use, or prometheus_client missing."""
    parse_metrics_address(address)
    try:
        from m2mc.metrics.server import MetricsServer
    except ModuleNotFoundError as exc:
        raise ConfigError(f"metrics need the Python package {exc.name or 'prometheus_client'!r}"
                          f": {INSTALL_HINT}") from None
    return MetricsServer.start(address, asyncio.get_running_loop(), snapshot, node)


def metrics_flag(text: str) -> str:
    """argparse ``type=`` for ``--metrics ADDR:PORT``: checked at once (exit 2 if bad)."""
    import argparse

    try:
        parse_metrics_address(text, "address")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
