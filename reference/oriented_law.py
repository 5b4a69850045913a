"""The truncated normal oriented with its mean at or left of its window: a right tail (mu <= a,
anchored at a) or a window about the mean (a < mu < b, anchored at mu). `TruncatedNormal` mirrors
a law whose mean is right of its window (X -> -X) into this orientation, so the code below only
ever integrates a right tail or a window that holds the mean.

`OrientedLaw` carries masses as logs relative to ``phi(t0)``, t0 = alpha (right tail) or 0, so even
a mass of 1e-400 of the untruncated normal is a modest number here; its quantiles take two Halley
steps on the log of the smaller tail's mass, and its moments come from one of three
cancellation-free quadratures (see `TruncatedNormal`'s module note)."""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special as sc

from .std_normal import LOG_SQRT_2PI, LOG_SQRT_HALF_PI, log_g, log_mass, log_mills

__all__ = ["MAX_MOMENT", "OrientedLaw"]

_LOG_HALF = math.log(0.5)

# Panel rule for moments: 20 nodes integrate (polynomial of degree 8) * exp(varying by <= 1.5).
_MOM_T, _MOM_W = np.polynomial.legendre.leggauss(20)
# The centred quadrature needs the mean near the window's centre (its binomial shift to the mean
# cancels like (shift / std)^k): half-width and tilt |centre| * half-width are bounded.
_CENTRED_MAX_HALF_WIDTH = 2.0
_CENTRED_MAX_TILT = 2.0
# Gaussian-deficit recurrences need both cuts this far out (raw moments near the Gaussian ones).
_GAUSS_MIN_CUT = 2.0
# Log-density drop after which the direct quadrature stops (exp(-200) is far below 1e-16).
_DIRECT_MAX_DROP = 200.0

_HALLEY_STEPS = 2
MAX_MOMENT = 8


def _where_not(mask, fn, arg):
    """fn(arg) where mask is False (NaN elsewhere), evaluating fn only on those elements."""
    n = int(np.count_nonzero(mask))
    if n == mask.size:
        return np.full(arg.shape, np.nan)
    if n == 0:
        return fn(arg)
    out = np.full(arg.shape, np.nan)
    out[~mask] = fn(arg[~mask])
    return out


def _binomial_central(raw, m):
    """Central moments 0..8 from moments ``raw`` about a point and the mean offset ``m``."""
    mu = np.zeros(MAX_MOMENT + 1)
    for k in range(MAX_MOMENT + 1):
        mu[k] = sum(math.comb(k, j) * raw[j] * (-m) ** (k - j) for j in range(k + 1))
    mu[1] = 0.0
    return mu


def _panel_nodes(edges):
    """Gauss-Legendre nodes and weights of the composite rule on consecutive ``edges``."""
    lo, hi = edges[:-1, None], edges[1:, None]
    half = 0.5 * (hi - lo)
    return (lo + half * (1.0 + _MOM_T)).ravel(), (half * _MOM_W).ravel()


class OrientedLaw:
    """TN with ``mu <= a`` (a right tail, anchored at a) or ``a < mu < b`` (anchored at mu);
    its short-window masses are `reference.short_windows.ShortWindowMasses`.

    Masses are carried as logs relative to ``phi(t0)``, t0 = alpha (right tail) or 0, so even a
    mass of 1e-400 of the untruncated normal is a modest number here.
    """

    def __init__(self, mu, sigma, a, b):
        self.mu, self.sigma, self.a, self.b = mu, sigma, a, b
        self.right = a >= mu
        self.alpha = (a - mu) / sigma
        self.beta = (b - mu) / sigma
        self.width = (b - a) / sigma
        self.t0 = self.alpha if self.right else 0.0
        if not self.right:  # masses of [a, mu] and [mu, b] relative to phi(0), for straddling ones
            self._lg_a = float(log_g(np.array([0.0]), np.array([-self.alpha]))[0])
            self._lg_b = float(log_g(np.array([0.0]), np.array([self.beta]))[0])
        self.log_z = float(self.log_mass_below(np.array([self.beta]), np.array([self.width]))[0])

    # -- coordinates -------------------------------------------------------------------------------

    def coords(self, x_abs):
        """Standardized x and the exact offsets from a and to b of absolute points in [a, b]
        (-+inf beyond float64's range: a point near -max_float at a tiny sigma)."""
        with np.errstate(invalid="ignore", over="ignore"):
            x = (x_abs - self.mu) / self.sigma
            da = np.where(x_abs == self.a, 0.0, (x_abs - self.a) / self.sigma)
            db = np.where(x_abs == self.b, 0.0, (self.b - x_abs) / self.sigma)
        return x, da, db

    def _u(self, x, da):
        """x - t0, exact: from a in a right tail, from mu otherwise."""
        return da if self.right else x

    def _log_mass_std(self, xlo, xhi, w, ulo):
        return log_mass(xlo, xhi, w, ulo, self.t0)

    def log_phi(self, x, da):
        """log(phi(x) / phi(t0))."""
        u = self._u(x, da)
        return -0.5 * u * (2.0 * self.t0 + u)

    def log_mass_below(self, x, da):
        """log(mass of [a, x] / phi(t0)): one log_g call, the straddling part precomputed."""
        if self.right:
            out = log_g(np.full(x.shape, self.alpha), da)
        else:
            neg = x <= 0.0
            lg = log_g(np.where(neg, -x, 0.0), np.where(neg, da, x))
            with np.errstate(invalid="ignore"):
                out = np.where(neg, lg - 0.5 * x * x, np.logaddexp(self._lg_a, lg))
        return np.where(da == 0.0, -np.inf, out)

    def log_mass_above(self, x, da, db):
        """log(mass of [x, b] / phi(t0))."""
        with np.errstate(invalid="ignore"):
            if self.right:
                out = log_g(x, db) - 0.5 * da * (2.0 * self.alpha + da)
            else:
                pos = x >= 0.0
                lg = log_g(np.where(pos, x, 0.0), np.where(pos, db, -x))
                out = np.where(pos, lg - 0.5 * x * x, np.logaddexp(self._lg_b, lg))
        return np.where(db == 0.0, -np.inf, out)

    # -- distribution functions (absolute x, 1-D arrays) -------------------------------------------

    def log_tails(self, x_abs):
        """(log P(X <= x), log P(X >= x)) without cancellation on either side."""
        x_abs = np.clip(x_abs, self.a, self.b)
        x, da, db = self.coords(x_abs)
        lo = self.log_mass_below(x, da) - self.log_z
        hi = self.log_mass_above(x, da, db) - self.log_z
        # The smaller tail is accurate; the larger one is 1 - smaller.
        with np.errstate(divide="ignore"):
            log_cdf = np.where(hi < lo, np.log1p(-np.exp(hi)), lo)
            log_sf = np.where(lo < hi, np.log1p(-np.exp(lo)), hi)
        log_cdf = np.minimum(log_cdf, 0.0)
        log_sf = np.minimum(log_sf, 0.0)
        return log_cdf, log_sf

    def logpdf(self, x_abs):
        inside = (x_abs >= self.a) & (x_abs <= self.b)
        x, da, _ = self.coords(np.clip(x_abs, self.a, self.b))
        out = self.log_phi(x, da) - self.log_z - math.log(self.sigma)
        out = np.where(inside, out, -np.inf)
        return np.where(np.isnan(x_abs), np.nan, out)

    def log_prob(self, lo, hi):
        """log P(lo <= X <= hi); the complement is used where the mass is above 1/2."""
        lo = np.clip(lo, self.a, self.b)
        hi = np.clip(hi, self.a, self.b)
        empty = ~(lo < hi)
        hi = np.where(empty, lo, hi)
        xlo, dlo, _ = self.coords(lo)
        xhi, _, _ = self.coords(hi)
        with np.errstate(invalid="ignore", over="ignore"):
            w = np.where(empty, 0.0, (hi - lo) / self.sigma)
        out = self._log_mass_std(xlo, xhi, w, self._u(xlo, dlo)) - self.log_z
        big = out > _LOG_HALF
        if big.any():
            lcdf, _ = self.log_tails(lo[big])
            _, lsf = self.log_tails(hi[big])
            rest = np.exp(lcdf) + np.exp(lsf)
            out[big] = np.where(rest < 0.5, np.log1p(-rest), out[big])
        out = np.minimum(out, 0.0)
        out[empty] = -np.inf
        out[np.isnan(lo) | np.isnan(hi)] = np.nan
        return out

    def bulk(self, log_mass):
        """(lo, hi) in frame coordinates: [x, inf) for x >= hi (and (-inf, x] for x <= lo) holds
        less than exp(log_mass) of the law. From mass([x, inf)) <= phi(x) R(0) / Z,
        R(0) = sqrt(pi/2) the largest Mills ratio, so it is a bound, not an estimate."""
        d = max(0.0, LOG_SQRT_HALF_PI - self.log_z - log_mass)  # x^2 - t0^2 >= 2 d beyond the cut
        if self.right:
            u = 2.0 * d / (self.t0 + math.sqrt(self.t0 * self.t0 + 2.0 * d))
            return self.a, self.a + self.sigma * u * (1.0 + 1e-9) + 4.0 * abs(self.a) * 2.0**-52
        x = math.sqrt(2.0 * d) * (1.0 + 1e-9)
        slack = 4.0 * abs(self.mu) * 2.0**-52
        return self.mu - self.sigma * x - slack, self.mu + self.sigma * x + slack

    # -- quantiles ---------------------------------------------------------------------------------

    def _halley(self, x, da, db, target, upper):
        """Solve log-mass of [a, x] (or [x, b] if upper) == target; x, da, db kept consistent."""
        for _ in range(_HALLEY_STEPS):
            lphi = self.log_phi(x, da)
            if upper:
                lm = self.log_mass_above(x, da, db)
            else:
                lm = self.log_mass_below(x, da)
            f = lm - target
            with np.errstate(invalid="ignore", over="ignore"):
                r = np.exp(lphi - lm)  # d(log-mass)/dx in magnitude: phi(x) / mass
                if upper:
                    den = r - 0.5 * f * (x - r)
                    newton = f / r
                    step = f / den
                else:
                    den = r + 0.5 * f * (x + r)
                    newton = -f / r
                    step = -f / den
            step = np.where((den > 0.5 * r) & np.isfinite(step), step, newton)
            step = np.where(np.isfinite(step), step, 0.0)
            step = np.clip(step, -0.9 * da, 0.9 * db)
            x, da, db = x + step, da + step, db - step
        return x, da, db

    def _to_abs(self, x, da, db):
        """Absolute point from whichever reference (a, b or mu) is nearest, for full precision."""
        fa = np.where(np.isfinite(da), np.abs(da), np.inf)
        fb = np.where(np.isfinite(db), np.abs(db), np.inf)
        fx = np.abs(x)
        with np.errstate(invalid="ignore"):  # inf - inf where a bound is infinite: never chosen
            from_a = self.a + self.sigma * da
            from_b = self.b - self.sigma * db
            from_mu = self.mu + self.sigma * x
        out = np.where((fa <= fb) & (fa <= fx), from_a, np.where(fb <= fx, from_b, from_mu))
        return np.clip(out, self.a, self.b)

    def solve_lower(self, log_p):
        """x with P(a <= X <= x) = exp(log_p), for log_p <= log(1/2)."""
        target = log_p + self.log_z
        k = self.alpha
        # Near a (mass within ~1/|alpha| of it): the density is ~exponential there, invert that.
        log_big = target - self.log_phi(np.array(k), np.array(0.0))  # target mass / phi(alpha)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            near = (log_big + math.log(max(abs(k), 1.0)) <= _LOG_HALF) & np.isfinite(k)
            big = np.exp(log_big)
            d_near = -np.log1p(-k * big) / k if k != 0.0 else big

        # Elsewhere: invert the untruncated tail in log space (ndtri_exp), from Phi_c in a right
        # tail.
        def far(lp):
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                if self.right:
                    lc = sc.log_ndtr(-k) + np.log1p(-np.exp(lp + self.log_z - log_mills(k)))
                    return -sc.ndtri_exp(lc)
                return sc.ndtri_exp(np.logaddexp(sc.log_ndtr(k), lp + self.log_z - LOG_SQRT_2PI))

        x_far = _where_not(near, far, log_p)
        with np.errstate(invalid="ignore"):
            x = np.where(near, k + d_near, x_far)
            da = np.where(near, d_near, x_far - k)
            db = np.where(near, self.width - d_near, self.beta - x_far)
        da, db, x = self._into(da, db, x)
        return self._to_abs(*self._halley(x, da, db, target, upper=False))

    def solve_upper(self, log_q):
        """x with P(x <= X <= b) = exp(log_q), for log_q <= log(1/2)."""
        target = log_q + self.log_z
        k = self.beta
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            lphi_b = (-0.5 * self.width * (2.0 * self.alpha + self.width) if self.right
                      else -0.5 * k * k)
            log_big = target - lphi_b
            near = (log_big + math.log(max(abs(k), 1.0)) <= _LOG_HALF) & np.isfinite(k)
            big = np.exp(log_big)
            d_near = np.log1p(k * big) / k if k != 0.0 else big
        lz_abs = self.log_z - 0.5 * self.t0 * self.t0 - LOG_SQRT_2PI

        def far(lq):
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return -sc.ndtri_exp(np.logaddexp(sc.log_ndtr(-k), lq + lz_abs))

        x_far = _where_not(near, far, log_q)
        with np.errstate(invalid="ignore"):
            x = np.where(near, k - d_near, x_far)
            db = np.where(near, d_near, k - x_far)
            da = np.where(near, self.width - d_near, x_far - self.alpha)
        da, db, x = self._into(da, db, x)
        return self._to_abs(*self._halley(x, da, db, target, upper=True))

    def _into(self, da, db, x):
        """Pull initial guesses strictly inside the interval, keeping the three offsets
        consistent."""
        tiny = 1e-300
        lift = np.where(da <= 0.0, tiny - da, 0.0)
        drop = np.where(db <= 0.0, tiny - db, 0.0)
        shift = np.where(np.isfinite(lift), lift, 0.0) - np.where(np.isfinite(drop), drop, 0.0)
        return da + shift, db - shift, x + shift

    # -- moments -----------------------------------------------------------------------------------

    @functools.cached_property
    def moments(self):
        """(mean, standardized central moments mu_0..mu_8, kappa_4 = mu_4 - 3 mu_2^2) in sigma
        units."""
        lam = ((self.a - self.mu) + (self.b - self.mu)) / (2.0 * self.sigma)
        h = 0.5 * self.width
        if h <= _CENTRED_MAX_HALF_WIDTH and abs(lam) * h <= _CENTRED_MAX_TILT:
            return self._moments_centred(lam, h)
        if not self.right and min(-self.alpha, self.beta) >= _GAUSS_MIN_CUT:
            return self._moments_gauss()
        return self._moments_direct()

    def _moments_centred(self, lam, h):
        """Quadrature about the window's centre c: density of t = X - c is exp(-lam t - t^2/2).

        Folding t and -t gives cosh/sinh integrands, so odd moments come out relative-accurate
        even when the tilt lam * width is 1e-11 (a 1e-12-sigma window at 40 sigma).
        """
        panels = max(1, math.ceil((abs(lam) + h) * h / 1.5))
        t, wt = _panel_nodes(np.linspace(0.0, h, panels + 1))
        base = wt * np.exp(-0.5 * t * t)
        even = base * np.cosh(lam * t)
        odd = -base * np.sinh(lam * t)
        norm = even.sum()
        raw = [1.0] + [float(((even if j % 2 == 0 else odd) * t**j).sum() / norm)
                       for j in range(1, 9)]
        m = raw[1]
        mu = _binomial_central(raw, m)
        centre = self.a + 0.5 * (self.b - self.a)
        return centre + self.sigma * m, mu, mu[4] - 3.0 * mu[2] ** 2

    def _moments_direct(self):
        """Quadrature in u = x - t0 on panels of equal log-density drop, central moments in 2
        passes.

        For laws whose mean sits far from the window's centre (one-sided tails, lopsided windows):
        no moment is small there, so direct sums (u - mean)^k lose nothing.
        """
        t0 = self.t0
        u_hi = self.beta - t0 if not self.right else self.width
        edges = [self._drop_edges(t0, u_hi)]
        if not self.right:
            edges.insert(0, -self._drop_edges(0.0, -self.alpha)[::-1])
        u, wt = _panel_nodes(np.unique(np.concatenate(edges)))
        dens = wt * np.exp(-0.5 * u * (2.0 * t0 + u))
        norm = dens.sum()
        m = float((dens * u).sum() / norm)
        d = u - m
        mu = np.zeros(MAX_MOMENT + 1)
        term = dens.copy()
        for k in range(1, MAX_MOMENT + 1):  # dens d^k by products (d**k is a pow per node)
            term *= d
            mu[k] = float(term.sum() / norm)
        mu[0], mu[1] = 1.0, 0.0
        anchor = self.a if self.right else self.mu
        return anchor + self.sigma * m, mu, mu[4] - 3.0 * mu[2] ** 2

    @staticmethod
    def _drop_edges(t0, u_end):
        """Points 0 = u_0 < u_1 < ... where u (2 t0 + u) / 2 grows by 1 per panel, up to u_end."""
        drop = 0.5 * u_end * (2.0 * t0 + u_end) if math.isfinite(u_end) else math.inf
        top = min(drop, _DIRECT_MAX_DROP)
        v = np.linspace(0.0, top, max(1, math.ceil(top)) + 1)
        edges = np.zeros_like(v)
        edges[1:] = 2.0 * v[1:] / (t0 + np.sqrt(t0 * t0 + 2.0 * v[1:]))
        if drop <= _DIRECT_MAX_DROP:
            edges[-1] = u_end
        return edges

    def _moments_gauss(self):
        """Wide windows around the mean: raw moments as Gaussian moments minus boundary terms.

        T_j = (beta^j phi(beta) - alpha^j phi(alpha)) / Z are small here, and kappa_4 is written in
        them directly, so a kurtosis of -1e-19 at +-10 sigma keeps its relative accuracy.
        """
        al, be = self.alpha, self.beta
        ra = math.exp(-0.5 * al * al - self.log_z) if math.isfinite(al) else 0.0
        rb = math.exp(-0.5 * be * be - self.log_z) if math.isfinite(be) else 0.0
        T = np.zeros(MAX_MOMENT)
        if math.isfinite(al) and math.isfinite(be):
            # Pair the two bounds: beta^j e^-D - alpha^j with D = (beta^2 - alpha^2)/2 exact.
            s = ((self.a - self.mu) + (self.b - self.mu)) / self.sigma  # beta + alpha
            dd = 0.5 * self.width * s
            lr = math.log1p(s / -al)  # log(beta / |alpha|)
            for j in range(MAX_MOMENT):
                if j % 2 == 0:
                    T[j] = ra * abs(al) ** j * math.expm1(j * lr - dd)
                else:
                    T[j] = ra * (be**j * math.exp(-dd) + abs(al) ** j)
        else:
            for j in range(MAX_MOMENT):
                T[j] = (be**j * rb if rb else 0.0) - (al**j * ra if ra else 0.0)
        raw = np.zeros(MAX_MOMENT + 1)
        raw[0], raw[1] = 1.0, -T[0]
        for k in range(2, MAX_MOMENT + 1):
            raw[k] = (k - 1) * raw[k - 2] - T[k - 1]
        m = raw[1]
        mu = _binomial_central(raw, m)
        t0, t1, t2, t3 = T[:4]
        k4 = 3 * t1 - t3 - 3 * t1**2 + 4 * t0**2 - 4 * t0 * t2 - 12 * t1 * t0**2 - 6 * t0**4
        return self.mu + self.sigma * m, mu, k4
