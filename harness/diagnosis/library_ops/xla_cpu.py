"""XLA's float32 erf, log1p, erfinv, exp and erfc as its CPU backend computes them, operation by
operation, and JAX's ndtr and ndtri built on them, so that the diagnosis can enumerate the exact
law of a JAX (or NumPyro) sampler in float32.

JAX's ``truncated_normal`` writes ``sqrt2 erfinv(u)``; XLA's erfinv is Giles' single-precision
polynomial, its log1p a Cephes rational near 0 and ``log(1 + x)`` elsewhere, its log a Cephes
polynomial, its erf the rational of Eigen. None is correctly rounded: their last bits decide
which float32 values a 23-bit uniform can reach, and so the law's last bits, its equal pairs and,
far out, its values. Each function below repeats the kernel's steps, each rounded into float32,
with the fused multiply-adds where XLA's code generator emits them (its erf calls fma; LLVM
contracts the other polynomial steps). Measured against JAX 0.10's CPU backend on 10^6 random
arguments each: erf, erfinv, log1p, exp and ndtri agree bit for bit; a JAX sampler's whole
lattice (2^23 values of u, several windows) writes the same values. erfc is the one
approximation of an approximation here: its Cephes form for |x| >= 1 agrees on 95-99.9% of
arguments (the others within 2 ulps), and below 1 it is taken as 1 - erf (61% equal, within 11
ulps: XLA's own form there is not the one repeated here); it only sets the two ends of NumPyro's
window, and NumPyro's laws enumerated with it write the library's values on every window
measured but the 1-sigma end (2% of the values there are a neighbour's).

A fused multiply-add is computed in float64 and rounded into float32: the product of two
float32 values is exact in float64, and the sum rounds twice, which differs from one rounding
only where the float64 sum lands exactly on a float32 tie (about 2^-29 of the arguments).
In float64 only ``ndtri`` is repeated (`ndtri64`, NumPyro's float64 sampler): JAX's float64
log is the C library's (equal on 2^17 arguments), each polynomial step one float64 fma
(`libm.fma`); bit for bit against JAX on 2^17 arguments. Its ndtr (`ndtr64`) is JAX's formula
on scipy's float64 erf and erfc, not XLA's (within an ulp).

These are models of a library's arithmetic for naming a mechanism, never the law a sampler is
judged against.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from . import libm

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


#: Cephes expf: log2(e), ln 2 split in two, and the polynomial of exp(r) - 1 - r over r^2.
LOG2E = 1.44269504088896341
EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
            1.6666665459e-1, 5.0000001201e-1)
#: erfc for |x| >= 1: exp(-x^2) / |x| times P(1/x^2) below 2, R(1/x^2) from 2 on (Cephes).
ERFC_BELOW_TWO = (2.326819970068386e-2, -1.387039388740657e-1, 3.687424674597105e-1,
                  -5.824733027278666e-1, 6.210004621745983e-1, -4.944515323274145e-1,
                  3.404879937665872e-1, -2.741127028184656e-1, 5.638259427386472e-1)
ERFC_FROM_TWO = (-1.047766399936249e+1, 1.297719955372516e+1, -7.495518717768503e+0,
                 2.921019019210786e+0, -1.015265279202700e+0, 4.218463358204948e-1,
                 -2.820767439740514e-1, 5.641895067754075e-1)
#: Cephes ndtri's rational approximations, highest degree first, as JAX holds them.
NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
            1.39312609387279679503e1, -1.23916583867381258016e0)
NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
            -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
            1.59056225126211695515e1, -1.18331621121330003142e0)
NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
            4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
            -1.40256079171354495875e-1, -3.50424626827848203418e-2,
            -8.57456785154685413611e-4)
NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
            1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
            -3.80806407691578277194e-2, -9.33259480895457427372e-4)
NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
            1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
            3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
            2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
            2.89247864745380683936e-6, 6.79019408009981274425e-9)


def exp(x) -> np.ndarray:
    """XLA's float32 exp (Cephes' expf, its reduction and polynomial fused)."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        n = np.floor(fma(x, F32(LOG2E), F32(0.5))).astype(F32)
        r = fma(n, F32(-0.693359375), x)
        r = fma(n, F32(2.12194440e-4), r)
        y = fma(horner_fma(r, EXP_POLY), r * r, r)
        return np.ldexp(y + F32(1.0), n.astype(np.int32)).astype(F32)


def erfc(x) -> np.ndarray:
    """XLA's float32 erfc, within 2 ulps from |x| = 1 on, 11 below (see the module's note)."""
    x = np.asarray(x, F32)
    ax = np.abs(x)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        q = F32(1.0) / ax
        scaled = exp(-(x * x)) * q
        y = q * q
        far = scaled * np.where(ax < F32(2.0), horner_fma(y, ERFC_BELOW_TWO),
                                horner_fma(y, ERFC_FROM_TWO)).astype(F32)
        far = np.where(x < 0, F32(2.0) - far, far)
    return np.where(ax < F32(1.0), F32(1.0) - erf(x), far).astype(F32)


def ndtr(x) -> np.ndarray:
    """``jax.scipy.special.ndtr`` in float32, op by op: 0.5 (1 + erf(w)) near 0, else from erfc."""
    x = np.asarray(x, F32)
    half_sqrt2 = F32(0.5) * F32(np.sqrt(2.0))
    w = x * half_sqrt2
    z = np.abs(w)
    y = np.where(z < half_sqrt2, F32(1.0) + erf(w),
                 np.where(w > 0, F32(2.0) - erfc(z), erfc(z)))
    return (F32(0.5) * y).astype(F32)


def ndtri(p) -> np.ndarray:
    """``jax.scipy.special.ndtri`` in float32 as JAX runs it outside jit: each operation rounded
    on its own, each ``jnp.polyval`` (a jitted scan) one fma per degree."""
    p = np.asarray(p, F32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mcp = np.where(p > F32(-np.expm1(-2.0)), F32(1.0) - p, p).astype(F32)
        s = np.where(mcp == 0, F32(0.5), mcp).astype(F32)
        w = s - F32(0.5)
        ww = w * w
        big = w + (w * ww) * (horner_fma(ww, NDTRI_P0) / horner_fma(ww, NDTRI_Q0))
        big = big * -F32(np.sqrt(2.0 * np.pi))
        z = np.sqrt(F32(-2.0) * log(s))
        first = z - log(z) / z
        iz = F32(1.0) / z
        tiny = (horner_fma(iz, NDTRI_P2) / horner_fma(iz, NDTRI_Q2)) / z
        other = (horner_fma(iz, NDTRI_P1) / horner_fma(iz, NDTRI_Q1)) / z
        x = np.where(s > F32(np.exp(-2.0)), big,
                     np.where(z >= F32(8.0), first - tiny, first - other))
        x = np.where(p > F32(1.0 - np.exp(-2.0)), x, -x)
        return np.where(p == 0, -np.inf, np.where(p == 1, np.inf, x)).astype(F32)


def ndtr64(x) -> np.ndarray:
    """``jax.scipy.special.ndtr`` in float64: JAX's formula (`ndtr`) with scipy's erf and erfc
    in place of XLA's float64 ones (not repeated: within an ulp)."""
    x = np.asarray(x, F64)
    half_sqrt2 = 0.5 * np.sqrt(2.0)
    w = x * half_sqrt2
    z = np.abs(w)
    y = np.where(z < half_sqrt2, 1.0 + special.erf(w),
                 np.where(w > 0, 2.0 - special.erfc(z), special.erfc(z)))
    return 0.5 * y


def ndtri64(p) -> np.ndarray:
    """``jax.scipy.special.ndtri`` in float64 as JAX runs it outside jit: its float32 steps
    (`ndtri`) in float64, each polynomial step one float64 fma, the C library's log; each
    branch computed only where it is taken (the steps are elementwise)."""
    p = np.asarray(p, F64)

    def horner(x, coefficients):
        out = np.full_like(x, coefficients[0])
        for c in coefficients[1:]:
            out = libm.fma(out, x, c)
        return out

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mcp = np.where(p > -np.expm1(-2.0), 1.0 - p, p)
        s = np.where(mcp == 0, 0.5, mcp)
        x = np.empty_like(s)
        central = s > np.exp(-2.0)
        w = s[central] - 0.5
        ww = w * w
        big = w + (w * ww) * (horner(ww, NDTRI_P0) / horner(ww, NDTRI_Q0))
        x[central] = big * -np.sqrt(2.0 * np.pi)
        z = np.sqrt(-2.0 * libm.log(s[~central]))
        first = z - libm.log(z) / z
        iz = 1.0 / z
        far = z >= 8.0
        tail = np.empty_like(z)
        tail[far] = (horner(iz[far], NDTRI_P2) / horner(iz[far], NDTRI_Q2)) / z[far]
        tail[~far] = (horner(iz[~far], NDTRI_P1) / horner(iz[~far], NDTRI_Q1)) / z[~far]
        x[~central] = first - tail
        x = np.where(p > 1.0 - np.exp(-2.0), x, -x)
        return np.where(p == 0, -np.inf, np.where(p == 1, np.inf, x))
