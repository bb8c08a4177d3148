"""The ``group`` simulator stack with keyed groups (``[stack] key``): the hostile
network of test_sim_stack (loss, duplication, reordering, a partition, a crash and
restart, a leave and rejoin) still ends with every message delivered once, in
order; the stack checks its key parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from m2mc.errors import ConfigError
from m2mc.sim import load_scenario, run_scenario

from .test_sim_stack import scenario
from .tracecheck import check, load


@pytest.mark.parametrize("stack", [{"key": "hex:" + "5a" * 32},
                                   {"passphrase": "sim secret", "suite": "aes-256-gcm"}],
                         ids=["hmac-key", "aead-passphrase"])
def test_keyed_groups_end_clean_on_a_hostile_network(tmp_path: Path,
                                                     stack: dict[str, str]) -> None:
    spec = scenario()
    spec["stack"] = {"kind": "group", **stack}
    result = run_scenario(spec, 3, tmp_path)
    assert result.counters["crashes"] == 1 and result.counters["drops_loss"] > 0
    violations = check(load(tmp_path / "trace"))
    assert {k: v[:3] for k, v in violations.items() if v} == {}
    assert result.deliveries > 0


def test_key_parameters_are_checked() -> None:
    spec = scenario()
    for bad, word in (({"key": "hex:00"}, "key"), ({"key": 5}, "key"),
                      ({"key": "hex:" + "00" * 32, "passphrase": "x"}, "one of"),
                      ({"passphrase": "x", "suite": "rot13"}, "suite")):
        spec["stack"] = {"kind": "group", **bad}
        with pytest.raises(ConfigError, match=word):
            load_scenario(spec)
