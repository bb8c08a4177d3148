"""Configuration: one :func:`load_config` returning frozen, validated settings.

Sources, lowest precedence first (docs/configuration.md documents every key):

1. built-in defaults;
2. the seed's ``m2mp.properties`` and ``device.properties`` (seeds/002 section 2),
   each looked up in the working directory, else the home directory;
3. a TOML file: the explicit path (``--config`` or ``M2MC_CONFIG``), else
   ``./m2mc.toml``, else ``$XDG_CONFIG_HOME/m2mc/config.toml``
   (``~/.config/m2mc/config.toml``);
4. environment variables ``M2MC_<SECTION>_<KEY>`` (``M2MC_M2MP_REDUNDANCY=1``);
5. command-line flags, passed as ``overrides={"m2mp.redundancy": 1}``.

Every fault raises :class:`ConfigError` with one line naming the source and key.
Other packages add their own TOML section with :func:`register_section`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m2mc.errors import ConfigError
from m2mc.transport.url import (
    DEFAULT_CHANNEL_URL,
    DEFAULT_DAEMON_PORT,
    DaemonSpec,
    parse_channel_url,
)
from m2mc.wire.m2mp import M2MPConfig

MAX_DEVICE_ID = 0x3FFF_FFFF_FFFF
TOML_NAME = "m2mc.toml"


def _key(default: Any, doc: str, *, low: float | None = None, high: float | None = None,
         positive: bool = False) -> Any:
    return field(default=default, metadata={"doc": doc, "low": low, "high": high,
                                            "positive": positive})


@dataclass(frozen=True, slots=True)
class M2MPSettings:
    """Section ``[m2mp]``: the M2MP layer of this process (seeds/002 sections 2, 5)."""

    channel: str = _key(DEFAULT_CHANNEL_URL,
                        "channel URL this process uses (docs/interfaces.md §2)")
    message_timeout: float = _key(5.0, "seconds to wait for a message's next fragment",
                                  positive=True)
    flow_timeout: float = _key(0.1, "seconds to wait for a packet's looped-back copy",
                               positive=True)
    redundancy: int = _key(2, "copies of every packet sent", low=1, high=100)
    flow_control: bool = _key(True, "wait for each packet's loopback (channels that loop back)")
    max_partial_messages: int = _key(1024, "partially reassembled messages kept", low=1)
    max_partial_bytes: int = _key(16 << 20, "bytes of partially reassembled messages", low=1)
    max_message_bytes: int = _key(64 << 20, "largest message accepted", low=1)
    completed_cache: int = _key(65536, "completed message IDs remembered to drop copies", low=1)
    own_id_cache: int = _key(65536, "own message IDs remembered to spot loopback", low=1)
    max_send_queue: int = _key(4096, "packets queued before send() waits", low=1)
    max_receive_queue: int = _key(1024, "messages queued for the application", low=1)
    max_inbound_datagrams: int = _key(8192, "datagrams queued between channel and layer", low=1)
    stream_window: int = _key(512, "early fragments a message read as a stream may hold",
                              low=1)
    max_streams: int = _key(32, "messages read as streams at once", low=1)
    max_stream_buffer: int = _key(4 << 20, "bytes of streamed messages not read yet", low=1)

    def layer_config(self) -> M2MPConfig:
        return M2MPConfig(
            message_timeout=self.message_timeout, flow_timeout=self.flow_timeout,
            redundancy=self.redundancy, flow_control=self.flow_control,
            max_partial_messages=self.max_partial_messages,
            max_partial_bytes=self.max_partial_bytes, max_message_bytes=self.max_message_bytes,
            completed_cache=self.completed_cache, own_id_cache=self.own_id_cache,
            stream_window=self.stream_window, max_streams=self.max_streams)


@dataclass(frozen=True, slots=True)
class DaemonSettings:
    """Section ``[daemon]``: the M2MP daemon (seeds/002 sections 1, 3)."""

    port: int = _key(DEFAULT_DAEMON_PORT, "TCP port on 127.0.0.1 (0: any free port)",
                     low=0, high=65535)
    channel: str = _key(DEFAULT_CHANNEL_URL, "the daemon's external channel URL")
    max_clients: int = _key(64, "local processes served at once", low=1)
    max_client_buffer: int = _key(1 << 20, "bytes unsent to one slow client before drops",
                                  low=1)
    max_external_backlog: int = _key(4096, "datagrams waiting for the external channel",
                                     low=1)
    metrics: str = _key("", "serve Prometheus metrics on this ADDR:PORT; empty: none")


@dataclass(frozen=True, slots=True)
class DeviceSettings:
    """Section ``[device]``: this device (seeds/002 section 2, ``device.properties``)."""

    id: str = _key("", "device ID, hex 000000000000..3FFFFFFFFFFF; random if unset")


@dataclass(frozen=True, slots=True)
class Config:
    m2mp: M2MPSettings
    daemon: DaemonSettings
    device: DeviceSettings
    sections: Mapping[str, Any]
    sources: tuple[str, ...]

    @property
    def node_id(self) -> str:
        """The device ID, the default node identity (12 upper-case hex digits)."""
        return self.device.id

    def section(self, name: str) -> Any:
        try:
            return self.sections[name]
        except KeyError:
            raise ConfigError(f"no configuration section [{name}]") from None

    def replace(self, section: str, **changes: Any) -> Config:
        """This configuration with keys of one section changed (values already checked)."""
        updated = dataclasses.replace(self.section(section), **changes)
        named = {section: updated} if section in ("m2mp", "daemon", "device") else {}
        return dataclasses.replace(self, sections={**self.sections, section: updated},
                                   **named)


_SECTIONS: dict[str, type[Any]] = {
    "m2mp": M2MPSettings, "daemon": DaemonSettings, "device": DeviceSettings,
}


def register_section(name: str, cls: type[Any]) -> None:
    """Add a TOML section ``[name]`` whose keys are the fields of the dataclass ``cls``."""
    if not dataclasses.is_dataclass(cls) or (name in _SECTIONS and _SECTIONS[name] is not cls):
        raise ValueError(f"cannot register section {name!r}")
    _SECTIONS[name] = cls


def sections() -> dict[str, type[Any]]:
    return dict(_SECTIONS)


# A layer of raw values: "section.key" -> (value, where it came from)
_Layer = dict[str, tuple[Any, str]]


def load_config(path: str | os.PathLike[str] | None = None, *,
                overrides: Mapping[str, Any] | None = None,
                env: Mapping[str, str] | None = None, cwd: Path | None = None,
                home: Path | None = None, rng: random.Random | None = None) -> Config:
    """Read every source, apply precedence, validate; see the module docstring."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    home = Path.home() if home is None else home
    values: _Layer = {}
    sources: list[str] = []
    _read_properties(values, sources, cwd, home)
    toml_path = _find_toml(path, env, cwd, home)
    if toml_path is not None:
        _read_toml(values, toml_path)
        sources.append(str(toml_path))
    _read_env(values, env)
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _check_key(dotted, "command line")
            values[dotted] = (value, "command line")
    built = {name: _build(name, cls, values) for name, cls in _SECTIONS.items()}
    device = built["device"]
    if not device.id:
        device = dataclasses.replace(
            device, id=f"{(rng or random.Random()).getrandbits(46):012X}")
        built["device"] = device
    return Config(m2mp=built["m2mp"], daemon=built["daemon"], device=device,
                  sections=built, sources=tuple(sources))


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="PATH", default=None,
                        help="TOML configuration file (default: ./m2mc.toml, then "
                             "~/.config/m2mc/config.toml; env M2MC_CONFIG)")


# ------------------------------------------------------------------ sources
def _find_toml(path: str | os.PathLike[str] | None, env: Mapping[str, str], cwd: Path,
               home: Path) -> Path | None:
    explicit = path if path is not None else env.get("M2MC_CONFIG") or None
    if explicit is not None:
        chosen = Path(explicit)
        if not chosen.is_absolute():
            chosen = cwd / chosen
        if not chosen.is_file():
            raise ConfigError(f"configuration file {explicit} not found")
        return chosen
    local = cwd / TOML_NAME
    if local.is_file():
        return local
    config_home = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    user = config_home / "m2mc" / "config.toml"
    return user if user.is_file() else None


def _read_toml(values: _Layer, path: Path) -> None:
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    for section, table in document.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{path}: unknown section [{section}]; known: "
                              f"{', '.join(sorted(_SECTIONS))}")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {section} must be a table [{section}]")
        for key, value in table.items():
            _check_key(f"{section}.{key}", str(path))
            values[f"{section}.{key}"] = (value, str(path))


def _read_env(values: _Layer, env: Mapping[str, str]) -> None:
    for name, text in env.items():
        if not name.startswith("M2MC_") or name == "M2MC_CONFIG":
            continue
        for section in _SECTIONS:
            prefix = f"M2MC_{section.upper()}_"
            if name.startswith(prefix):
                dotted = f"{section}.{name[len(prefix):].lower()}"
                _check_key(dotted, f"environment variable {name}")
                values[dotted] = (text, f"environment variable {name}")
                break


def _check_key(dotted: str, source: str) -> None:
    section, _, key = dotted.partition(".")
    cls = _SECTIONS.get(section)
    if cls is None or key not in {f.name for f in dataclasses.fields(cls)}:
        raise ConfigError(f"{source}: unknown configuration key {dotted}")


# The seed's property keys (seeds/002 section 2) that mean something here.
_CHANNEL_CLASSES = {
    "edu.rit.m2mp.udp.UDPMulticastChannel": DEFAULT_CHANNEL_URL,
    "edu.rit.m2mp.NullChannel": "null://",
}


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file as a dict (``key = value``, ``key: value``, ``#``/``!`` comments,
    backslash line continuations)."""
    try:
        text = path.read_text(encoding="latin-1")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    result: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            key, _, value = line.partition(" ")
        else:
            key, value = line[:cut], line[cut + 1:]
        result[key.strip()] = value.strip()
    return result


def _read_properties(values: _Layer, sources: list[str], cwd: Path, home: Path) -> None:
    for name in ("device.properties", "m2mp.properties"):
        path = next((d / name for d in (cwd, home) if (d / name).is_file()), None)
        if path is None:
            continue
        sources.append(str(path))
        _apply_properties(values, read_properties(path), str(path))


def _apply_properties(values: _Layer, props: Mapping[str, str], source: str) -> None:
    def milliseconds(key: str) -> float:
        text = props[key]
        if not text.isdigit() or int(text) <= 0:
            raise ConfigError(f"{source}: {key} must be a decimal integer > 0, got {text!r}")
        return int(text) / 1000.0

    if "edu.rit.device.id" in props:
        values["device.id"] = (props["edu.rit.device.id"], source)
    if "edu.rit.m2mp.messagetimeout" in props:
        values["m2mp.message_timeout"] = (milliseconds("edu.rit.m2mp.messagetimeout"), source)
    if "edu.rit.m2mp.flowtimeout" in props:
        values["m2mp.flow_timeout"] = (milliseconds("edu.rit.m2mp.flowtimeout"), source)
    if "edu.rit.m2mp.redundancy" in props:
        values["m2mp.redundancy"] = (props["edu.rit.m2mp.redundancy"], source)
    external: str | None = None
    if "edu.rit.m2mp.channel.class" in props:
        name = props["edu.rit.m2mp.channel.class"]
        external = _CHANNEL_CLASSES.get(name, name if "://" in name else None)
        if external is None:
            raise ConfigError(
                f"{source}: edu.rit.m2mp.channel.class {name} is not supported here; "
                f"use one of {', '.join(_CHANNEL_CLASSES)} or a channel URL")
        values["daemon.channel"] = (external, source)
    port = DEFAULT_DAEMON_PORT
    if "edu.rit.m2mp.daemon.port" in props:
        text = props["edu.rit.m2mp.daemon.port"]
        if not text.isdigit() or int(text) > 65535:
            raise ConfigError(f"{source}: edu.rit.m2mp.daemon.port must be 0..65535, "
                              f"got {text!r}")
        port = int(text)
        if port:
            values["daemon.port"] = (port, source)
            # A daemon port means: this process talks to the network through the daemon.
            values["m2mp.channel"] = (f"daemon://127.0.0.1:{port}", source)
    if external is not None and not port:
        values["m2mp.channel"] = (external, source)


# --------------------------------------------------------------- building
def _build(section: str, cls: type[Any], values: _Layer) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        dotted = f"{section}.{spec.name}"
        if dotted not in values:
            continue
        raw, source = values[dotted]
        kwargs[spec.name] = _coerce(raw, hints[spec.name], dotted, source)
        _check_range(kwargs[spec.name], spec.metadata, dotted, source)
        _check_special(kwargs[spec.name], dotted, source)
        if dotted == "device.id":
            kwargs[spec.name] = _device_id(kwargs[spec.name], source)
    return cls(**kwargs)


def _coerce(raw: Any, kind: Any, dotted: str, source: str) -> Any:
    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{source}: {dotted} must be {expected}, got {raw!r}")

    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(raw, str) and raw.strip().lower() in ("0", "false", "no", "off"):
            return False
        raise bad("true or false")
    if kind is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            try:
                return int(raw.strip(), 10)
            except ValueError:
                raise bad("an integer") from None
        raise bad("an integer")
    if kind is float:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw.strip())
            except ValueError:
                raise bad("a number") from None
        raise bad("a number")
    if kind is str:
        if isinstance(raw, str):
            return raw.strip()
        raise bad("a string")
    return raw  # sections registered by others may use richer types; they validate them


def _check_range(value: Any, meta: Mapping[str, Any], dotted: str, source: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if meta.get("positive") and value <= 0:
        raise ConfigError(f"{source}: {dotted} must be > 0, got {value}")
    low, high = meta.get("low"), meta.get("high")
    if low is not None and value < low:
        raise ConfigError(f"{source}: {dotted} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ConfigError(f"{source}: {dotted} must be <= {high}, got {value}")


def _check_special(value: Any, dotted: str, source: str) -> None:
    if dotted in ("m2mp.channel", "daemon.channel"):
        try:
            spec = parse_channel_url(value)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {dotted}: {exc}") from None
        if dotted == "daemon.channel" and isinstance(spec, DaemonSpec):
            raise ConfigError(f"{source}: daemon.channel cannot be a daemon:// URL")


def _device_id(text: str, source: str) -> str:
    try:
        number = int(text, 16)
    except ValueError:
        number = -1
    if not 0 <= number <= MAX_DEVICE_ID or not text or len(text) > 12:
        raise ConfigError(f"{source}: device id must be hex 000000000000..3FFFFFFFFFFF, "
                          f"got {text!r}")
    return f"{number:012X}"
