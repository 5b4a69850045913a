"""MLX's float32 kernels as `harness.diagnosis.library_ops.mlx_cpu` repeats them: close to the functions
(mpmath, 80 bits) with the accuracy their sources state, and, where MLX is installed, equal to
its CPU backend bit for bit.

Deterministic: fixed arguments and fixed seeds, no probabilistic assertion.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from harness.diagnosis.library_ops import libm, mlx_cpu
from summaries import (
    arguments,
    assert_kernels_equal,
    every_float32,
    exact_values,
    near_one,
    ulps_off,
)


def test_erf_is_abramowitz_and_stegun_accuracy():
    """7.1.26's absolute error is 1.5e-7; with float32 steps <= 4e-7 on [-5, 5] (3.7e-7
    measured). A wrong coefficient is off by 1e-4 or more."""
    xs = arguments(-5.0, 5.0, 1500, 1)
    assert np.abs(mlx_cpu.erf(xs).astype(np.float64) - exact_values(mpmath.erf, xs)).max() <= 4e-7


def test_exp_and_erfinv_sit_within_their_stated_ulps():
    """MLX's fast exp: <= 60 ulps on [-80, 10] (55 measured: x log2 e rounded in float32);
    Giles' erfinv through the C logf: <= 2.5 ulps in the centre and near 1 (his stated bound
    2.36; 1.8 and 2.0 measured). erfinv(+-1) is +-inf."""
    xs = arguments(-80.0, 10.0, 1500, 2)
    assert ulps_off(mlx_cpu.exp(xs), mpmath.exp, xs).max() <= 60.0
    rng = np.random.default_rng(3)
    central = rng.uniform(-0.9999, 0.9999, 1500).astype(np.float32)
    tail = near_one(rng)
    assert ulps_off(mlx_cpu.erfinv(central), mpmath.erfinv, central).max() <= 2.5
    assert ulps_off(mlx_cpu.erfinv(tail), mpmath.erfinv, tail).max() <= 2.5
    assert list(mlx_cpu.erfinv(np.array([-1.0, 1.0], dtype=np.float32))) == [-np.inf, np.inf]


def test_the_c_logf_is_the_c_librarys():
    """`libm.logf` returns the C library's logf, within an ulp of the log and the correctly
    rounded log on most arguments."""
    ts = arguments(1e-3, 1.0, 1 << 14, 4)
    ours = libm.logf(ts)
    rounded = np.log(ts.astype(np.float64)).astype(np.float32)
    assert np.mean(ours == rounded) > 0.98
    assert np.all(np.abs(ours.astype(np.float64) - np.log(ts.astype(np.float64)))
                  <= np.spacing(np.abs(rounded)))


def test_the_kernels_equal_mlx_bit_for_bit():
    """Where MLX is installed: its erf, exp and erfinv on 2^18 arguments each (every float32 in
    [0.999, 1] for erfinv), and its uniform(lo, hi) as the image of its uniform(0, 1)'s words."""
    mx = pytest.importorskip("mlx.core")
    rng = np.random.default_rng(5)
    cases = [
        (mx.erf, mlx_cpu.erf, rng.uniform(-6, 6, 1 << 18)),
        (mx.exp, mlx_cpu.exp, rng.uniform(-90, 90, 1 << 18)),
        (mx.erfinv, mlx_cpu.erfinv, rng.uniform(-1, 1, 1 << 18)),
        (mx.erfinv, mlx_cpu.erfinv, every_float32(0.999, 1.0)),
    ]
    assert_kernels_equal(cases, lambda library, xs: library(mx.array(xs)))
    key = mx.random.key(11)
    unit = np.array(mx.random.uniform(0.0, 1.0, (1 << 16,), key=key)).astype(np.float64)
    # u is RN(j 2^-32) capped below 1: the word j = u 2^32 writes u again
    words = np.ldexp(unit, 32)
    for lo, hi in ((0.23582281, 0.23583025), (-0.95449984, 0.95449984), (0.99730015, 0.9999367)):
        drawn = np.array(mx.random.uniform(mx.array(lo, mx.float32), mx.array(hi, mx.float32),
                                           (1 << 16,), key=key))
        assert np.array_equal(drawn.astype(np.float64), mlx_cpu.uniform_image(words, lo, hi))
