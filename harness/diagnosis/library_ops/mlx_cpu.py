"""MLX's float32 CPU kernels of ``mlx.core.random.truncated_normal``, step by step, so that the
diagnosis holds that sampler's exact law (its last bits included) on the windows it enumerates.

``truncated_normal(lower, upper)`` in float32 computes, each line an MLX op rounded to float32:

    a, b = erf(lower / sqrt2), erf(upper / sqrt2)
    u    = min(float(w) / float(2^32 - 1), 1 - 2^-24)      w a 32-bit word; float(2^32 - 1) = 2^32
    v    = (b - a) u + a                                    a product, then a sum (no fused step)
    x    = max(min(upper, sqrt2 erfinv(v)), lower)

MLX's CPU backend on Linux evaluates its unary ops one element at a time (`simd::max_size` 1):
``erf`` is Abramowitz and Stegun's 7.1.26 through MLX's own Cephes-style ``exp``, with the
multiply-adds ``std::fma`` writes; ``erfinv`` is Giles' single-precision polynomial in
``t = log(1 - v^2)``, its ``log`` the C library's ``logf`` (``std::log`` of a float). numpy's
float32 log is another implementation, so the C library's ``logf`` is called itself
(`harness.diagnosis.library_ops.libm`), as MLX calls it. Bit for bit against MLX 0.32's CPU kernels
(tests/unit/diagnosis/test_mlx_cpu.py, where MLX is installed). These are models of a library's
arithmetic for naming a mechanism; the candidate is still judged against the reference's law
alone.
"""

from __future__ import annotations

import numpy as np

from .libm import logf
from .xla_cpu import f32, fma, horner_fma

F32 = np.float32

#: Giles' erfinv coefficients (highest degree first) beyond and within |log(1 - x^2)| = 6.125.
ERFINV_FAR = (3.03697567e-10, 2.93243101e-8, 1.22150334e-6, 2.84108955e-5, 3.93552968e-4,
              3.02698812e-3, 4.83185798e-3, -2.64646143e-1, 8.40016484e-1)
ERFINV_NEAR = (5.43877832e-9, 1.43285448e-7, 1.22774793e-6, 1.12963626e-7, -5.61530760e-5,
               -1.47697632e-4, 2.31468678e-3, 1.15392581e-2, -2.32015476e-1, 8.86226892e-1)
ERFINV_SPLIT = 6.125
#: Cephes' 2^f polynomial (highest degree first) of MLX's exp.
EXP_POLY = (1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3,
            5.550332471162809e-2, 2.402264791363012e-1, 6.931472028550421e-1, 1.0)
#: Abramowitz and Stegun 7.1.26: p and a1..a5 (highest degree first).
ERF_P = 0.3275911
ERF_POLY = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
#: The uniform's largest value: the float32 below 1.
BELOW_ONE = float(np.nextafter(F32(1.0), F32(0.0)))


def exp(x) -> np.ndarray:
    """MLX's float32 ``exp``: 2^(x log2 e) split at the nearest integer, the fraction through
    Cephes' polynomial, the integer part put in the exponent's bits."""
    x0 = f32(x)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x0 * F32(1.442695)
        whole = np.floor(y + F32(0.5)).astype(F32)
        frac = (y - whole).astype(F32)
        p = horner_fma(frac, EXP_POLY)
        power = ((whole.astype(np.int64) + 127) << 23).astype(np.uint32).view(F32)
        out = (power * p).astype(F32)
    out = np.where(np.isnan(x0), x0, out)
    out = np.where(x0 > F32(88.0), F32(np.inf), out)
    return np.where(x0 < F32(-88.0), F32(0.0), out).astype(F32)


def erf(x) -> np.ndarray:
    """MLX's float32 ``erf`` (Abramowitz and Stegun 7.1.26 with MLX's exp)."""
    x = f32(x)
    t = (F32(1.0) / fma(F32(ERF_P), np.abs(x), F32(1.0))).astype(F32)
    r = horner_fma(t, ERF_POLY)
    e = -exp(-x * x)
    result = fma((e * t).astype(F32), r, F32(1.0))
    return np.where(x > 0, result, -result).astype(F32)


def erfinv(x) -> np.ndarray:
    """MLX's float32 ``erfinv`` (Giles' polynomial in log(1 - x^2), the C library's logf)."""
    x = f32(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = logf(fma(x, F32(0.0) - x, F32(1.0)))
        p = np.where(np.abs(t) > F32(ERFINV_SPLIT), horner_fma(t, ERFINV_FAR),
                     horner_fma(t, ERFINV_NEAR))
        return (x * p).astype(F32)


def uniform_image(j, lo: float, hi: float, bits: int = 32) -> np.ndarray:
    """MLX's float32 ``uniform(lo, hi)`` at 32-bit words j, as float64 (non-decreasing in j)."""
    u = np.minimum(f32(np.ldexp(np.asarray(j, dtype=np.float64), -bits)), F32(BELOW_ONE))
    span = f32(F32(hi) - F32(lo))
    return ((span * u).astype(F32) + F32(lo)).astype(F32).astype(np.float64)
