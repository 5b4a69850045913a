"""XLA's float32 erf, log1p and erfinv as its CPU backend computes them, operation by operation,
so that the diagnosis can enumerate the exact law of a JAX sampler in float32.

JAX's ``truncated_normal`` writes ``sqrt2 erfinv(u)``; XLA's erfinv is Giles' single-precision
polynomial, its log1p a Cephes rational near 0 and ``log(1 + x)`` elsewhere, its log a Cephes
polynomial, its erf the rational of Eigen. None is correctly rounded: their last bits decide
which float32 values a 23-bit uniform can reach, and so the law's last bits, its equal pairs and,
far out, its values. Each function below repeats the kernel's steps, each rounded into float32,
with the fused multiply-adds where XLA's code generator emits them (its erf calls fma; LLVM
contracts the other polynomial steps). Measured against JAX 0.10's CPU backend on 10^6 random
arguments each: erf, erfinv and log1p agree bit for bit; a JAX sampler's whole lattice
(2^23 values of u, several windows) writes the same values.

A fused multiply-add is computed in float64 and rounded into float32: the product of two
float32 values is exact in float64, and the sum rounds twice, which differs from one rounding
only where the float64 sum lands exactly on a float32 tie (about 2^-29 of the arguments).
These are models of a library's arithmetic for naming a mechanism, never the law a sampler is
judged against.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
F64 = np.float64

#: Giles' erfinv coefficients (w < 5 and w >= 5), highest degree first, as XLA holds them.
ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
#: log1p's Cephes rational on |x| < sqrt2 - 1, highest degree last.
LOG1P_NUMERATOR = (4.5270000862445199635215e-5, 4.9854102823193375972212e-1,
                   6.5787325942061044846969e0, 2.9911919328553073277375e1,
                   6.0949667980987787057556e1, 5.7112963590585538103336e1,
                   2.0039553499201281259648e1)
LOG1P_DENOMINATOR = (1.0, 1.5062909083469192043167e1, 8.3047565967967209469434e1,
                     2.2176239823732856465394e2, 3.0909872225312059774938e2,
                     2.1642788614495947685003e2, 6.0118660497603843919306e1)
LOG1P_RATIONAL_BELOW = 0.41421356237309504880
#: Cephes logf: the polynomial in x - 1 on [sqrt(1/2), sqrt2), and ln 2 split in two.
LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
            1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
            3.3333331174e-1)
LOG_SQRT_HALF = 0.707106781186547524
LN2_LOW, LN2_HIGH = -2.12194440e-4, 0.693359375
#: Eigen's erf rational: odd numerator, even denominator (lowest degree first).
ERF_NUMERATOR = (1.128379143519084, 0.18520832239976145, 0.050955695062380861,
                 0.0034082910107109506, 0.00022905065861350646)
ERF_DENOMINATOR = (1.0, 0.49746925110067538, 0.11098505178285362, 0.014070470171167667,
                   0.0010179625278914885, 0.000023547966471313185, -1.1791602954361697e-7)
#: erf is +-1 from here on (erfinv(1 - 2^-25), as float32).
ERF_ONE_FROM = 3.832506856900711


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=F64).astype(F32)


def fma(a, b, c) -> np.ndarray:
    """a b + c rounded once into float32 (through float64; see the module's note)."""
    return (np.asarray(a, F32).astype(F64) * np.asarray(b, F32).astype(F64)
            + np.asarray(c, F32).astype(F64)).astype(F32)


def horner_fma(x: np.ndarray, coefficients) -> np.ndarray:
    """The polynomial with `coefficients` (highest degree first) at x, one fma per degree."""
    p = np.full_like(x, F32(coefficients[0]))
    for c in coefficients[1:]:
        p = fma(p, x, F32(c))
    return p


def erf(x) -> np.ndarray:
    """XLA's float32 erf."""
    x = np.asarray(x, F32)
    x2 = x * x
    p = x * horner_fma(x2, ERF_NUMERATOR[::-1])
    q = horner_fma(x2, ERF_DENOMINATOR[::-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        r = p / q
    return np.where(np.abs(x) >= F32(ERF_ONE_FROM), np.copysign(F32(1.0), x), r).astype(F32)


def log(v) -> np.ndarray:
    """XLA's float32 log of positive normal v (Cephes' logf)."""
    v = np.asarray(v, F32)
    m, e = np.frexp(v)
    m, e = m.astype(F32), e.astype(F32)
    low = m < F32(LOG_SQRT_HALF)
    e = np.where(low, e - F32(1.0), e).astype(F32)
    x = np.where(low, (m + m) - F32(1.0), m - F32(1.0)).astype(F32)
    x2 = x * x
    x3 = x2 * x
    c = [F32(k) for k in LOG_POLY]
    y = fma(fma(x, c[0], c[1]), x, c[2])
    y1 = fma(fma(x, c[3], c[4]), x, c[5])
    y2 = fma(fma(x, c[6], c[7]), x, c[8])
    y = fma(fma(y, x3, y1), x3, y2)
    y = fma(y, x3, F32(LN2_LOW) * e)
    x = x - F32(0.5) * x2
    x = x + y
    return (x + F32(LN2_HIGH) * e).astype(F32)


def log1p(x) -> np.ndarray:
    """XLA's float32 log1p (each branch computed where it is taken: the kernel computes both
    and selects, with the same result)."""
    x = np.asarray(x, F32)
    out = np.empty_like(x)
    near = np.abs(x) < F32(LOG1P_RATIONAL_BELOW)
    s = x[near]
    s2 = s * s
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = horner_fma(s, LOG1P_NUMERATOR) / horner_fma(s, LOG1P_DENOMINATOR)
        out[near] = s + fma(F32(-0.5), s2, (s * s2) * ratio)
        out[~near] = log(x[~near] + F32(1.0))
    return out


def erfinv(x) -> np.ndarray:
    """XLA's float32 erfinv (Giles), +-inf at +-1."""
    x = np.asarray(x, F32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        w = -log1p(-(x * x))
        central = w < F32(5.0)
        w = np.where(central, w - F32(2.5), np.sqrt(w) - F32(3.0)).astype(F32)
        p = np.where(central, F32(ERFINV_CENTRAL[0]), F32(ERFINV_TAIL[0])).astype(F32)
        for lo, hi in zip(ERFINV_CENTRAL[1:], ERFINV_TAIL[1:]):
            p = fma(p, w, np.where(central, F32(lo), F32(hi)))
        result = p * x
        return np.where(np.abs(x) == F32(1.0), x * F32(np.inf), result).astype(F32)
