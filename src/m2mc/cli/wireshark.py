"""``m2mc wireshark``: the Wireshark dissector shipped with m2mc (docs/wireshark.md).

``m2mc wireshark install`` copies it into Wireshark's personal Lua plugin folder
(``--print``: only say where; ``--dir DIR``: another folder); ``m2mc wireshark path``
prints where the packaged script is, for ``tshark -X lua_script:PATH``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from m2mc.wireshark import DISSECTOR_NAME, dissector_path, install, personal_plugin_dir

_DESCRIPTION = (
    "The Wireshark dissector for m2mc: M2MP packets (multi-packet messages reassembled), "
    "every group message kind, the authentication header of keyed groups and deployments "
    "(bodies under an AEAD suite show as encrypted), and infrastructure-mode frames "
    "(cell uplink and downlink over UDP, the backbone over TCP). Group messages and "
    "infrastructure frames are found on any port; plain M2MP messages on the UDP ports of "
    "the preference m2mp.udp_ports (default 7777). See docs/wireshark.md.")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "wireshark", help="install the Wireshark dissector for m2mc traffic",
        description=_DESCRIPTION)
    sub = parser.add_subparsers(dest="wireshark_command", metavar="ACTION",
                                parser_class=type(parser))
    inst = sub.add_parser(
        "install", help=f"copy {DISSECTOR_NAME} into Wireshark's personal Lua plugin folder",
        description=f"Copy {DISSECTOR_NAME} into Wireshark's personal Lua plugin folder "
                    "(~/.local/lib/wireshark/plugins on Linux and macOS, "
                    "%APPDATA%\\Wireshark\\plugins on Windows), creating it; Wireshark "
                    "and tshark load it at their next start. Prints the file written.")
    inst.add_argument("--print", dest="print_only", action="store_true",
                      help="print the file the dissector would be installed as; change nothing")
    inst.add_argument("--dir", metavar="DIR",
                      help="install into DIR instead (e.g. the global plugin folder of "
                           "'tshark -G folders')")
    inst.set_defaults(func=run_install)
    path = sub.add_parser(
        "path", help="print where the packaged dissector is (for tshark -X lua_script:PATH)",
        description="Print the path of the dissector shipped in the package, to load it "
                    "once without installing: tshark -X lua_script:PATH -r CAPTURE")
    path.set_defaults(func=run_path)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def run_install(args: argparse.Namespace) -> int:
    folder = Path(args.dir).expanduser() if args.dir else personal_plugin_dir()
    if args.print_only:
        print(folder / DISSECTOR_NAME)
        return 0
    print(install(folder))
    return 0


def run_path(args: argparse.Namespace) -> int:
    print(dissector_path())
    return 0
