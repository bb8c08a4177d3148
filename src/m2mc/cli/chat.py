"""``m2mc chat``: the threaded chat (seeds/000 section II), as a TUI or a scripted participant.

Textual is imported only when the TUI starts, so ``m2mc --help`` and the
headless ``--script`` mode work without the ``chat`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m2mc.cli.iface_option import add_iface_argument, on_iface
from m2mc.errors import ConfigError, UsageError
from m2mc.metrics import metrics_flag

if TYPE_CHECKING:
    from m2mc.security.keys import GroupKey
    from m2mc_chat.backend import ChatBackend
    from m2mc_chat.config import ChatConfig

EPILOG = """\
examples:
  m2mc chat                               ad hoc mode on the default channel (loopback)
  m2mc chat --iface wlan0                 chat with the LAN behind wlan0 (ip link lists
                                          the names; everyone on the default group)
  m2mc chat --channel 'udp-multicast://239.255.77.77:7777?iface=eth0&ttl=1'
  m2mc chat --infra 239.255.20.1:7711,239.255.20.2:7712
                                          attach to infrastructure-mode hosts' cells
  m2mc chat --demo                        try the interface on a simulated group
  m2mc chat --key-file 'team=~/.m2mc/team.key'
                                          the key of the keyed group "team"
  m2mc chat --infra 239.255.20.1:7711 --key-file ~/.m2mc/site.key
                                          hosts started with that deployment key
  m2mc chat --nick bob --script steps.txt --transcript bob.json
                                          a scripted participant, no terminal (steps:
                                          create join send reply wait wait_for
                                          wait_members wait_group wait_file leave;
                                          see docs/chat.md)
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "chat", help="the threaded chat client",
        description="Threaded chat over M2MC groups: a terminal UI, or a scripted "
                    "participant without a terminal (--script).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nick", help="the name others see (default: from chat.toml, "
                                  "else asked on first run; an empty nick is refused)")
    p.add_argument("--device-id", help="this device's identity, the pid on every message "
                                       "(default: from chat.toml, else made up once)")
    p.add_argument("--channel", metavar="URL",
                   help="channel URL (default: udp-multicast://239.255.77.77:7777"
                        "?iface=127.0.0.1&ttl=1, loopback only; a LAN needs --iface or "
                        "iface=)")
    add_iface_argument(p, "the channel URL (or every --infra cell)",
                       "; a first run saves the channel so made, as it saves --channel")
    p.add_argument("--infra", metavar="HOSTS",
                   help="infrastructure mode: the hosts' cells, comma-separated GROUP:PORT "
                   "(loopback) or udp-multicast:// URLs")
    p.add_argument("--key-file", action="append", default=[], metavar="GROUP=FILE",
                   help="the key file (chmod 600) of a keyed group, GROUP being its "
                        "description or id; repeatable (also [keys] in chat.toml). With "
                        "--infra: --key-file FILE, the hosts' deployment key")
    p.add_argument("--key-passphrase", action="append", default=[],
                   metavar="GROUP=PASSPHRASE",
                   help="the passphrase of a keyed group; repeatable; never saved (other "
                        "users can see it in the process list: prefer --key-file, or type "
                        "it when joining from the group browser). With --infra: "
                        "--key-passphrase TEXT, the hosts' deployment passphrase")
    p.add_argument("--key-suite", metavar="SUITE",
                   help="suite of the keys given here and typed in: hmac-sha256 (default), "
                        "aes-256-gcm or chacha20-poly1305; every member must use the same")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="chat.toml and the durable message log "
                        "(default: $M2MC_DATA_DIR or ~/.local/share/m2mc)")
    p.add_argument("--script", type=Path, metavar="FILE",
                   help="run headless: steps from FILE (create/join/send/reply/wait/"
                        "wait_for/wait_members/wait_group/wait_file/leave), no terminal "
                        "needed")
    p.add_argument("--transcript", type=Path, metavar="OUT.json",
                   help="with --script: write the final thread tree(s) here")
    p.add_argument("--step-timeout", type=float, default=30.0, metavar="S",
                   help="with --script: how long join, wait_for, wait_members, "
                        "wait_group and wait_file may wait (default 30)")
    p.add_argument("--demo", action="store_true",
                   help="use a simulated group in this process instead of the network")
    p.add_argument("--trace-dir", type=Path, metavar="DIR",
                   help="write this participant's trace events (docs/interfaces.md §4) to "
                        "DIR/<device id>.jsonl, for 'm2mc analyze' (ad hoc mode)")
    p.add_argument("--run-id", default="", metavar="ID",
                   help="with --trace-dir: the trace's run column")
    p.add_argument("--metrics", metavar="ADDR:PORT", type=metrics_flag,
                   help="serve this participant's Prometheus metrics here, e.g. "
                        "127.0.0.1:9464 (docs/operations.md)")
    p.set_defaults(func=run)


def _hosts(text: str | None) -> tuple[str, ...]:
    from m2mc_chat.config import parse_infra

    return parse_infra(text) if text else ()


def _deployment_key(args: argparse.Namespace) -> GroupKey | None:
    """With ``--infra``: the hosts' deployment key (one group, so no ``GROUP=``), or None."""
    from m2mc.security.keys import DEFAULT_SUITE, GroupKey

    files, phrases = args.key_file, args.key_passphrase
    if len(files) + len(phrases) > 1:
        raise UsageError("with --infra, give one deployment key: --key-file FILE or "
                         "--key-passphrase TEXT (the hosts' --key-file/--passphrase)")
    if not files and not phrases:
        if args.key_suite:
            raise UsageError("--key-suite goes with --key-file or --key-passphrase")
        return None
    suite = args.key_suite or DEFAULT_SUITE
    if files:
        return GroupKey(key_file=files[0], suite=suite)
    return GroupKey(passphrase=phrases[0], suite=suite)


def make_backend(config: ChatConfig, *, demo: bool) -> ChatBackend:
    """The fake network for ``--demo``, else the real group layer."""
    if demo:
        from m2mc_chat.fake import FakeBackend, demo_network

        network, _ = demo_network()
        return FakeBackend(network, config.device_id, catch_up_batch=0)
    try:
        import m2mc_chat.backend_infra  # noqa: F401 (registers the --infra variant of M2MCBackend)
        from m2mc_chat.backend_m2mc import M2MCBackend
    except ImportError as exc:
        raise ConfigError(f"the group layer is not available ({exc}); "
                          "try 'm2mc chat --demo'") from None
    return M2MCBackend(config)


def run(args: argparse.Namespace) -> int:
    from m2mc_chat.config import CONFIG_NAME, load_config

    if args.transcript and not args.script:
        raise UsageError("--transcript goes with --script")
    if args.step_timeout <= 0:
        raise UsageError("--step-timeout must be > 0")
    infra = _hosts(args.infra)
    if infra and args.channel:
        raise UsageError("--infra and --channel exclude each other")
    if args.iface is not None and args.demo:
        raise UsageError("--iface is for the network, not --demo")
    if args.iface is not None and infra:
        infra = tuple(dict.fromkeys(on_iface(cell, args.iface, "an --infra cell")
                                    for cell in infra))
    # Every flag and every value of chat.toml is checked here: a mistake is one line
    # and exit status 2, before anything is saved or the terminal is taken over.
    if args.run_id and not args.trace_dir:
        raise UsageError("--run-id goes with --trace-dir")
    if args.trace_dir and infra:
        raise UsageError("--trace-dir is for ad hoc mode (the hosts keep no member traces)")
    infra_key = _deployment_key(args) if infra else None
    config = load_config(args.data_dir, nick=args.nick, device_id=args.device_id,
                         channel=args.channel, infra=infra,
                         key_files=[] if infra else args.key_file,
                         key_passphrases=[] if infra else args.key_passphrase,
                         key_suite=None if infra else args.key_suite)
    if infra_key is not None:
        config = replace(config, infra_key=infra_key)
    if args.iface is not None and not infra:  # the short form of --channel: remembered too
        from m2mc.transport.url import DEFAULT_CHANNEL_URL

        where = "--channel" if args.channel else "the channel of chat.toml" \
            if config.channel else "the default channel"
        config = replace(config, channel=on_iface(config.channel or DEFAULT_CHANNEL_URL,
                                                  args.iface, where))
    if args.trace_dir:
        config = replace(config, trace_dir=args.trace_dir, run_id=args.run_id)
    if args.metrics:
        if args.demo:
            raise UsageError("--metrics needs the network (not --demo)")
        config = replace(config, metrics=args.metrics)
    if args.demo:       # the simulated group's keyed group opens with its passphrase
        from m2mc_chat.fake import DEMO_KEYS

        config = replace(config, keys={**DEMO_KEYS, **config.keys})
    first_run = not (config.data_dir / CONFIG_NAME).exists()
    if args.script:
        if not config.nick:
            raise UsageError("--script needs a nick: --nick NAME or nick in chat.toml")
        return _run_headless(config, args, save=first_run)
    try:
        from m2mc_chat.app import ChatApp
    except ModuleNotFoundError as exc:
        missing = (exc.name or "textual").split(".")[0]
        raise ConfigError(f"the chat TUI needs the package {missing!r}: "
                          "pip install 'm2mc[chat]'") from None
    backend = make_backend(config, demo=args.demo)  # bad settings fail here, before the TUI
    # chat.toml is written once the network has started (a channel that cannot be
    # opened is not remembered).
    app = ChatApp(config, backend_factory=lambda _cfg: backend, save_config=first_run)
    app.run()
    if app.start_error:
        raise ConfigError(app.start_error)
    return app.return_code or 0


def _run_headless(config: ChatConfig, args: argparse.Namespace, *, save: bool) -> int:
    from m2mc_chat.config import save_config
    from m2mc_chat.script import run_script_file
    from m2mc_chat.session import ChatSession
    from m2mc_chat.state import UiStateStore

    assert config.nick is not None
    backend = make_backend(config, demo=args.demo)
    session = ChatSession(backend, config.nick,
                          ui_state=UiStateStore(config.data_dir / "chat_state.json"),
                          keys=config.keys, key_suite=config.key_suite)

    def log(line: str) -> None:
        if args.verbose:
            print(f"[{config.nick}] {line}", file=sys.stderr)

    def report(problem: str) -> None:
        print(f"m2mc chat: {config.nick}: {problem}", file=sys.stderr)

    def started() -> None:
        if save:
            save_config(config)

    return asyncio.run(run_script_file(session, args.script, args.transcript,
                                       step_timeout=args.step_timeout, log=log, report=report,
                                       on_started=started))
