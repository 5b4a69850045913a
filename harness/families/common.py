"""Small numerical helpers shared by the statistic families' checks (numpy/scipy only, no torch).

Conventions used by every check:

* p-values are clipped to [0, 1]; a component that cannot be evaluated is left out of the
  Bonferroni combination instead of producing NaN.
* The minimum detectable effect (MDE) is the effect size that the *combined* check (Bonferroni
  factor included) detects with probability 0.5 at level ``alpha``: the effect that puts the
  statistic's expected (median) value exactly on the critical value.

`common` names the shared module of its package, here the families' (the checks and the diagnosis
read it too), as `candidates.libraries.common` is the library adapters'.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats

from ..result import Outcome

#: Seed of the fixed generator behind randomized probability-integral transforms. Mixed with a
#: hash of the data so that verdicts are deterministic for given samples and the randomization
#: still differs between stage 1 and stage 2.
PIT_SEED = 0x7E57_5EED


def quiet(check):
    """Run a check with numpy's floating-point warnings off: every inf/NaN a check can meet (tail
    masses that underflow, log(0) for values outside the support, the law's own log-space
    arithmetic) is handled explicitly, and a check must not spray warnings on degenerate inputs."""

    @functools.wraps(check)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return check(*args, **kwargs)

    return wrapper


def clip_p(p) -> float:
    p = float(p)
    if math.isnan(p):  # defensive: callers never pass NaN for an applicable component
        return 1.0
    return min(1.0, max(0.0, p))


def bonferroni(ps) -> tuple[float, int]:
    """min(1, K * min p) over the K finite p-values; (1.0, 0) when there are none."""
    ps = np.asarray([p for p in ps if p is not None and not math.isnan(p)], dtype=np.float64)
    if ps.size == 0:
        return 1.0, 0
    return clip_p(ps.size * ps.min()), int(np.argmin(ps))


def binom_two_sided(k, n, p) -> np.ndarray:
    """Exact two-sided binomial p-value by doubling the smaller tail: min(1, 2 min(P(X<=k), P(X>=k))).

    Vectorized over k/n/p. A valid (slightly conservative, never anti-conservative) exact test that
    works for any n (scipy's incomplete beta) and for p in {0, 1}: an observation impossible under
    the law gets p = 0.
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    with np.errstate(all="ignore"):
        lower = stats.binom.cdf(k, n, p)  # P(X <= k)
        upper = stats.binom.sf(k - 1, n, p)  # P(X >= k)
    out = np.minimum(1.0, 2.0 * np.minimum(lower, upper))
    # Degenerate p: binom handles p=0/1 but be explicit (k is an integer count in [0, n]).
    out = np.where((p <= 0) & (k > 0), 0.0, out)
    out = np.where((p >= 1) & (k < n), 0.0, out)
    out = np.where(n <= 0, 1.0, out)
    return np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0)


def binom_upper(k, n, p) -> np.ndarray:
    """One-sided P(X >= k), X ~ Bin(n, p); 0 for k > 0 when p = 0."""
    k = np.asarray(k, dtype=np.float64)
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    with np.errstate(all="ignore"):
        out = stats.binom.sf(k - 1, n, p)
    out = np.where(k <= 0, 1.0, out)
    out = np.where((p <= 0) & (k > 0), 0.0, out)
    return np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0)


def binom_mde_ratio(n: float, p: float, level: float, upward: bool = True) -> float:
    """Ratio obs/exp of a Bin(n, p) count that a two-sided level-`level` doubled-tail test detects
    with probability ~0.5: the critical count divided by n p (power 0.5 when the true mean sits on
    the critical count). Upward: the smallest k with 2 P(X >= k) <= level; downward: the largest k
    with 2 P(X <= k) <= level (NaN when no count is low enough, e.g. n p small)."""
    mean = n * p
    if not (mean > 0) or n <= 0:
        return math.inf if upward else math.nan
    if upward:
        k = stats.binom.isf(level / 2, n, p) + 1  # smallest k with P(X >= k) <= level/2
        return float(k / mean) if k <= n else math.nan  # nan: no count is high enough
    k = stats.binom.ppf(level / 2, n, p)  # smallest k with P(X <= k) >= level/2
    if stats.binom.cdf(k, n, p) > level / 2:
        k -= 1  # the largest k with P(X <= k) <= level/2
    if k < 0:
        return math.nan
    return float(k / mean)


def norm_two_sided(z) -> np.ndarray:
    z = np.abs(np.asarray(z, dtype=np.float64))
    return np.clip(2.0 * stats.norm.sf(z), 0.0, 1.0)


def z_crit(level: float) -> float:
    """Two-sided normal critical value at `level`."""
    return float(stats.norm.isf(level / 2))


def ks_pvalue(d: float, n: int) -> float:
    """Two-sided one-sample KS p-value for statistic d with n observations.

    Exact (scipy.stats.kstwo) up to 20000 observations, Kolmogorov's limit (kstwobign) above: the
    limit is conservative (larger p) at every n and within 0.5 % of the exact value at 1e-3 for
    n >= 1e4; the exact law costs seconds per call at n = 1e6.
    """
    if n <= 0 or not (d > 0):
        return 1.0
    if n <= 20000:
        return clip_p(stats.kstwo.sf(d, n))
    return clip_p(stats.kstwobign.sf(d * math.sqrt(n)))


def ks_crit(level: float, n: int) -> float:
    """The KS statistic at which ks_pvalue == level."""
    if n <= 0:
        return math.inf
    if n <= 20000:
        return float(stats.kstwo.isf(level, n))
    return float(stats.kstwobign.isf(level) / math.sqrt(n))


def not_applicable(reason: str, unit: str = "") -> Outcome:
    return Outcome(statistic=math.nan, p_value=1.0, effect=math.nan, effect_unit=unit,
                   mde=math.nan, message=f"not applicable: {reason}", applicable=False)


def fmt_value(v: float) -> str:
    return f"{v:.6g}"


def bins_label(law, k0: int, k1: int) -> str:
    """Value range covered by histogram bins k0..k1 (inclusive)."""
    try:
        lo, hi = law.fmt.hist_bin_bounds()  # cached by the format
        v0, v1 = float(lo[k0]), float(hi[k1])
        if not math.isfinite(v0) or not math.isfinite(v1):
            # NaN bounds: bins without finite values (inf / NaN bit patterns)
            low = k1 < lo.size // 2
            if k0 == k1:
                fmt = law.fmt
                shift = fmt.bits - fmt.hist_bits
                first = float(fmt.values_from_keys(np.array([k0 << shift], dtype=np.uint64))[0])
                last = float(fmt.values_from_keys(np.array([((k0 + 1) << shift) - 1], dtype=np.uint64))[0])
                if first == last and math.isinf(first):
                    return "+inf" if first > 0 else "-inf"
                if np.isnan(first) and np.isnan(last):
                    return "-NaN bit patterns" if low else "+NaN bit patterns"
                return "-inf/-NaN bit patterns" if low else "+inf/+NaN bit patterns"
            if low:
                return "-inf/-NaN bit patterns" if np.isnan(v1) else f"[-inf, {fmt_value(v1)}]"
            return "+inf/+NaN bit patterns" if np.isnan(v0) else f"[{fmt_value(v0)}, +inf]"
        if v0 == v1:
            return fmt_value(v0)
        return f"[{fmt_value(v0)}, {fmt_value(v1)}]"
    except Exception:  # labels must never break a check
        return f"bins {k0}..{k1}"


#: `cached_on_law` without a key: the whole attribute is the value.
_WHOLE = object()


def cached_on_law(law, attr: str, build, key=_WHOLE):
    """``build(law)``, cached as the law's attribute `attr` (a law is immutable and shared by every
    check of a case); computed afresh for a law that takes no attributes. With `key`, one value
    per key (None included) in a dict that attribute holds."""
    if key is _WHOLE:
        cache = getattr(law, attr, None)
        if cache is None:
            cache = build(law)
            _keep(law, attr, cache)
        return cache
    held = getattr(law, attr, None)
    if held is None:
        held = {}
        _keep(law, attr, held)
    if key not in held:
        held[key] = build(law)
    return held[key]


def _keep(law, attr: str, value) -> None:
    try:
        setattr(law, attr, value)
    except Exception:
        pass


class LawBins:
    """The bins the fit checks (gof, ks, tails) compare, with the law's mass of each.

    Normally the Summary's main histogram (ordered-key bins, `law.hist_bin_probs()`). For a
    narrow 32/64-bit law (`law.fine_bins`, e.g. [8, 8.01] in float64, which the main bins see as
    one bin) the fine bins instead, with one bin for everything below the support and one for
    everything above (both of law mass 0). Bins increase with the value either way."""

    def __init__(self, law):
        self.law = law
        self.fine = getattr(law, "fine_bins", None) is not None
        if self.fine:
            self.probs = np.concatenate([[0.0], law.fine_bin_probs(), [0.0]])
            self._lo, self._hi = law.fine_bin_bounds()
        else:
            self.probs = np.asarray(law.hist_bin_probs(), dtype=np.float64)

    @classmethod
    def of(cls, law) -> "LawBins":
        return cached_on_law(law, "_stat_law_bins", cls)

    @functools.cached_property
    def cdf(self) -> np.ndarray:
        """The law's CDF at the top of every bin, normalized to end at 1 (read-only): each
        stage's ks check reads it."""
        cdf = np.cumsum(self.probs)
        cdf /= cdf[-1] if cdf[-1] > 0 else 1.0
        cdf.setflags(write=False)
        return cdf

    def counts(self, summary) -> np.ndarray:
        if not self.fine:
            return np.asarray(summary.binned.hist, dtype=np.int64)
        if summary.binned.fine_hist is None:
            raise ValueError("the law has fine bins but the Summary was folded without them")
        return np.asarray(summary.binned.fine_hist, dtype=np.int64)

    def label(self, k0: int, k1: int | None = None) -> str:
        """Value range of bins k0..k1 (inclusive)."""
        k1 = k0 if k1 is None else k1
        if not self.fine:
            return bins_label(self.law, k0, k1)
        last = self.probs.size - 1
        if k1 == 0:
            return f"below {fmt_value(self._lo[0])}"
        if k0 == last:
            return f"above {fmt_value(self._hi[-1])}"
        v0 = "below" if k0 == 0 else fmt_value(self._lo[k0 - 1])
        v1 = "above" if k1 == last else fmt_value(self._hi[k1 - 1])
        return v0 if v0 == v1 else f"[{v0}, {v1}]"


def data_seed(*arrays) -> np.random.Generator:
    """A generator seeded from PIT_SEED and a hash of the data (deterministic per data)."""
    import zlib

    h = 0
    for a in arrays:
        h = zlib.crc32(np.ascontiguousarray(a).view(np.uint8), h)
    return np.random.default_rng([PIT_SEED, h])
