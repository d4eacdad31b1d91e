"""The growth-curve fit of benchmarks/postgres.py --growth: power laws and lines recovered from their points."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from _growth import fit_linear, fit_power


def test_a_power_law_is_recovered_and_extrapolated() -> None:
    points = [(n, 3.0 * n**0.5) for n in (250_000, 500_000, 1_000_000, 2_000_000)]
    curve = fit_power(points)
    assert curve.a == pytest.approx(3.0)
    assert curve.b == pytest.approx(0.5)
    assert curve.at(10_000_000) == pytest.approx(3.0 * 10_000_000**0.5)


def test_a_flat_figure_fits_an_exponent_near_zero_despite_noise() -> None:
    curve = fit_power([(250_000, 10.2), (500_000, 9.8), (1_000_000, 10.1), (3_000_000, 9.9)])
    assert abs(curve.b) < 0.02
    assert 9.5 < curve.at(10_000_000) < 10.5


def test_a_line_gives_bytes_per_message() -> None:
    size = fit_linear([(1_000, 5_000.0), (2_000, 9_000.0), (4_000, 17_000.0)])
    assert (size.c, size.k) == (pytest.approx(1_000.0), pytest.approx(4.0))
    assert size.at(10_000) == pytest.approx(41_000.0)


@pytest.mark.parametrize(
    "points",
    [[(1_000, 5.0)], [(1_000, 5.0), (1_000, 6.0)], [(0, 1.0), (10, 2.0)], [(10, -1.0), (20, 2.0)]],
)
def test_a_fit_refuses_points_it_cannot_fit(points: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError, match="fit"):
        fit_power(points)
