"""A small checker for scenario tables: typed getters, and unknown keys are errors.

Every error is a :class:`~m2mc.errors.ConfigError` whose one-line message starts
with the dotted key it is about, e.g. ``domains.lan.loss: must be in [0, 1], got 1.5``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from m2mc.errors import ConfigError
from m2mc.kinds import DistKind
from m2mc.sim.dists import KINDS, Dist


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Table:
    """Read one TOML table; call :meth:`finish` to reject keys nobody asked for."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where or 'scenario'}: must be a table, got {_kind(data)}")
        self.data = data
        self.where = where
        self._seen: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def has(self, name: str) -> bool:
        return name in self.data

    def expect(self, *names: str) -> None:
        """Mark optional keys read conditionally as known (for the unknown-key message)."""
        self._seen.update(names)

    def raw(self, name: str, default: Any = None) -> Any:
        self._seen.add(name)
        return self.data.get(name, default)

    def fail(self, name: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.key(name)}: {problem}")

    def string(self, name: str, default: str | None = None, *,
               choices: Sequence[str] | None = None) -> str:
        value = self.raw(name, default)
        if value is None:
            raise self.fail(name, "missing (required)")
        if not isinstance(value, str):
            raise self.fail(name, f"must be a string, got {_kind(value)}")
        if choices is not None and value not in choices:
            raise self.fail(name, f"must be one of {', '.join(choices)}; got {value!r}")
        return value

    def opt_string(self, name: str) -> str | None:
        return self.string(name) if name in self.data else self.raw(name)

    def boolean(self, name: str, default: bool) -> bool:
        value = self.raw(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, got {_kind(value)}")
        return value

    def number(self, name: str, default: float | None = None, *, low: float | None = None,
               high: float | None = None, above: float | None = None) -> float:
        value = self.raw(name, default)
        if value is None:
            raise self.fail(name, "missing (required)")
        return check_number(value, self.key(name), low=low, high=high, above=above)

    def opt_number(self, name: str, *, low: float | None = None,
                   above: float | None = None) -> float | None:
        return self.number(name, low=low, above=above) if name in self.data else None

    def integer(self, name: str, default: int | None = None, *, low: int | None = None) -> int:
        value = self.raw(name, default)
        if value is None:
            raise self.fail(name, "missing (required)")
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(name, f"must be an integer, got {_kind(value)}")
        if low is not None and value < low:
            raise self.fail(name, f"must be >= {low}, got {value}")
        return value

    def probability(self, name: str, default: float | None = 0.0) -> float:
        """A number in [0, 1]; ``default=None`` makes the key required."""
        return self.number(name, default, low=0.0, high=1.0)

    def string_list(self, name: str, default: Sequence[str] | None = None) -> list[str]:
        value = self.raw(name, default)
        if value is None:
            raise self.fail(name, "missing (required)")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(name, f"must be a list of strings, got {_kind(value)}")
        return list(value)

    def table(self, name: str) -> Table:
        return Table(self.raw(name, {}), self.key(name))

    def tables(self, name: str) -> list[Table]:
        """An array of tables (``[[name]]``); absent means empty."""
        value = self.raw(name, [])
        if not isinstance(value, list):
            raise self.fail(name, f"must be an array of tables ([[{name}]]), got {_kind(value)}")
        return [Table(item, f"{self.key(name)}[{i}]") for i, item in enumerate(value)]

    def dist(self, name: str, default: Dist | None = None, *, low: float = 0.0) -> Dist:
        if name not in self.data and default is not None:
            self._seen.add(name)
            return default
        return parse_dist(self.raw(name), self.key(name), low=low)

    def finish(self) -> None:
        unknown = [k for k in self.data if k not in self._seen]
        if unknown:
            known = ", ".join(sorted(self._seen)) or "none"
            raise ConfigError(f"{self.key(str(unknown[0]))}: unknown key (known here: {known})")


def check_number(value: Any, where: str, *, low: float | None = None, high: float | None = None,
                 above: float | None = None) -> float:
    if not _is_number(value):
        raise ConfigError(f"{where}: must be a number, got {_kind(value)}")
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ConfigError(f"{where}: must be finite, got {value}")
    if low is not None and high is not None and not low <= number <= high:
        raise ConfigError(f"{where}: must be in [{_fmt(low)}, {_fmt(high)}], got {value}")
    if low is not None and number < low:
        raise ConfigError(f"{where}: must be >= {_fmt(low)}, got {value}")
    if above is not None and number <= above:
        raise ConfigError(f"{where}: must be > {_fmt(above)}, got {value}")
    return number


def number_or_range(value: Any, where: str) -> tuple[float, float]:
    """A number ``x`` (as ``(x, x)``) or a ``[low, high]`` range."""
    if isinstance(value, list):
        if len(value) != 2:
            raise ConfigError(f"{where}: a range is [low, high], got {len(value)} items")
        low = check_number(value[0], f"{where}[0]")
        high = check_number(value[1], f"{where}[1]")
        if high < low:
            raise ConfigError(f"{where}: range [{value[0]}, {value[1]}] has high < low")
        return low, high
    number = check_number(value, where)
    return number, number


def parse_dist(value: Any, where: str, *, low: float = 0.0) -> Dist:
    """A distribution: a number (constant) or ``{dist = "...", ...}``; draws must be >= low."""
    if _is_number(value):
        return Dist(DistKind.CONSTANT, check_number(value, where, low=low))
    table = Table(value, where)
    kind = DistKind(table.string("dist", choices=KINDS))
    if kind == DistKind.CONSTANT:
        dist = Dist(kind, table.number("value", low=low))
    elif kind == DistKind.UNIFORM:
        lo = table.number("low", low=low)
        hi = table.number("high", low=lo)
        dist = Dist(kind, lo, hi)
    elif kind == DistKind.EXPONENTIAL:
        dist = Dist(kind, table.number("mean", low=0.0), floor=table.number("min", 0.0, low=low))
    else:
        dist = Dist(kind, table.number("median", above=0.0), table.number("sigma", low=0.0),
                    floor=table.number("min", 0.0, low=low))
    table.finish()
    return dist


def _fmt(number: float) -> str:
    return str(int(number)) if number == int(number) else str(number)


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"string {value!r}"
    return f"{type(value).__name__} {value!r}"
