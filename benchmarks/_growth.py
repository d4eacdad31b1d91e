"""Growth curves of a benchmark run at several sizes, and their extrapolation to a size not run.

Each figure measured at sizes N₁ < N₂ < … is fitted as a power law ``y = a·N^b`` (least squares on
``log y`` against ``log N``): ``b`` near 0 means the figure does not grow with the history, 1 means it
grows in proportion.  Sizes on disk are fitted as a straight line ``y = c + k·N`` (bytes per message
plus a fixed part).  Extrapolation is what the fitted curve gives at the larger size — an estimate,
stated as such wherever it is printed.  No I/O here: the benchmark measures, this only computes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Linear", "PowerLaw", "fit_linear", "fit_power"]


@dataclass(frozen=True, slots=True)
class PowerLaw:
    """``y = a·N^b``."""

    a: float
    b: float

    def at(self, n: float) -> float:
        return self.a * n**self.b


@dataclass(frozen=True, slots=True)
class Linear:
    """``y = c + k·N``."""

    c: float
    k: float

    def at(self, n: float) -> float:
        return self.c + self.k * n


def _least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Intercept and slope of the least-squares line through the points."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("a fit needs at least two points, as many x as y")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        raise ValueError("a fit needs at least two different sizes")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var
    return my - slope * mx, slope


def fit_power(points: Sequence[tuple[float, float]]) -> PowerLaw:
    """The power law through ``(size, value)`` points (sizes and values > 0)."""
    if any(n <= 0 or y <= 0 for n, y in points):
        raise ValueError("a power-law fit needs positive sizes and values")
    intercept, slope = _least_squares([math.log(n) for n, _ in points], [math.log(y) for _, y in points])
    return PowerLaw(math.exp(intercept), slope)


def fit_linear(points: Sequence[tuple[float, float]]) -> Linear:
    """The straight line through ``(size, value)`` points."""
    intercept, slope = _least_squares([n for n, _ in points], [y for _, y in points])
    return Linear(intercept, slope)
