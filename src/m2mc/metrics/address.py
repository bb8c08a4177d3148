"""``ADDR:PORT`` of a metrics endpoint: any address or host name the user names
(``127.0.0.1:9464``, ``0.0.0.0:9464`` for every interface, ``[::1]:9464``,
``monitor.example:9464``); port 0 lets the OS pick one. Checked without importing
prometheus_client, so a bad flag is refused before anything starts."""

from __future__ import annotations

from m2mc.errors import ConfigError

EXAMPLE = "127.0.0.1:9464"


def parse_metrics_address(text: str, what: str = "metrics address") -> tuple[str, int]:
    """``(host, port)``; :class:`ConfigError` with one line naming ``what`` otherwise."""
    raw = text.strip()
    if raw.startswith("["):
        host, bracket, rest = raw[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise ConfigError(f"{what} {text!r}: expected [IPV6]:PORT, e.g. [::1]:9464")
        port_text = rest[1:]
    else:
        host, colon, port_text = raw.rpartition(":")
        if not colon:
            raise ConfigError(f"{what} {text!r}: expected ADDR:PORT, e.g. {EXAMPLE}")
        if ":" in host:
            raise ConfigError(f"{what} {text!r}: an IPv6 address goes in brackets, "
                              "e.g. [::1]:9464")
    if not host or any(c.isspace() for c in host):
        raise ConfigError(f"{what} {text!r}: name an address (0.0.0.0 for every interface), "
                          f"e.g. {EXAMPLE}")
    if not (port_text.isascii() and port_text.isdigit()) or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"{what} {text!r}: the port must be 0..65535")
    return host, int(port_text)


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
