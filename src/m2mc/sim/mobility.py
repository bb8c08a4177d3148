"""Where mobile nodes are, and which cell (if any) covers them (seeds/001 2.1).

Cells are discs; the union of cells need not cover the area, so a member can
be out of reach of every gateway. Where cells overlap, a node belongs to the
nearest centre only (seeds/001 2.4, property B3: the strongest beacon wins;
ties go to the cell listed first). Movement models: ``static``, ``waypoints``
(piecewise linear through ``(t, x, y)``) and ``random_waypoint`` (pick a point
in the area, walk there at a random speed, pause, repeat).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

from m2mc.kinds import MobilityModel
from m2mc.sim.scenario import CellSpec, Mobility


def covering_cell(cells: Sequence[CellSpec], x: float, y: float) -> CellSpec | None:
    best: CellSpec | None = None
    best_d = math.inf
    for cell in cells:
        d = math.hypot(x - cell.x, y - cell.y)
        if d <= cell.radius and d < best_d:
            best, best_d = cell, d
    return best


def nearest_cell(cells: Sequence[CellSpec], x: float, y: float) -> CellSpec:
    return min(cells, key=lambda c: math.hypot(x - c.x, y - c.y))


class Mover:
    """Position of one node over (non-decreasing) time."""

    def __init__(self, model: Mobility, start: tuple[float, float],
                 area: tuple[float, float, float, float], rng: random.Random) -> None:
        self.model = model
        self.area = area
        self.rng = rng
        self.x, self.y = start
        # random waypoint leg: from (fx, fy) at t0 to (tx, ty) at t1, then pause until t2
        self._leg = (0.0, self.x, self.y, 0.0, self.x, self.y, 0.0)
        if model.model == MobilityModel.WAYPOINTS and model.points:
            _, self.x, self.y = model.points[0]

    def position(self, t: float) -> tuple[float, float]:
        kind = self.model.model
        if kind == MobilityModel.WAYPOINTS:
            self.x, self.y = _interpolate(self.model.points, t)
        elif kind == MobilityModel.RANDOM_WAYPOINT:
            self._walk(t)
        return self.x, self.y

    def place(self, x: float, y: float) -> None:
        self.x, self.y = x, y
        self._leg = (0.0, x, y, 0.0, x, y, 0.0)

    def _walk(self, t: float) -> None:
        t0, fx, fy, t1, tx, ty, t2 = self._leg
        while t >= t2:  # start the next leg from where the last one ended
            rng = self.rng
            x0, y0, x1, y1 = self.area
            nx, ny = rng.uniform(x0, x1), rng.uniform(y0, y1)
            speed = rng.uniform(*self.model.speed)
            start = t2
            arrive = start + math.hypot(nx - tx, ny - ty) / speed
            pause_until = arrive + rng.uniform(*self.model.pause)
            if pause_until <= start:  # zero-length leg with no pause: move on in time anyway
                pause_until = start + 1e-3
            t0, fx, fy, t1, tx, ty, t2 = start, tx, ty, arrive, nx, ny, pause_until
            self._leg = (t0, fx, fy, t1, tx, ty, t2)
        if t >= t1 or t1 <= t0:
            self.x, self.y = tx, ty
        else:
            f = (t - t0) / (t1 - t0)
            self.x, self.y = fx + (tx - fx) * f, fy + (ty - fy) * f


def _interpolate(points: Sequence[tuple[float, float, float]], t: float) -> tuple[float, float]:
    if t <= points[0][0]:
        return points[0][1], points[0][2]
    for (ta, xa, ya), (tb, xb, yb) in itertools.pairwise(points):
        if t <= tb:
            if tb == ta:
                return xb, yb
            f = (t - ta) / (tb - ta)
            return xa + (xb - xa) * f, ya + (yb - ya) * f
    return points[-1][1], points[-1][2]
