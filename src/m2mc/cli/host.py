"""``m2mc host``: run an infrastructure-mode host (docs/infra.md); ``m2mc host show``,
``retire`` and ``readmit``: an operator's commands to a live host.

A host is a gateway for its cell (a multicast group), a replica of the coordinator's
log and a voter; the elected master host is the coordinator. Addresses are any the
operator names (IPv4; IPv6 in brackets on the backbone); loopback is the default.

    m2mc host --id H1 --listen 10.77.0.1:7101 \\
        --peer 10.77.0.2:7101 --peer 10.77.0.3:7101 \\
        --cell "udp-multicast://239.255.20.1:7711?iface=10.77.0.1&ttl=1" \\
        --uplink 10.77.0.1:7201

    m2mc host show --via 10.77.0.2:7101 [--key-file K]      # one host's view (JSON)
    m2mc host retire --id H3 --via 10.77.0.2:7101 [--key-file K]
    m2mc host readmit --id H3 --via 10.77.0.2:7101 [--key-file K]

``retire`` removes a host for good through the replicated log: the hosts' quorum
shrinks at once, and the retired host is refused if it comes back (it stops, exit
status 2) until ``readmit``. Exit status: 0 done; 2 bad input (unknown host, already
retired, the last host, not retired); 1 the deployment could not do it now (no master,
another change under way, no answer): try again.

``--data-dir DIR`` keeps the host's promise, log and commit point in
``DIR/infra-host.sqlite3``, written before the host answers (docs/infra.md, "Durable
hosts"): restarted with the same directory it takes them up, so a crash or a power cut
of every host loses nothing. ``--sync normal`` writes without waiting for the disk
(safe against ``kill -9``, not against an operating system crash). Without a data
directory a host keeps everything in memory, and a restarted one takes part in
nothing until it has recovered the log from the others. A host whose log cannot be
written (a full or failing disk) stops with one line, exit status 1, having sent
nothing its disk does not hold.

``--iface NAME`` puts the cell on that interface (by name or address) and is where
the uplink binds unless ``--uplink`` says otherwise. By name, the uplink follows the
interface's address: bound again on the new one when it changes, and advertised at
once (a warning line says ``uplink now ADDR``; docs/infra.md "Addresses").

A deployment key (``--key-file FILE`` or ``--passphrase TEXT``, and ``--suite``)
seals every frame; members need the same key (``NodeConfig.infra_key``). Without
one the deployment is unauthenticated, and says so.

Every flag may come from ``--config FILE.toml`` instead: a ``[host]`` table (``id``,
``listen``, ``peers``, ``cell``, ``uplink``, ``trace_dir``, ``run_id``, ``key``,
``key_file``, ``passphrase``, ``suite``, ``metrics``) and an ``[infra]`` table of protocol
settings (any field of :class:`~m2mc.infra.config.InfraConfig`); flags win. Once up it prints
one line on stderr: ``m2mc host: H1 up, backbone 127.0.0.1:7101, cell URL, uplink
ADDR, authenticated (hmac-sha256)`` (or ``unauthenticated``), and with ``--metrics
ADDR:PORT`` a second: ``m2mc host: H1 metrics on http://ADDR:PORT/metrics``
(Prometheus text format; docs/operations.md).
Stops on SIGINT or SIGTERM (or after ``--run-for`` seconds), printing one last line:
``m2mc host: H1 stopped, counters {...}`` (frames opened and refused, and why).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import tomllib
from pathlib import Path
from typing import Any

from m2mc.cli.iface_option import add_iface_argument, on_iface
from m2mc.errors import ConfigError, UsageError
from m2mc.infra import messages as msg
from m2mc.infra import reconfig
from m2mc.infra.config import InfraConfig
from m2mc.infra_runtime.admin_client import AdminUnreachable, admin_request
from m2mc.infra_runtime.host_driver import HostDriver, settings_from_strings
from m2mc.infra_runtime.host_store import SYNC_MODES
from m2mc.infra_runtime.keying import DeploymentKey
from m2mc.infra_runtime.net import parse_address
from m2mc.metrics import metrics_flag, parse_metrics_address

_HOST_KEYS = ("id", "listen", "peers", "cell", "uplink", "trace_dir", "run_id", "key",
              "key_file", "passphrase", "suite", "metrics", "data_dir", "sync")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "host", help="run an infrastructure-mode host",
        description="An infrastructure-mode host: gateway of one cell, replica of the "
                    "coordinator's log, voter in elections, coordinator when elected.")
    p.add_argument("--id", help="host identity (default: the --listen address)")
    p.add_argument("--listen", metavar="ADDR",
                   help="backbone TCP address, IP:PORT (any IPv4 address, or [IPv6]:PORT)")
    p.add_argument("--peer", metavar="ADDR", action="append", default=None,
                   help="backbone address of another host (repeat; comma lists too)")
    p.add_argument("--cell", metavar="URL",
                   help="this host's cell: udp-multicast://239.255.X.Y:PORT?iface=IP&ttl=1")
    add_iface_argument(p, "the --cell URL", "; the uplink binds on its address unless "
                       "--uplink says otherwise, and by name follows it when it changes")
    p.add_argument("--uplink", metavar="ADDR",
                   help="UDP address members send to (default: the address of the cell's "
                        "interface, any port)")
    p.add_argument("--subscribe", action="store_true", default=None,
                   help="seeds/001 4.1: multicasts only to gateways with members")
    p.add_argument("--skip-membership", action="store_true", default=None,
                   help="seeds/001 4.3: cells relay only their own membership changes")
    p.add_argument("--data-dir", metavar="DIR",
                   help="keep the host's promise and log here, written before it answers; "
                        "a restart with the same DIR takes them up (default: memory only)")
    p.add_argument("--sync", choices=SYNC_MODES[:2], default=None,
                   help="with --data-dir: full (default) waits for the disk at each write, "
                        "surviving a power cut; normal survives a crash of the process only")
    p.add_argument("--trace-dir", metavar="DIR", help="write trace events (elect) here")
    p.add_argument("--run-id", default=None, help="the trace's run column")
    p.add_argument("--run-for", metavar="S", type=float, default=None,
                   help="stop after S seconds (default: until SIGINT/SIGTERM)")
    p.add_argument("--key-file", metavar="FILE",
                   help="deployment key file (chmod 600): seal and check every frame")
    p.add_argument("--passphrase", metavar="TEXT",
                   help="derive the deployment key from a passphrase (visible in ps: "
                        "prefer --key-file or the config file)")
    p.add_argument("--suite", choices=("hmac-sha256", "aes-256-gcm", "chacha20-poly1305"),
                   default=None, help="with a key: tag only (default) or encrypt too")
    p.add_argument("--metrics", metavar="ADDR:PORT", type=metrics_flag,
                   help="serve Prometheus metrics here, e.g. 127.0.0.1:9464 "
                        "(docs/operations.md)")
    p.add_argument("--config", metavar="FILE", help="TOML file with [host] and [infra] tables")
    p.set_defaults(func=run)
    ops = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    for name, summary in (("show", "print a live host's view of the deployment (JSON)"),
                          ("retire", "retire a host for good (the quorum shrinks at once)"),
                          ("readmit", "admit a retired host again")):
        q = ops.add_parser(name, help=summary, description=summary)
        if name != "show":
            q.add_argument("--id", dest="target", metavar="HOST", required=True,
                           help="the host to " + name)
        q.add_argument("--via", metavar="ADDR",
                       help="backbone address of any live host (default: --config's listen)")
        q.add_argument("--key-file", metavar="FILE", help="the deployment key file")
        q.add_argument("--passphrase", metavar="TEXT", help="the deployment passphrase")
        q.add_argument("--suite", choices=("hmac-sha256", "aes-256-gcm", "chacha20-poly1305"),
                       default=None, help="with a key: the deployment's suite")
        q.add_argument("--config", metavar="FILE",
                       help="a host's TOML file: its listen address and key are used")
        q.add_argument("--timeout", metavar="S", type=float, default=15.0,
                       help="give up after S seconds without an answer (default 15)")
        q.set_defaults(func=run_admin, subscribe=None, skip_membership=None)


def _load(path: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    if path is None:
        return {}, {}
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"--config {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config {path}: {exc}") from None
    host = data.get("host", {})
    infra = data.get("infra", {})
    if not isinstance(host, dict) or not isinstance(infra, dict):
        raise ConfigError(f"--config {path}: [host] and [infra] must be tables")
    unknown = sorted(set(host) - set(_HOST_KEYS))
    if unknown:
        raise ConfigError(f"host.{unknown[0]}: unknown key (known: {', '.join(_HOST_KEYS)})")
    unknown_top = sorted(set(data) - {"host", "infra"})
    if unknown_top:
        raise ConfigError(f"{unknown_top[0]}: unknown table in {path}")
    return host, infra


def run(args: argparse.Namespace) -> int:
    host, infra = _load(args.config)
    if args.subscribe:
        infra["subscribe"] = True
    if args.skip_membership:
        infra["skip_membership"] = True
    config = InfraConfig().with_overrides(infra)
    listen = args.listen or host.get("listen")
    cell = args.cell or host.get("cell")
    if not listen:
        raise UsageError("--listen is required (the backbone address, 127.0.0.1:PORT)")
    if not cell:
        raise UsageError("--cell is required (the cell's udp-multicast:// URL)")
    cell = on_iface(str(cell), args.iface, "--cell")
    peers_raw = args.peer if args.peer is not None else host.get("peers", [])
    if isinstance(peers_raw, str):
        peers_raw = [peers_raw]
    peers = [p.strip() for item in peers_raw for p in str(item).split(",") if p.strip()]
    settings = settings_from_strings(args.id or host.get("id"), str(listen), str(cell),
                                     args.uplink or host.get("uplink"), peers, config,
                                     args.trace_dir or host.get("trace_dir"),
                                     args.run_id if args.run_id is not None
                                     else str(host.get("run_id", "")),
                                     key=_key(args, host))
    settings.metrics = _metrics(args, host)
    settings.data_dir, settings.sync = _durability(args, host)
    return asyncio.run(_serve(HostDriver(settings), args.run_for))


def _durability(args: argparse.Namespace, host: dict[str, Any]) -> tuple[str | None, str]:
    """``--data-dir`` and ``--sync`` (else the [host] table's ``data_dir``, ``sync``)."""
    data_dir = args.data_dir if args.data_dir is not None else host.get("data_dir")
    sync = args.sync if args.sync is not None else host.get("sync", "full")
    if data_dir is not None and not isinstance(data_dir, str):
        raise ConfigError("host.data_dir: expected a string (a directory)")
    if sync not in SYNC_MODES[:2]:
        raise ConfigError(f"host.sync: expected 'full' or 'normal', got {sync!r}")
    if data_dir is None and (args.sync is not None or "sync" in host):
        raise UsageError("--sync needs --data-dir")
    return data_dir, str(sync)


def _key(args: argparse.Namespace, host: dict[str, Any]) -> DeploymentKey | None:
    """The deployment key source: flags, else the [host] table; None: unauthenticated."""
    if args.key_file is not None or args.passphrase is not None:
        if args.key_file is not None and args.passphrase is not None:
            raise UsageError("give --key-file or --passphrase, not both")
        return DeploymentKey(key_file=args.key_file, passphrase=args.passphrase,
                             suite=args.suite or str(host.get("suite", "hmac-sha256")))
    sources = {k: host[k] for k in ("key", "key_file", "passphrase") if k in host}
    if not sources:
        if args.suite is not None or "suite" in host:
            raise UsageError("--suite needs a key (--key-file or --passphrase)")
        return None
    for name, value in sources.items():
        if not isinstance(value, str):
            raise ConfigError(f"host.{name}: expected a string")
    return DeploymentKey(**sources, suite=args.suite or str(host.get("suite", "hmac-sha256")))


_OPS = {"show": msg.OP_SHOW, "retire": msg.OP_RETIRE, "readmit": msg.OP_READMIT}


def run_admin(args: argparse.Namespace) -> int:
    """``m2mc host show|retire|readmit``: one request to a live host."""
    host, _ = _load(args.config)
    via_text = args.via or host.get("listen")
    if not via_text:
        raise UsageError("--via is required (the backbone address of a live host), or "
                         "--config with the listen address of one")
    via = parse_address(str(via_text), "--via")
    op = _OPS[args.action]
    target = getattr(args, "target", "") or ""
    prog = f"m2mc host {args.action}"
    try:
        view, result = asyncio.run(admin_request(via, op, target, _key(args, host),
                                                 args.timeout))
    except AdminUnreachable as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    if op == msg.OP_SHOW:
        print(view.text)
        return 0
    if result.code == reconfig.OK:
        done = "retired" if op == msg.OP_RETIRE else "readmitted"
        print(f"{prog}: {target} {done}: {result.text}")
        return 0
    print(f"{prog}: error: {result.text}", file=sys.stderr)
    return 2 if result.code in reconfig.BAD_INPUT else 1


def _metrics(args: argparse.Namespace, host: dict[str, Any]) -> str | None:
    """``--metrics``, else ``metrics`` of the [host] table; None: no metrics."""
    if args.metrics is not None:
        return str(args.metrics)
    value = host.get("metrics")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError("host.metrics: expected a string ADDR:PORT")
    parse_metrics_address(value, "host.metrics")
    return value


async def _serve(driver: HostDriver, run_for: float | None) -> int:
    await driver.start()
    s = driver.s
    assert driver.core is not None
    auth = driver.core.wire.auth
    keyed = f"authenticated ({auth.suite.name.lower().replace('_', '-')})" if auth else \
        "unauthenticated"
    print(f"m2mc host: {s.host_id} up, backbone {s.listen[0]}:{s.listen[1]}, cell {s.cell}, "
          f"uplink {driver.core.ident.uplink}, {keyed}", file=sys.stderr, flush=True)
    if driver.metrics is not None:
        print(f"m2mc host: {s.host_id} metrics on {driver.metrics.url}", file=sys.stderr,
              flush=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    retired = asyncio.ensure_future(driver.retired.wait())
    stopped = asyncio.ensure_future(stop.wait())
    failed = asyncio.ensure_future(driver.failed.wait())
    try:
        await asyncio.wait({retired, stopped, failed}, timeout=run_for,
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        retired.cancel()
        stopped.cancel()
        failed.cancel()
        await driver.close()
        counters = {k: v for k, v in driver.stats().items() if v}
        print(f"m2mc host: {s.host_id} stopped, counters {json.dumps(counters, sort_keys=True)}",
              file=sys.stderr, flush=True)
    failure = driver.driver.failure if driver.driver is not None else None
    if failure is not None:
        print(f"m2mc host: error: {s.host_id} stopped: its log could not be written "
              f"({failure}); nothing it had not saved left it", file=sys.stderr, flush=True)
        return 1
    if driver.retired.is_set():
        assert driver.core is not None
        print(f"m2mc host: error: {s.host_id} is retired from this deployment "
              f"({driver.core.retired_self}); readmit it first: m2mc host readmit --id "
              f"{s.host_id} --via ADDR", file=sys.stderr, flush=True)
        return 2
    return 0
