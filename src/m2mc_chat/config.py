"""Who this chat participant is: nick, device identity, where its data lives.

Precedence: command-line flags, then ``<data-dir>/chat.toml``, then defaults.
The device identity (the pid the group layer stamps on every message) is made
up once, at random, and kept in the file so that a restarted chat is the same
process to its peers and finds its durable log again. The nick, when neither a
flag nor the file gives one, is asked for on first run and then saved.

``chat.toml``::

    nick = "alice"
    device_id = "d3c0ffee"
    channel = "udp-multicast://239.255.77.77:7777?iface=127.0.0.1&ttl=1"   # optional

    [keys]                        # keyed groups, by description or group id (optional)
    "team" = "~/.m2mc/team.key"   # a key file (chmod 600); or, with another suite:
    "d3c0ffee/2" = { key_file = "~/.m2mc/ops.key", suite = "aes-256-gcm" }

Passphrases are never kept in the file: give them with ``--key-passphrase`` or type
them when the chat asks (joining a keyed group from the browser).

Infrastructure mode (``--infra``) names the cells of the hosts (``m2mc host --cell``),
comma-separated, each either a ``udp-multicast://`` URL or just its multicast
``GROUP:PORT``, which means that group on loopback (``iface=127.0.0.1&ttl=1``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import secrets
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from m2mc.errors import ConfigError, UsageError
from m2mc.security.keys import DEFAULT_SUITE, GroupKey
from m2mc.transport.url import MulticastSpec, parse_channel_url
from m2mc_chat.codec import validate_nick

__all__ = ["CONFIG_NAME", "ChatConfig", "default_data_dir", "infra_cells", "load_config",
           "parse_infra", "save_config", "validate_device_id"]

CONFIG_NAME = "chat.toml"
_SETTINGS = frozenset({"nick", "device_id", "channel", "keys"})
_DEVICE_ID = re.compile(r"[A-Za-z0-9._-]{1,32}")


@dataclass(frozen=True, slots=True)
class ChatConfig:
    nick: str | None
    device_id: str
    data_dir: Path
    channel: str | None = None
    infra: tuple[str, ...] = ()
    """Infrastructure mode: the cells to attach to (see :func:`infra_cells`); empty: ad hoc."""
    trace_dir: Path | None = None
    """Write the node's trace events here (``--trace-dir``; never saved)."""
    run_id: str = ""
    keys: Mapping[str, GroupKey] = field(default_factory=dict)
    """Keys of keyed groups by description or gid: ``[keys]`` of the file, then flags."""
    file_keys: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """The file's ``[keys]`` as written (name -> (key_file, suite)), kept when saving."""
    key_suite: str = DEFAULT_SUITE
    """The suite of keys given by flags or typed in (``--key-suite``)."""
    infra_key: GroupKey | None = None
    """Infrastructure mode: the hosts' deployment key (``--key-file``/``--key-passphrase``
    with ``--infra``; never saved)."""
    metrics: str | None = None
    """Serve the node's Prometheus metrics on this ADDR:PORT (``--metrics``; never saved)."""

    @property
    def config_path(self) -> Path:
        return self.data_dir / CONFIG_NAME

    def with_nick(self, nick: str) -> ChatConfig:
        return replace(self, nick=validate_nick(nick))


def default_data_dir() -> Path:
    """``$M2MC_DATA_DIR``, else ``$XDG_DATA_HOME/m2mc``, else ``~/.local/share/m2mc``."""
    if env := os.environ.get("M2MC_DATA_DIR"):
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "m2mc"


def validate_device_id(device_id: str) -> str:
    if not _DEVICE_ID.fullmatch(device_id):
        raise UsageError(f"device id {device_id!r}: use 1-32 letters, digits, '.', '_' or '-'")
    return device_id


def load_config(data_dir: Path | None = None, *, nick: str | None = None,
                device_id: str | None = None, channel: str | None = None,
                infra: tuple[str, ...] = (), key_files: Sequence[str] = (),
                key_passphrases: Sequence[str] = (),
                key_suite: str | None = None) -> ChatConfig:
    """Merge flags over ``chat.toml``; a new device id is made up if neither has one.

    Every value is checked here, before anything is saved or started: a bad flag
    raises :class:`ConfigError` naming the flag (``--channel: ...``), a bad value in
    the file one naming the file (``.../chat.toml: channel: ...``). A flag given
    empty (``--nick ""``) is an error, not a fall-back to the file.
    """
    data_dir = data_dir or default_data_dir()
    path = data_dir / CONFIG_NAME
    stored: dict[str, object] = {}
    try:
        stored = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {_one_line(exc)}") from None
    unknown = sorted(set(stored) - _SETTINGS)
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r} "
                          f"(known: {', '.join(sorted(_SETTINGS))})")

    def pick(flag: str, given: str | None, key: str,
             check: Callable[[str], object]) -> str | None:
        """The flag if given (checked), else the file's value (checked), else None."""
        where, value = flag, given
        if value is None:
            where, value = f"{path}: {key}", _optional_str(stored, key, path)
            if value is None:
                return None
        try:
            check(value)
        except (UsageError, ConfigError) as exc:
            raise ConfigError(f"{where}: {_one_line(exc)}") from None
        return value.strip() if key == "nick" else value

    chosen_nick = pick("--nick", nick, "nick", validate_nick)
    chosen_device = pick("--device-id", device_id, "device_id", validate_device_id)
    chosen_channel = pick("--channel", channel, "channel", _check_channel)
    try:
        cells = infra_cells(infra)
    except UsageError as exc:
        raise ConfigError(str(exc)) from None
    suite = key_suite or DEFAULT_SUITE
    if key_suite is not None and not (key_files or key_passphrases):
        # also the suite of passphrases typed in the chat: only checked here
        _key("--key-suite", lambda: GroupKey(passphrase="-", suite=suite))
    file_keys = _file_keys(stored.get("keys"), path)
    keys = {name: GroupKey(key_file=Path(file).expanduser(), suite=file_suite)
            for name, (file, file_suite) in file_keys.items()}
    for flag, items in (("--key-file", key_files), ("--key-passphrase", key_passphrases)):
        for item in items:
            name, sep, value = item.partition("=")
            if not sep or not name.strip() or not value:
                raise ConfigError(f"{flag}: use GROUP=VALUE, GROUP being a group's "
                                  "description or id")

            def make(flag: str = flag, value: str = value) -> GroupKey:
                if flag == "--key-file":
                    return GroupKey(key_file=Path(value).expanduser(), suite=suite)
                return GroupKey(passphrase=value, suite=suite)

            keys[name.strip()] = _key(flag, make)
    return ChatConfig(nick=chosen_nick, device_id=chosen_device or secrets.token_hex(4),
                      data_dir=data_dir, channel=chosen_channel, infra=cells, keys=keys,
                      file_keys=file_keys, key_suite=suite)


def _key(where: str, make: Callable[[], GroupKey]) -> GroupKey:
    try:
        return make()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {_one_line(exc)}") from None


def _file_keys(table: object, path: Path) -> dict[str, tuple[str, str]]:
    """``[keys]`` of chat.toml: name -> (key_file, suite). Passphrases are refused."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: keys must be a table: [keys] NAME = \"KEY FILE\"")
    out: dict[str, tuple[str, str]] = {}
    for name, entry in table.items():
        where = f"{path}: keys.{name}"
        if isinstance(entry, str):
            entry = {"key_file": entry}
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: give a key file, or {{ key_file = ..., suite = ... }}")
        if "passphrase" in entry or "key" in entry:
            raise ConfigError(f"{where}: secrets are not kept in {CONFIG_NAME}; give a "
                              "key_file, or the passphrase with --key-passphrase or when "
                              "the chat asks")
        unknown = sorted(set(entry) - {"key_file", "suite"})
        file, suite = entry.get("key_file"), entry.get("suite", DEFAULT_SUITE)
        if unknown or not isinstance(file, str) or not file or not isinstance(suite, str):
            raise ConfigError(f"{where}: give key_file = \"PATH\" (and suite = \"...\")")
        checked = (file, suite)

        def make(entry: tuple[str, str] = checked) -> GroupKey:
            return GroupKey(key_file=Path(entry[0]).expanduser(), suite=entry[1])

        _key(where, make)
        out[str(name)] = checked
    return out


def _check_channel(url: str) -> None:
    if not url.strip():
        raise UsageError("the channel URL must not be empty")
    parse_channel_url(url)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def parse_infra(text: str) -> tuple[str, ...]:
    """``--infra`` as typed: comma-separated cells (see :func:`infra_cells`)."""
    return infra_cells(item for item in text.split(",") if item.strip())


def infra_cells(items: Iterable[str]) -> tuple[str, ...]:
    """Cells as ``udp-multicast://`` URLs; ``GROUP:PORT`` means that group on loopback.

    Raises :class:`UsageError` naming the first item that is neither; the result has
    no duplicates and keeps the given order (a member starts in the first cell).
    """
    out: list[str] = []
    for raw in items:
        item = raw.strip()
        url = item if "://" in item else _loopback_cell(item)
        try:
            spec = parse_channel_url(url)
        except ConfigError as exc:
            raise UsageError(f"--infra: {exc}") from None
        if not isinstance(spec, MulticastSpec):
            raise UsageError(f"--infra: {item!r} is not a udp-multicast:// cell")
        if url not in out:
            out.append(url)
    return tuple(out)


def _loopback_cell(item: str) -> str:
    group, sep, port = item.rpartition(":")
    try:
        multicast = ipaddress.IPv4Address(group).is_multicast
    except ValueError:
        multicast = False
    if not sep or not multicast or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--infra: {item!r} is not a cell: give the multicast GROUP:PORT of "
                         "an 'm2mc host --cell', or its udp-multicast:// URL")
    return f"udp-multicast://{group}:{int(port)}?iface=127.0.0.1&ttl=1"


def save_config(config: ChatConfig) -> Path:
    """Write nick, device id, channel and the file's key files to ``chat.toml`` (atomically).

    Keys given by flags and passphrases are never written."""
    lines = [f"device_id = {_toml_string(config.device_id)}"]
    if config.nick:
        lines.insert(0, f"nick = {_toml_string(config.nick)}")
    if config.channel:
        lines.append(f"channel = {_toml_string(config.channel)}")
    if config.file_keys:     # the file's own key files; never a flag's key or passphrase
        lines += ["", "[keys]"]
        for name, (file, suite) in config.file_keys.items():
            lines.append(f"{_toml_string(name)} = {{ key_file = {_toml_string(file)}, "
                         f"suite = {_toml_string(suite)} }}")
    config.data_dir.mkdir(parents=True, exist_ok=True)
    tmp = config.config_path.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, config.config_path)
    return config.config_path


def _toml_string(value: str) -> str:
    # JSON escapes quotes, backslashes and control characters the way TOML basic
    # strings do; other characters stay literal (ASCII escaping would emit surrogate
    # pairs, which TOML rejects). Nicks hold printable characters only.
    return json.dumps(value, ensure_ascii=False)


def _optional_str(stored: dict[str, object], key: str, path: Path) -> str | None:
    value = stored.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{path}: {key} must be a string")
    return value
