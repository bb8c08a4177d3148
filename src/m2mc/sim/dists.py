"""Distributions for delays and payload sizes, as scenario files name them.

``constant {value}``, ``uniform {low, high}``, ``exponential {mean, min}`` and
``lognormal {median, sigma, min}`` (``min`` is an additive floor, e.g. the
propagation delay under a random queueing delay). A bare number is a constant.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from m2mc.kinds import DistKind

KINDS = tuple(DistKind)


@dataclass(frozen=True, slots=True)
class Dist:
    kind: DistKind
    a: float = 0.0  # constant: value; uniform: low; exponential: mean; lognormal: median
    b: float = 0.0  # uniform: high; lognormal: sigma
    floor: float = 0.0  # exponential, lognormal: added to every draw

    @property
    def is_constant(self) -> bool:
        return self.kind == DistKind.CONSTANT

    def mean(self) -> float:
        if self.kind == DistKind.CONSTANT:
            return self.a
        if self.kind == DistKind.UNIFORM:
            return (self.a + self.b) / 2
        if self.kind == DistKind.EXPONENTIAL:
            return self.floor + self.a
        return self.floor + self.a * math.exp(self.b * self.b / 2)

    def sampler(self, rng: random.Random) -> Callable[[], float]:
        """A zero-argument function drawing from this distribution with ``rng``."""
        a, b, floor = self.a, self.b, self.floor
        if self.kind == DistKind.CONSTANT:
            return lambda: a
        if self.kind == DistKind.UNIFORM:
            rnd, width = rng.random, b - a
            return lambda: a + width * rnd()  # what Random.uniform computes, one call less
        if self.kind == DistKind.EXPONENTIAL:
            if a == 0:
                return lambda: floor
            expo, rate = rng.expovariate, 1.0 / a
            return lambda: floor + expo(rate)
        lognorm, mu = rng.lognormvariate, math.log(a)
        return lambda: floor + lognorm(mu, b)



def constant(value: float) -> Dist:
    return Dist(DistKind.CONSTANT, value)
