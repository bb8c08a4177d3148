"""Swarm draws, random streams, distributions and mobility: the deterministic pieces."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.sim.dists import Dist
from m2mc.sim.mobility import Mover, covering_cell, nearest_cell
from m2mc.sim.rng import RngStreams
from m2mc.sim.scenario import CellSpec, Mobility
from m2mc.sim.swarm import default_swarm, draw

RAW = {"domains": {"lan": {"loss": 0.1}, "wired": {"reliable": True}},
       "faults": {"crash": [{"node": "n1", "at": 5.0}]}}


def test_swarm_draws_are_in_range_typed_and_reproducible() -> None:
    swarm = {"domains.lan.loss": [0.0, 0.3], "faults.crash[0].at": [1, 9],
             "domains.lan.delay": {"choices": [0.001, {"dist": "uniform", "low": 0.0,
                                                        "high": 0.01}]}}
    out1, drawn1 = draw(RAW, swarm, RngStreams(5).get("swarm"))
    out2, drawn2 = draw(RAW, swarm, RngStreams(5).get("swarm"))
    assert drawn1 == drawn2 and out1 == out2
    assert 0.0 <= drawn1["domains.lan.loss"] <= 0.3
    assert isinstance(drawn1["faults.crash[0].at"], int) and 1 <= drawn1["faults.crash[0].at"] <= 9
    assert out1["domains"]["lan"]["loss"] == drawn1["domains.lan.loss"]
    assert RAW["domains"]["lan"]["loss"] == 0.1  # the input is not modified
    others = {repr(draw(RAW, swarm, RngStreams(s).get("swarm"))[1]) for s in range(20)}
    assert len(others) > 10


def test_default_swarm_skips_reliable_domains() -> None:
    assert set(default_swarm(RAW)) == {"domains.lan.loss", "domains.lan.duplicate",
                                       "domains.lan.reorder"}


@pytest.mark.parametrize(("swarm", "message"), [
    ({"faults.crash[3].at": [1, 2]}, r"no item \[3\]"),
    ({"faults.partition[0].at": [1, 2]}, "no array 'partition'"),
    ({"domains..loss": [0, 1]}, "bad path segment"),
])
def test_swarm_bad_paths_are_named(swarm: dict[str, list[int]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        draw(RAW, swarm, random.Random(1))


def test_streams_are_independent_and_stable() -> None:
    a, b = RngStreams(1), RngStreams(1)
    a.get("network").random()  # drawing from one stream ...
    assert a.get("workload").random() == b.get("workload").random()  # ... leaves others alone
    assert RngStreams(1).get("x").random() != RngStreams(2).get("x").random()
    assert a.fresh("y").random() == b.get("y").random()


@given(st.sampled_from([Dist("uniform", 1.0, 2.0), Dist("exponential", 0.5, floor=0.1),
                        Dist("lognormal", 0.01, 0.7, floor=0.002), Dist("constant", 0.3)]),
       st.integers(0, 2**32))
def test_distribution_draws_respect_their_floor(dist: Dist, seed: int) -> None:
    sample = dist.sampler(random.Random(seed))
    low = dist.a if dist.kind in ("uniform", "constant") else dist.floor
    assert all(sample() >= low for _ in range(50))


CELLS = (CellSpec("a", 0.0, 0.0, 10.0), CellSpec("b", 15.0, 0.0, 10.0))


def test_overlapping_cells_pick_the_nearest_centre_and_gaps_have_none() -> None:
    assert covering_cell(CELLS, 6.0, 0.0) is CELLS[0]  # in both: a is nearer
    assert covering_cell(CELLS, 9.0, 0.0) is CELLS[1]
    assert covering_cell(CELLS, 0.0, 20.0) is None
    assert nearest_cell(CELLS, 30.0, 0.0) is CELLS[1]


def test_waypoints_interpolate_and_hold() -> None:
    m = Mover(Mobility("waypoints", ((0, 0, 0), (10, 10, 0), (20, 10, 10))), (0, 0),
              (0, 0, 100, 100), random.Random(1))
    assert m.position(5.0) == (5.0, 0.0)
    assert m.position(15.0) == (10.0, 5.0)
    assert m.position(99.0) == (10.0, 10.0)


@given(st.integers(0, 2**32))
def test_random_waypoint_stays_in_the_area_and_moves(seed: int) -> None:
    area = (0.0, 0.0, 50.0, 20.0)
    m = Mover(Mobility("random_waypoint", speed=(1.0, 5.0), pause=(0.0, 1.0)), (25.0, 10.0),
              area, random.Random(seed))
    positions = [m.position(t * 0.5) for t in range(200)]
    assert all(0 <= x <= 50 and 0 <= y <= 20 for x, y in positions)
    assert len(set(positions)) > 10
    steps = [abs(x1 - x0) + abs(y1 - y0) for (x0, y0), (x1, y1)
             in itertools.pairwise(positions)]
    assert max(steps) <= 5.0 * 0.5 * 1.415 + 1e-9  # never faster than the top speed
