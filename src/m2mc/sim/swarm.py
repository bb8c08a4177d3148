"""Swarm mode: fault parameters drawn from the seed (TigerBeetle's VOPR is the model).

The scenario's ``[swarm]`` table maps a dotted path into the scenario to what to
draw there: ``[low, high]`` (uniform; integers if both ends are integers) or
``{choices = [...]}`` (one of them). Path segments may index arrays of tables:
``"faults.crash[0].at"``. Without a ``[swarm]`` table every unreliable domain
gets ``loss`` in [0, 0.3], ``duplicate`` in [0, 0.2] and ``reorder`` in
[0, 0.3]. The drawn values are written into a copy of the scenario, which is
then checked like any other, so a range that can produce a bad value fails.
"""

from __future__ import annotations

import copy
import itertools
import random
import re
from collections.abc import Mapping
from typing import Any

from m2mc.errors import ConfigError
from m2mc.sim.schema import check_number

DEFAULT_RANGES = {"loss": [0.0, 0.3], "duplicate": [0.0, 0.2], "reorder": [0.0, 0.3]}
_SEGMENT = re.compile(r"^([^\[\]]+)((?:\[\d+\])*)$")


def default_swarm(raw: Mapping[str, Any]) -> dict[str, Any]:
    ranges: dict[str, Any] = {}
    domains = raw.get("domains") or {"lan": {}}
    for name, table in domains.items():
        if isinstance(table, Mapping) and table.get("reliable"):
            continue
        for key, rng in DEFAULT_RANGES.items():
            if key == "loss" and isinstance(table, Mapping) and isinstance(table.get("loss"),
                                                                            Mapping):
                continue  # keep a configured burst-loss model
            if key == "reorder" and isinstance(table, Mapping) and table.get("fifo"):
                continue
            ranges[f"domains.{name}.{key}"] = rng
    return ranges


def check_swarm(swarm: Mapping[str, Any]) -> None:
    for path, spec in swarm.items():
        where = f"swarm.{path}"
        _split(path, where)
        if isinstance(spec, list):
            if len(spec) != 2:
                raise ConfigError(f"{where}: a range is [low, high]")
            low = check_number(spec[0], where)
            if check_number(spec[1], where) < low:
                raise ConfigError(f"{where}: high < low")
        elif isinstance(spec, Mapping):
            choices = spec.get("choices")
            if set(spec) != {"choices"} or not isinstance(choices, list) or not choices:
                raise ConfigError(f"{where}: must be [low, high] or {{choices = [...]}}")
        else:
            raise ConfigError(f"{where}: must be [low, high] or {{choices = [...]}}")


def draw(raw: Mapping[str, Any], swarm: Mapping[str, Any], rng: random.Random
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenario with drawn values written in, {path: drawn value}) in path order."""
    ranges = dict(swarm) if swarm else default_swarm(raw)
    check_swarm(ranges)
    out = copy.deepcopy(dict(raw))
    drawn: dict[str, Any] = {}
    for path in sorted(ranges):
        spec = ranges[path]
        value: Any
        if isinstance(spec, list):
            low, high = spec
            if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool):
                value = rng.randint(low, high)
            else:
                value = rng.uniform(float(low), float(high))
        else:
            value = copy.deepcopy(spec["choices"][rng.randrange(len(spec["choices"]))])
        _set(out, path, value)
        drawn[path] = value
    return out, drawn


def _split(path: str, where: str) -> list[str | int]:
    parts: list[str | int] = []
    for segment in path.split("."):
        match = _SEGMENT.match(segment)
        if not match:
            raise ConfigError(f"{where}: bad path segment {segment!r}")
        parts.append(match.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    return parts


def _set(root: dict[str, Any], path: str, value: Any) -> None:
    parts = _split(path, f"swarm.{path}")
    node: Any = root
    for part, nxt in itertools.pairwise(parts):
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise ConfigError(f"swarm.{path}: no item [{part}] in the scenario")
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise ConfigError(f"swarm.{path}: {part!r} is not inside a table")
            if part not in node:
                if isinstance(nxt, int):
                    raise ConfigError(f"swarm.{path}: no array {part!r} in the scenario")
                node[part] = {}
            node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise ConfigError(f"swarm.{path}: no item [{last}] in the scenario")
        node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ConfigError(f"swarm.{path}: {last!r} is not inside a table")
