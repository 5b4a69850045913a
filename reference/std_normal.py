"""Integrals of the standard normal density over windows, in standardized units, relative to the
density at an anchor: the kernels `reference.truncnorm.TruncatedNormal` is built on.

``phi(x) * g(x, w)`` with ``g(x, w) = int_0^w exp(-x s - s^2/2) ds`` is the N(0, 1) mass of
[x, x + w]: the Gaussian factor stays exact and the integral is well conditioned. `log_g` takes it
by Gauss-Legendre where the window is short against the local scale, and by a Mills-ratio
(``erfcx``) difference with ``expm1`` otherwise. Pure numpy float64 + scipy.special."""

from __future__ import annotations

import math

import numpy as np
from scipy import special as sc

__all__ = ["LOG_SQRT_2PI", "LOG_SQRT_HALF_PI", "log_g", "log_mass", "log_mills"]

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
LOG_SQRT_HALF_PI = 0.5 * math.log(0.5 * math.pi)
_SQRT_HALF = math.sqrt(0.5)

# Windows narrower than _GL_MAX_W Mills ratios are integrated by an 8-point Gauss-Legendre rule
# (log-density varies by < 0.3 there: exact to rounding); wider ones by a Mills-ratio difference
# that then loses at most a factor ~1 / _GL_MAX_W to cancellation (erfcx is good to 4 ulp).
_GL_T, _GL_W = np.polynomial.legendre.leggauss(8)
_GL_MAX_W = 0.25


def log_mills(x):
    """log R(x), R(x) = Phi_c(x) / phi(x) (Mills ratio), for x >= 0; -inf at +inf."""
    with np.errstate(divide="ignore"):
        return LOG_SQRT_HALF_PI + np.log(sc.erfcx(np.multiply(x, _SQRT_HALF)))


def log_g(x, w):
    """log int_0^w exp(-x s - s^2/2) ds for x >= 0, w >= 0 (w may be inf), elementwise.

    ``phi(x) * g(x, w)`` is the N(0,1) mass of [x, x + w]; writing it this way keeps the Gaussian
    factor exact and leaves a well-conditioned integral. ``g = R(x) (1 - exp(-q))`` with
    ``q = c - log(R(x + w) / R(x))``, c = w (x + w / 2), loses ~R(x) / w to rounding (q ~ w / R(x)
    for small w); below w = _GL_MAX_W * R(x) the log-density varies by < 0.3 over the window and a
    short Gauss-Legendre rule is exact to rounding instead.
    """
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    log_r = log_mills(x)
    with np.errstate(invalid="ignore", over="ignore"):
        short = w < _GL_MAX_W * np.exp(log_r)
    n_short = int(np.count_nonzero(short))
    if n_short == 0:  # fast paths: no fancy indexing on a million-element call
        return _log_g_wide(x, w, log_r)
    if n_short == x.size:
        return _log_g_short(x, w)
    out = np.empty(x.shape)
    out[short] = _log_g_short(x[short], w[short])
    wide = ~short
    out[wide] = _log_g_wide(x[wide], w[wide], log_r[wide])
    return out


def _log_g_short(x, w):
    half = 0.5 * w
    acc = np.zeros(x.shape)
    for t, wt in zip(_GL_T, _GL_W):
        s = half * (1.0 + t)
        acc += wt * np.exp(-s * (x + 0.5 * s))
    # log(w) + log(acc / 2), not log(w / 2): halving a subnormal width would round it.
    with np.errstate(divide="ignore"):
        return np.log(w) + np.log(0.5 * acc)


def _log_g_wide(x, w, log_r):
    with np.errstate(invalid="ignore", over="ignore"):
        q = w * (x + 0.5 * w) - (log_mills(x + w) - log_r)
        q = np.where(np.isinf(w), np.inf, q)  # inf - inf when x + w = inf
        return log_r + np.log(-np.expm1(-q))


def log_mass(xlo, xhi, w, ulo, t0):
    """log( N(0,1) mass of [xlo, xhi] / phi(t0) ) elementwise (1-D arrays, xlo <= xhi).

    ``w = xhi - xlo`` and ``ulo = xlo - t0`` are passed separately because the caller forms them
    from absolute coordinates, where they are exact; ``t0`` is 0 unless every xlo is >= t0 >= 0.
    """
    out = np.full(xlo.shape, np.nan)
    zero = w == 0.0
    right = (xlo >= 0.0) & ~zero
    left = (xhi <= 0.0) & ~right & ~zero
    mid = (xlo < 0.0) & (xhi > 0.0) & ~zero
    nr, nl, nm = int(right.sum()), int(left.sum()), int(mid.sum())
    zm = np.zeros(nm)
    lg = log_g(
        np.concatenate([xlo[right], -xhi[left], zm, zm]),
        np.concatenate([w[right], w[left], -xlo[mid], xhi[mid]]),
    )
    u = ulo[right]
    with np.errstate(over="ignore"):  # offsets near the largest double: log mass -inf is right
        out[right] = -0.5 * u * (2.0 * t0 + u) + lg[:nr]
        out[left] = -0.5 * xhi[left] ** 2 + lg[nr : nr + nl]
    out[mid] = np.logaddexp(lg[nr + nl : nr + nl + nm], lg[nr + nl + nm :])
    out[zero] = -np.inf
    return out

