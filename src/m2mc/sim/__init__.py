"""The deterministic simulator: virtual time, a faulty network, the real protocol code.

>>> from m2mc.sim import run_scenario
>>> result = run_scenario("examples/scenarios/lossy-adhoc.toml", seed=1, out=Path("out"))

The same scenario and seed give byte-identical files under ``out``. See
docs/simulator.md for the scenario file reference.
"""

from m2mc.sim.node import (
    AddressedSimStack,
    GroupSpec,
    NodeContext,
    NodeFactory,
    Outgoing,
    SimNodeStack,
    register_stack,
)
from m2mc.sim.runner import RunResult, run_scenario
from m2mc.sim.scenario import Scenario, load_scenario

__all__ = ["AddressedSimStack", "GroupSpec", "NodeContext", "NodeFactory", "Outgoing",
           "RunResult", "Scenario", "SimNodeStack", "load_scenario", "register_stack",
           "run_scenario"]
