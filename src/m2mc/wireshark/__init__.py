"""The Wireshark dissector shipped with m2mc, and where it goes (docs/wireshark.md).

``m2mc.lua``, package data beside this module, decodes M2MP packets (reassembling
multi-packet messages), every group message kind, the authentication header of keyed
groups and deployments, and every infrastructure-mode frame (cell uplink and downlink,
backbone over TCP). :func:`install` copies it into the folder Wireshark reads a user's
Lua plugins from (:func:`personal_plugin_dir`); ``m2mc wireshark install`` is the
command.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from m2mc.errors import UsageError

__all__ = ["DISSECTOR_NAME", "dissector_path", "install", "personal_plugin_dir"]

DISSECTOR_NAME = "m2mc.lua"


def dissector_path() -> Path:
    """The dissector as installed with the package (for ``tshark -X lua_script:PATH``)."""
    return Path(__file__).with_name(DISSECTOR_NAME)


def personal_plugin_dir(env: Mapping[str, str] | None = None,
                        platform: str | None = None) -> Path:
    """Wireshark's personal Lua plugin folder (``tshark -G folders``: "Personal Lua
    Plugins"): ``%APPDATA%\\Wireshark\\plugins`` on Windows, else
    ``$HOME/.local/lib/wireshark/plugins`` (Linux and macOS alike)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if platform == "win32":
        appdata = env.get("APPDATA")
        if not appdata:
            raise UsageError("APPDATA is not set: cannot tell where Wireshark's plugins are")
        return Path(appdata) / "Wireshark" / "plugins"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "lib" / "wireshark" / "plugins"


def install(folder: Path | None = None) -> Path:
    """Copy the dissector into ``folder`` (default: :func:`personal_plugin_dir`),
    creating it; replaces an older copy in one step. Returns the file written.

    Raises :class:`UsageError` naming the path when it cannot be written.
    """
    folder = personal_plugin_dir() if folder is None else folder
    target = folder / DISSECTOR_NAME
    data = dissector_path().read_bytes()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".m2mc-", suffix=".lua", dir=folder)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        where = exc.filename or target
        raise UsageError(f"cannot write {where}: {exc.strerror or exc}") from None
    return target
