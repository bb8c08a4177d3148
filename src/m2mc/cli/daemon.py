"""``m2mc daemon [--port P] [--channel URL]`` (docs/interfaces.md §3; seeds/002 section 3).

Serves the local processes that use ``daemon://127.0.0.1:P`` and connects them
to the external channel. Once listening it prints one line on stderr:
``m2mc daemon: listening on 127.0.0.1:P, external channel URL`` (``--port 0``
picks a free port), and with ``--metrics ADDR:PORT`` (or ``daemon.metrics``) a second:
``m2mc daemon: metrics on http://ADDR:PORT/metrics`` (Prometheus text format;
docs/operations.md). Stops cleanly on SIGINT or SIGTERM. ``--iface NAME`` puts
the external channel on that interface (:mod:`m2mc.cli.iface_option`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

from m2mc.cli.iface_option import add_iface_argument, config_on_iface
from m2mc.config import Config, add_config_argument, load_config
from m2mc.metrics import metrics_flag, parse_metrics_address, start_metrics
from m2mc.runtime.daemon import M2MPDaemon


def port_number(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "daemon", help="run the M2MP daemon serving local processes",
        description="The M2MP daemon: routes M2MP packets among local processes "
                    "(daemon://127.0.0.1:PORT) and the external channel.")
    parser.add_argument("--port", metavar="P", type=port_number,
                        help="TCP port on 127.0.0.1 (default: daemon.port, 5678; 0 = any free)")
    parser.add_argument("--channel", metavar="URL",
                        help="external channel URL (default: daemon.channel)")
    parser.add_argument("--metrics", metavar="ADDR:PORT", type=metrics_flag,
                        help="serve Prometheus metrics here, e.g. 127.0.0.1:9464 "
                             "(default: daemon.metrics; docs/operations.md)")
    parser.add_argument("--stats", action="store_true",
                        help="print the daemon's counters as one JSON line on exit")
    add_iface_argument(parser, "the external channel URL")
    add_config_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, overrides={
        "daemon.port": args.port, "daemon.channel": args.channel,
        "daemon.metrics": args.metrics})
    config = config_on_iface(config, "daemon", args.iface)
    return asyncio.run(serve(config, print_stats=args.stats))


async def serve(config: Config, *, print_stats: bool = False) -> int:
    settings = config.daemon
    if settings.metrics:
        parse_metrics_address(settings.metrics, "daemon.metrics")
    daemon = M2MPDaemon(settings.channel, port=settings.port,
                        max_clients=settings.max_clients,
                        max_client_buffer=settings.max_client_buffer,
                        max_external_backlog=settings.max_external_backlog,
                        node=config.node_id)
    await daemon.start()
    metrics = None
    if settings.metrics:
        try:
            from m2mc.metrics.daemon import daemon_snapshot

            metrics = start_metrics(settings.metrics,
                                    lambda: daemon_snapshot(daemon, config.node_id),
                                    config.node_id)
        except BaseException:
            await daemon.close()
            raise
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    print(f"m2mc daemon: listening on {daemon.host}:{daemon.port}, "
          f"external channel {daemon.external.url}", file=sys.stderr, flush=True)
    if metrics is not None:
        print(f"m2mc daemon: metrics on {metrics.url}", file=sys.stderr, flush=True)
    try:
        stopper = asyncio.ensure_future(stop.wait())
        server = asyncio.ensure_future(daemon.serve_forever())
        await asyncio.wait({stopper, server}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        server.cancel()
    finally:
        if metrics is not None:
            await metrics.aclose()
        await daemon.close()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    if print_stats:
        print(json.dumps(daemon.stats_dict()), flush=True)
    return 0
