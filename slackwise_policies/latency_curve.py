"""The measured curve of a function's batch latency: a monotone piecewise-linear function of the
batch size through the medians measured at each size (and, where none was measured yet, a
profile's, scaled by how the measured sizes compare with it), for
:meth:`slackwise_policies.latency.LatencyModel.estimate_ms`."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping

__all__ = ["Curve", "interpolate", "prior_points"]


def prior_points(curve: Mapping[int, float] | None) -> tuple[tuple[int, float], ...]:
    """A profile's medians by batch size as sorted points (checked: sizes >= 1, positive ms)."""
    if not curve:
        return ()
    points = tuple(sorted((int(n), float(v)) for n, v in curve.items()))
    for n, v in points:
        if n < 1 or not (math.isfinite(v) and v > 0):
            raise ValueError(f"prior_curve needs batch sizes >= 1 and positive ms, got {n}: {v}")
    return points


def interpolate(points: tuple[tuple[int, float], ...], n: int) -> float | None:
    """``points`` (sorted by size) at ``n``, linearly between two; None outside their range."""
    i = bisect.bisect_left(points, (n, -math.inf))
    if i < len(points) and points[i][0] == n:
        return points[i][1]
    if i == 0 or i == len(points):
        return None
    (n0, v0), (n1, v1) = points[i - 1], points[i]
    return v0 + (v1 - v0) * (n - n0) / (n1 - n0)


class Curve:
    """A monotone piecewise-linear curve by batch size, kept as its knots (a knot may fall
    between two sizes, where the line rises past a plateau): at every size from 1 to ``top``,
    ``max(floor, the points' interpolation, the curve at the size before)``, continued below
    the first point down the line's ``slope``."""

    __slots__ = ("top", "xs", "ys")

    def __init__(self, xs: list[float], ys: list[float]) -> None:
        self.xs = xs
        self.ys = ys
        self.top = int(xs[-1])

    @classmethod
    def through(cls, points: list[tuple[int, float]], *, slope: float, floor: float) -> Curve:
        xs: list[float] = []
        ys: list[float] = []
        first, v_first = points[0]
        if first > 1:  # below the smallest size known: the line's slope down from it
            low = v_first - slope * (first - 1)
            xs.append(1.0)
            ys.append(max(floor, low))
            if low < floor < v_first:  # the line meets the floor between 1 and first
                xs.append(first - (v_first - floor) / slope)
                ys.append(floor)
        last = max(floor, v_first)
        xs.append(float(first))
        ys.append(last)
        for (n0, v0), (n1, v1) in itertools.pairwise(points):
            if v1 > last:
                cross = n0 + (last - v0) * (n1 - n0) / (v1 - v0)  # the line passes the plateau
                if cross > n0:
                    xs.append(cross)
                    ys.append(last)
                last = v1
            xs.append(float(n1))
            ys.append(last)
        return cls(xs, ys)

    def at(self, n: int) -> float:
        xs, ys = self.xs, self.ys
        i = bisect.bisect_left(xs, n)
        if xs[i] == n:
            return ys[i]
        x0, x1 = xs[i - 1], xs[i]
        return ys[i - 1] + (ys[i] - ys[i - 1]) * (n - x0) / (x1 - x0)
