"""``m2mc key new FILE``: make a key file for a keyed group or a keyed deployment.

The file holds ``hex:`` and 64 hex digits (a fresh random 32-byte key) and is created
with mode 600, as ``--key-file`` requires. An existing file is never overwritten (exit
2). ``m2mc key check FILE`` reads one back as the other commands will and prints its
fingerprint (the first 8 bytes of SHA-256 of the key, safe to compare aloud), so two
machines can tell they hold the same key without showing it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path
from typing import Any

from m2mc.errors import ConfigError
from m2mc.security.keys import generate_key, key_from_file


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "key", help="make or check a key file (keyed groups, keyed deployments)",
        description="Key files for --key-file: `m2mc key new FILE` writes a fresh random "
                    "key (mode 600); `m2mc key check FILE` prints the fingerprint of the key "
                    "a file holds. Copy the file to every machine by a safe channel.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    new = sub.add_parser("new", help="write a fresh random key to FILE (never overwrites)")
    new.add_argument("file", type=Path, metavar="FILE")
    check = sub.add_parser("check", help="print the fingerprint of the key in FILE")
    check.add_argument("file", type=Path, metavar="FILE")
    p.set_defaults(func=run)


def fingerprint(key: bytes) -> str:
    digest = hashlib.sha256(key).hexdigest()[:16]
    return ":".join(digest[i:i + 4] for i in range(0, 16, 4))


def run(args: argparse.Namespace) -> int:
    path: Path = args.file.expanduser()
    if args.action == "new":
        text = generate_key()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise ConfigError(f"{path} exists; not overwriting a key (remove it first)") from None
        except OSError as exc:
            raise ConfigError(f"cannot create {path}: {exc.strerror or exc}") from None
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(text + "\n")
    key = key_from_file(path)
    print(f"{path}: {len(key)}-byte key, fingerprint {fingerprint(key)}")
    return 0
