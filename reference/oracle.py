"""The judge: the truncated normal law in mpmath at configurable precision (slow, exact enough).

`Oracle(mean, std, a, b, dps=50)` mirrors the API of `reference.TruncatedNormal` (cdf, sf, pdf,
prob, log_prob, ppf, isf, mean, var, std, skewness, kurtosis, central_moment, min_cdf, max_sf) and
returns mpmath ``mpf`` values correct to about ``dps`` significant digits. The float parameters are
taken exactly (every float64 is an mpf), so the oracle answers for the very law the float module
was asked about, including the rounding of ``a``, ``b`` and ``std``.

It is independent of the float module's algorithms: masses are differences of ``erfc`` with the
working precision raised until the cancellation is paid for, moments come from the textbook
recurrence on raw moments evaluated at whatever precision makes two evaluations agree, and
quantiles from Newton's method on the exact CDF. Used by the tests and by anyone auditing a
surprising verdict. Refuses to run below 30 digits.
"""

from __future__ import annotations

import math

import mpmath
from mpmath import mp, mpf

__all__ = ["Oracle", "MIN_DPS"]

MIN_DPS = 30
_GUARD = 20  # digits beyond dps for intermediate results


def _check_dps(dps):
    if int(dps) != dps or dps < MIN_DPS:
        raise ValueError(f"Oracle: dps must be an integer >= {MIN_DPS}, got {dps!r}")
    return int(dps)


class Oracle:
    """TN(mean, std, a, b) in mpmath. All methods take floats (or mpf) and return mpf."""

    def __init__(self, mean, std, a, b, dps=50):
        self.dps = _check_dps(dps)
        mean, std, a, b = (float(v) for v in (mean, std, a, b))
        if any(math.isnan(v) for v in (mean, std, a, b)):
            raise ValueError("Oracle: parameters must not be NaN")
        if not (math.isfinite(mean) and math.isfinite(std) and std > 0 and a < b):
            raise ValueError("Oracle: need finite mean, finite std > 0 and a < b")
        self.params = (mean, std, a, b)
        self._moment_cache = None

    # -- helpers -----------------------------------------------------------------------------------

    def _prec(self, extra=0):
        return mp.workdps(self.dps + _GUARD + extra)

    def _std(self, x):
        """Standardized point, exact to the working precision (inf stays inf)."""
        mean, std, _, _ = self.params
        x = mpf(x)
        if mpmath.isinf(x):
            return x
        return (x - mpf(mean)) / mpf(std)

    @staticmethod
    def _phic(x):
        return mpmath.erfc(x / mpmath.sqrt(2)) / 2

    def _mass(self, x, y):
        """N(0,1) mass of [x, y] (standardized, exact inputs), precision raised on cancellation."""
        if not x < y:
            return mpf(0)
        base = max(mp.dps, self.dps + _GUARD)  # callers may already work at higher precision
        extra = 0
        while True:
            with mp.workdps(base + extra):
                if x >= 0:
                    big, small = self._phic(x), self._phic(y)
                elif y <= 0:
                    big, small = self._phic(-y), self._phic(-x)
                else:
                    return +(1 - self._phic(y) - self._phic(-x))
                m = big - small
                if m > 0:
                    lost = int(mpmath.log10(big / m)) + 1
                    if lost <= extra + _GUARD // 2:
                        return +m
                    extra = lost + _GUARD
                else:
                    extra = 2 * extra + 50
                if extra > 20000:
                    raise ArithmeticError("Oracle: cannot resolve a mass this narrow")

    def _mass_abs(self, lo, hi):
        """N(0,1) mass between absolute points lo < hi (floats or exact mpf; +-inf allowed).

        The points are standardized at a precision that resolves their distance, so a window of
        1e-300 sigma next to 10 sigma keeps all its digits.
        """
        mean, std, _, _ = self.params
        lo, hi = mpf(lo), mpf(hi)
        if not lo < hi:
            return mpf(0)
        digits = 0
        if mpmath.isfinite(lo) and mpmath.isfinite(hi):
            span = abs(mpmath.fsub(lo, mean, exact=True)) + abs(mpmath.fsub(hi, mean, exact=True))
            width = mpmath.fsub(hi, lo, exact=True)
            with mp.workdps(30):
                digits = max(0, int(mpmath.ceil(mpmath.log10(span / width))))
        with mp.workdps(max(mp.dps, self.dps + _GUARD) + digits):
            x = lo if mpmath.isinf(lo) else mpmath.fsub(lo, mean, exact=True) / std
            y = hi if mpmath.isinf(hi) else mpmath.fsub(hi, mean, exact=True) / std
            return self._mass(x, y)

    def _bounds(self):
        _, _, a, b = self.params
        return self._std(a), self._std(b)

    def _z(self):
        _, _, a, b = self.params
        return self._mass_abs(a, b)

    # -- distribution functions --------------------------------------------------------------------

    def prob(self, lo, hi):
        """P(lo <= X <= hi), bounds clipped to [a, b]."""
        _, _, a, b = self.params
        with self._prec():  # mpf(x) rounds to the context's precision: an mpf end keeps its digits here
            lo, hi = max(mpf(lo), mpf(a)), min(mpf(hi), mpf(b))
            if not lo < hi:
                return mpf(0)
            return self._mass_abs(lo, hi) / self._z()

    def log_prob(self, lo, hi):
        p = self.prob(lo, hi)
        with self._prec():
            return mpmath.log(p) if p > 0 else mpf("-inf")

    def cdf(self, x):
        _, _, a, _ = self.params
        return self.prob(a, x)

    def sf(self, x):
        _, _, _, b = self.params
        return self.prob(x, b)

    def logcdf(self, x):
        """log P(X <= x); through the upper tail when that is the smaller one (1 - 1e-200 is not
        representable at any sensible precision, -1e-200 is)."""
        with self._prec():
            s = self.sf(x)
            return mpmath.log1p(-s) if s < 0.5 else mpmath.log(self.cdf(x))

    def logsf(self, x):
        with self._prec():
            c = self.cdf(x)
            return mpmath.log1p(-c) if c < 0.5 else mpmath.log(self.sf(x))

    def pdf(self, x):
        _, std, a, b = self.params
        if not a <= mpf(x) <= b:
            return mpf(0)
        with self._prec():
            return mpmath.npdf(self._std(x)) / (mpf(std) * self._z())

    def min_cdf(self, x, m):
        """P(min of m iid <= x) = 1 - sf(x)^m."""
        with self._prec():
            return -mpmath.expm1(mpf(m) * self.logsf(x))

    def max_sf(self, x, m):
        """P(max of m iid > x) = 1 - cdf(x)^m."""
        with self._prec():
            return -mpmath.expm1(mpf(m) * self.logcdf(x))

    # -- quantiles ---------------------------------------------------------------------------------

    def ppf(self, p, x0=None):
        """x with P(X <= x) = p; Newton on the log of the smaller tail. x0: optional start."""
        return self._quantile(mpf(p), x0, lower=True)

    def isf(self, q, x0=None):
        """x with P(X > x) = q."""
        return self._quantile(mpf(q), x0, lower=False)

    def _quantile(self, p, x0, lower):
        """Newton on the log of the smaller tail's mass, in absolute units, at a precision that
        resolves the answer's distance from the bound the tail is measured from."""
        mean, std, a, b = self.params
        if not 0 <= p <= 1:
            return mpf("nan")
        if p == 0:
            return mpf(a if lower else b)
        if p == 1:
            return mpf(b if lower else a)
        with self._prec(10):
            if p > mpf(1) / 2:  # work with the smaller tail
                p, lower = 1 - p, not lower
            target = mpmath.log(p * self._z())
            end = mpf(a if lower else b)
            sign = 1 if lower else -1

            def f(x):
                m = self._mass_abs(a, x) if lower else self._mass_abs(x, b)
                if m == 0:
                    return mpf("-inf"), mpf(1)
                return mpmath.log(m) - target, sign * mpmath.npdf((x - mean) / std) / (std * m)

            x = mpf(x0) if x0 is not None else None
            if x is None or not a < x < b:
                x = self._bracket(f, lower)
            tol = mpf(10) ** (-(self.dps + 5))
            for _ in range(100):
                gap = abs(x - end) if mpmath.isfinite(end) else abs(x) + std
                digits = max(0, int(mpmath.log10((abs(end) if mpmath.isfinite(end) else 0) / gap + 1)))
                with mp.workdps(mp.dps + digits):
                    val, der = f(x)
                    new = x - val / der if mpmath.isfinite(val) else x + sign * gap  # no mass yet: move in
                    if not mpf(a) < new < mpf(b):  # keep inside: go halfway to the bound instead
                        new = (x + (mpf(a) if new <= a else mpf(b))) / 2
                    done = abs(new - x) <= tol * gap
                    x = new
                if done or not mpf(a) < x < mpf(b):
                    break
            return x

    def _bracket(self, f, lower):
        """A start point for Newton, by 200 bisections of a bracket holding every p > 1e-1000.

        Bisection is geometric in the offset from the bound the tail is measured from, so tiny
        tail quantiles (offsets of 1e-300 sigma) are found as easily as central ones.
        """
        mean, std, a, b = self.params
        end, other = (a, b) if lower else (b, a)
        sign = 1 if lower else -1
        if math.isfinite(end):
            span = abs(other - end) if math.isfinite(other) else std * (abs(end - mean) / std + 80)
            lo, hi = mpf(10) ** -1100 * span, mpf(span)
            for _ in range(200):
                mid = mpmath.sqrt(lo * hi)
                if f(mpmath.fadd(end, sign * mid, exact=True))[0] < 0:
                    lo = mid
                else:
                    hi = mid
            return mpmath.fadd(end, sign * mpmath.sqrt(lo * hi), exact=True)
        if lower:  # a = -inf: every p > 1e-1000 lies within 80 sigma left of min(b, mean)
            lo, hi = mpf(min(b, mean)) - 80 * std, mpf(min(b, mean + 80 * std))
        else:
            lo, hi = mpf(max(a, mean - 80 * std)), mpf(max(a, mean)) + 80 * std
        for _ in range(200):
            mid = (lo + hi) / 2
            if (f(mid)[0] < 0) == lower:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    # -- moments -----------------------------------------------------------------------------------

    def _central_std(self, extra):
        """Standardized central moments mu_0..mu_8 and the mean offset, at dps + extra digits."""
        with mp.workdps(self.dps + _GUARD + extra):
            al, be = self._bounds()
            z = self._mass(al, be)

            def term(x, j):
                return mpf(0) if mpmath.isinf(x) else x**j * mpmath.npdf(x)

            t = [(term(be, j) - term(al, j)) / z for j in range(8)]
            raw = [mpf(1), -t[0]]
            for k in range(2, 9):
                raw.append((k - 1) * raw[k - 2] - t[k - 1])
            m = raw[1]
            mu = [mpmath.fsum(mpmath.binomial(k, j) * raw[j] * (-m) ** (k - j) for j in range(k + 1)) for k in range(9)]
            mu[1] = mpf(0)
            return m, mu

    def _moments(self):
        """Raw-moment recurrence; precision raised until two evaluations agree to dps + 5 digits."""
        if self._moment_cache is None:
            extra = 40
            prev = self._central_std(extra)
            while True:
                extra = 2 * extra
                cur = self._central_std(extra)
                with mp.workdps(self.dps + _GUARD):
                    ok = all(
                        abs(c - p) <= mpf(10) ** -(self.dps + 5) * abs(c) for c, p in zip(cur[1], prev[1]) if c != 0
                    ) and abs(cur[0] - prev[0]) <= mpf(10) ** -(self.dps + 5) * (abs(cur[0]) + mpmath.sqrt(cur[1][2]))
                if ok or extra > 4000:
                    break
                prev = cur
            self._moment_cache = cur
        return self._moment_cache

    @property
    def mean(self):
        mean, std, _, _ = self.params
        m, _ = self._moments()
        with self._prec():
            return mpf(mean) + mpf(std) * m

    def central_moment(self, k):
        if int(k) != k or not 0 <= k <= 8:
            raise ValueError(f"Oracle.central_moment: k must be an integer in [0, 8], got {k!r}")
        _, std, _, _ = self.params
        _, mu = self._moments()
        with self._prec():
            return mu[int(k)] * mpf(std) ** int(k)

    @property
    def var(self):
        return self.central_moment(2)

    @property
    def std(self):
        with self._prec():
            return mpmath.sqrt(self.var)

    @property
    def skewness(self):
        _, mu = self._moments()
        with self._prec():
            return mu[3] / mu[2] ** mpf(1.5)

    @property
    def kurtosis(self):
        _, mu = self._moments()
        with self._prec():
            return mu[4] / mu[2] ** 2 - 3

    def moments_by_quadrature(self):
        """(mean offset, mu_2, mu_3, mu_4) standardized, by mpmath.quad in offsets from the centre.

        A second, independent route used to audit the recurrence in `_moments`.
        """
        with self._prec(20):
            al, be = self._bounds()
            if not (mpmath.isfinite(al) and mpmath.isfinite(be)):
                raise ValueError("moments_by_quadrature needs finite bounds")
            c, h = (al + be) / 2, (be - al) / 2
            pts = [-h + 2 * h * i / 16 for i in range(17)]

            def integ(fn):
                return mpmath.quad(lambda t: fn(t) * mpmath.exp(-c * t - t * t / 2), pts)

            z = integ(lambda t: 1)
            m = integ(lambda t: t) / z
            return (c + m,) + tuple(integ(lambda t, k=k: (t - m) ** k) / z for k in (2, 3, 4))
