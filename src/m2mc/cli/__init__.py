"""The ``m2mc`` command (docs/interfaces.md §3).

Each subcommand lives in its own module exposing ``register(subparsers)``, which
adds a parser whose ``func`` default takes the parsed namespace and returns the
exit status. Exit status: 0 success; 1 the job ran and found a problem; 2 bad
usage or bad input, with a one-line error on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from m2mc import __version__
from m2mc.errors import ConfigError, UsageError

# Subcommand modules, in the order --help lists them. A module that cannot be
# imported (an optional extra missing) still gets a stub that says what to install.
SUBCOMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "m2mc.cli.demo", "the main job, end to end, on embedded defaults"),
    ("send", "m2mc.cli.send", "send stdin (or a file) as one M2MP message"),
    ("listen", "m2mc.cli.listen", "print one JSON line per M2MP message received"),
    ("daemon", "m2mc.cli.daemon", "run the M2MP daemon serving local processes"),
    ("sim", "m2mc.cli.sim", "run a deterministic simulation scenario"),
    ("analyze", "m2mc.cli.analyze", "verify and measure traces with the PySpark pipeline"),
    ("sweep", "m2mc.cli.sweep", "run a grid of simulations as Spark tasks"),
    ("chat", "m2mc.cli.chat", "the threaded chat client"),
    ("host", "m2mc.cli.host", "run an infrastructure-mode host"),
    ("bench", "m2mc.cli.bench", "measure throughput of the group layer"),
    ("wireshark", "m2mc.cli.wireshark", "install the Wireshark dissector for m2mc traffic"),
    ("key", "m2mc.cli.key", "make or check a key file (keyed groups, keyed deployments)"),
)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="m2mc",
        description="Many-to-many group communication: M2MP, M2MC groups, simulator, pipeline.",
    )
    parser.add_argument("--version", action="version", version=f"m2mc {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging on stderr (repeat for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name, module_name, summary in SUBCOMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(module_name):
                continue  # not built yet
            _missing_extra(sub, name, summary, exc.name or "?")
            continue
        module.register(sub)
    return parser


def _missing_extra(sub: argparse._SubParsersAction[OneLineParser], name: str, summary: str,
                   missing: str) -> None:
    p = sub.add_parser(name, help=f"{summary} (needs the missing package {missing!r})",
                       add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)

    def run(_: argparse.Namespace) -> int:
        print(f"m2mc {name}: error: needs the Python package {missing!r}; "
              "install it with: pip install 'm2mc[all]'", file=sys.stderr)
        return 2

    p.set_defaults(func=run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from m2mc.log import setup_logging

    setup_logging(args.verbose)
    try:
        return int(args.func(args))
    except (ConfigError, UsageError) as exc:
        print(f"m2mc {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
