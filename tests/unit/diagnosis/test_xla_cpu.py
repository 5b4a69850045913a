"""XLA's float32 kernels as `harness.diagnosis.library_ops.xla_cpu` repeats them: close to the functions
(mpmath, 80 bits, correctly rounded into float32), and, where JAX is installed, equal to its CPU
backend bit for bit; the JAX construction's law the same whether enumerated over the values of
v or pushed over its whole lattice.

Deterministic: fixed arguments and fixed seeds, no probabilistic assertion.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from harness.diagnosis.library_ops import xla_cpu
from harness.diagnosis.mechanisms.coarse_construction import (
    CONSTRUCTIONS,
    Steps,
    construction_law,
    whole_lattice_law,
)
from reference import TruncatedNormal, rounded_law
from summaries import arguments, assert_kernels_equal, every_float32, near_one, ulps_off

JAX_CONSTRUCTION = next(c for c in CONSTRUCTIONS if c.short == "JAX")


def test_erf_and_log1p_sit_within_a_few_ulps():
    """Eigen's erf rational: <= 4.2 ulps on [-4, 4] (4.13 measured); Cephes' log1p: <= 2.3
    (2.25 measured). A wrong coefficient or a dropped step is off by thousands."""
    xs = arguments(-4.0, 4.0, 1500, 1)
    assert ulps_off(xla_cpu.erf(xs), mpmath.erf, xs).max() <= 4.2
    zs = np.concatenate([arguments(-0.999, 3.0, 1500, 2), -arguments(0.0, 1e-3, 200, 3)])
    assert ulps_off(xla_cpu.log1p(zs), mpmath.log1p, zs).max() <= 2.3


def test_erfinv_is_giles_accuracy_in_the_centre_and_far_off_near_one():
    """Giles' single-precision erfinv: <= 6 ulps where w = -log(1 - x^2) < 5 (5.13 measured),
    tens of ulps beyond (63 measured): the error that decides which float32 values a JAX
    sampler writes far out. erfinv(+-1) is +-inf."""
    rng = np.random.default_rng(4)
    central = rng.uniform(-0.9966, 0.9966, 1500).astype(np.float32)
    tail = near_one(rng)
    assert ulps_off(xla_cpu.erfinv(central), mpmath.erfinv, central).max() <= 6.0
    far = ulps_off(xla_cpu.erfinv(tail), mpmath.erfinv, tail)
    assert 10 < far.max() <= 70
    assert list(xla_cpu.erfinv(np.array([-1.0, 1.0], dtype=np.float32))) == [-np.inf, np.inf]


def test_exp_and_ndtri_sit_within_a_few_ulps():
    """Cephes' expf: <= 1 ulp on [-80, 10] (0.97 measured); JAX's ndtri in float32 (Cephes,
    each step rounded): <= 4 ulps on (0, 1) and down to 1e-30 (3.2 measured); the Cephes erfc:
    <= 10 ulps on [1, 4] (8.8 measured; it loses more further out, 62 at 9) and <= 9 on (-1, 1)
    as 1 - erf (8.5 measured)."""
    xs = arguments(-80.0, 10.0, 1500, 6)
    assert ulps_off(xla_cpu.exp(xs), mpmath.exp, xs).max() <= 1.0
    rng = np.random.default_rng(7)
    ps = np.concatenate([rng.uniform(0.0, 1.0, 1500), 10.0 ** rng.uniform(-30, -2, 300)])
    ps = ps.astype(np.float32)
    ps = ps[(ps > 0) & (ps < 1)]

    def quantile(p):
        with mpmath.workprec(300):  # 2p - 1 keeps p's bits down to 1e-30
            return mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1)

    assert ulps_off(xla_cpu.ndtri(ps), quantile, ps).max() <= 4.0
    zs = arguments(1.0, 4.0, 1000, 8)
    assert ulps_off(xla_cpu.erfc(zs), mpmath.erfc, zs).max() <= 10.0
    zs = arguments(-1.0, 1.0, 1000, 9)
    assert ulps_off(xla_cpu.erfc(zs), mpmath.erfc, zs).max() <= 9.0


def test_the_kernels_equal_jax_bit_for_bit():
    """Where JAX is installed: its jitted erf, log1p, erfinv and exp, and ndtri as JAX runs it
    outside jit, on 2^18 arguments each, and every float32 in [0.999, 1]."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax
    from jax.scipy.special import ndtri

    rng = np.random.default_rng(5)
    cases = [
        (lax.erf, xla_cpu.erf, rng.uniform(-5, 5, 1 << 18)),
        (jnp.exp, xla_cpu.exp, rng.uniform(-80, 10, 1 << 18)),
        (jnp.log1p, xla_cpu.log1p, rng.uniform(-1, 3, 1 << 18)),
        (lax.erf_inv, xla_cpu.erfinv, rng.uniform(-1, 1, 1 << 18)),
        (lax.erf_inv, xla_cpu.erfinv, every_float32(0.999, 1.0)),
    ]
    assert_kernels_equal(cases, lambda library, xs: jax.jit(library)(jnp.asarray(xs)))
    ps = np.concatenate([rng.uniform(0, 1, 1 << 18), 10.0 ** rng.uniform(-37, -3, 1 << 14)])
    ps = ps.astype(np.float32)
    assert np.array_equal(np.asarray(ndtri(jnp.asarray(ps))), xla_cpu.ndtri(ps))


def test_ndtri64_sits_within_an_ulp_or_two_and_equals_jax():
    """JAX's float64 ndtri as repeated (Cephes, one float64 fma per polynomial step, the C
    library's log): <= 4 ulps on (0, 1) and down to 1e-300 (Cephes' own accuracy); where JAX is
    installed, equal to its x64 ndtri bit for bit on 2^17 arguments."""
    rng = np.random.default_rng(8)
    ps = np.concatenate([rng.uniform(0.0, 1.0, 800), 10.0 ** rng.uniform(-300, -2, 200)])
    ps = ps[(ps > 0) & (ps < 1)]
    with mpmath.workprec(1100):
        exact = np.array([float(mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(float(p)) - 1))
                          for p in ps])
    off = np.abs(xla_cpu.ndtri64(ps) - exact) / np.spacing(np.abs(exact))
    assert off.max() <= 4.0
    jax = pytest.importorskip("jax")
    from jax.scipy.special import ndtri

    ps = np.concatenate([rng.uniform(0, 1, 1 << 17), 10.0 ** rng.uniform(-300, -2, 1 << 14)])
    with jax.enable_x64(True):
        theirs = np.asarray(ndtri(jax.numpy.asarray(ps, dtype=np.float64)))
    assert theirs.dtype == np.float64 and np.array_equal(theirs, xla_cpu.ndtri64(ps))


def test_the_whole_lattice_law_is_the_enumerated_one():
    """TN(0, 1, 3, 4) in float32 (~44 000 values of v): JAX's law enumerated over v (bisection
    on the lattice) and pushed over all 2^23 lattice points give the same values and masses."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 3.0, 4.0), torch.float32)
    enumerated = construction_law(law, JAX_CONSTRUCTION)
    pushed = whole_lattice_law(Steps.of(law, JAX_CONSTRUCTION))
    assert np.array_equal(enumerated.keys, pushed.keys)
    assert np.allclose(enumerated.probs, pushed.probs, rtol=0, atol=1e-15)


def test_a_window_too_wide_to_enumerate_is_pushed_whole_only_when_asked():
    """TN(0, 1000, -1, 1) in float32: erf(+-0.001 / sqrt2) spans more float32 values than
    MAX_VALUES. Pushed whole: 2^23 distinct values, each 2^-23 (the uniform's lattice, every
    point its own value); not asked: no law."""
    law = rounded_law(TruncatedNormal(0.0, 1000.0, -1.0, 1.0), torch.float32)
    assert construction_law(law, JAX_CONSTRUCTION) is None
    whole = construction_law(law, JAX_CONSTRUCTION, whole=True)
    assert whole.keys.size == 1 << 23 and np.allclose(whole.probs, 2.0**-23)
