"""`check_independence`: lag-1 correlation along every dimension of the filled tensor, correlation
between successive calls, bit-identical elements between successive calls, and duplicate rows.

Under H0 every element is an independent draw of the law, so for each correlation component
sqrt(pairs) * r -> N(0, 1) (Bartlett: overlapping lag-1 pairs of an iid sequence have the same
asymptotic variance as independent pairs). An element equals the same element of the previous call
with probability q = sum p_v^2 over the values v; the count is binomial up to the weak dependence of
overlapping pairs (call t-1, t) and (t, t+1), whose variance term 2 (sum p^3 - q^2) is added when
the per-value masses are known and it matters. Two rows of m elements are equal with probability
q^m, so a call with R rows has C(R, 2) q^m duplicate pairs on average; the count of rows equal to an
earlier row of their call is then Poisson (tested one-sided: duplicates are the defect).

q is that of the candidate's own marginal where the Summary counts every value apart (<= 16-bit
dtypes; narrow 32/64-bit laws with single-value fine bins): the unbiased estimate
sum c(c-1) / (n(n-1)). So these components test dependence, not the marginal; a wrong marginal is
the business of gof, atoms and the others, and used to show here too (torch's large-mean bf16). Its
noise is negligible next to the count's (relative 2 sqrt((sum p^3 - q^2) / n) / q against
1 / sqrt(n q)). Elsewhere q is the law's, with its boundary atoms (the usual suspects) replaced by
their observed frequencies.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..result import Outcome
from ..summary import LagSums, Summary
from .stat_common import (binom_mde_ratio, binom_two_sided, binom_upper, bonferroni, clip_p,
                          norm_two_sided, not_applicable, quiet, z_crit)

#: The Poisson approximation for duplicate rows is used while a call expects at most this many
#: duplicate pairs (beyond it, triples and the q^m approximation of "equal to an earlier row" drift).
DUP_POISSON_MAX_PER_CALL = 0.05


def _observed_collisions(counts: np.ndarray) -> tuple[float, float] | None:
    """Unbiased estimates of (sum p^2, sum p^3) from per-value counts."""
    n = float(counts.sum())
    if n < 3:
        return None
    c = counts[counts > 1].astype(np.float64)
    q = float(np.sum(c * (c - 1))) / (n * (n - 1))
    s3 = float(np.sum(c * (c - 1) * (c - 2))) / (n * (n - 1) * (n - 2))
    return q, s3


def collision_rates(summary: Summary, law) -> tuple[float, float | None, str]:
    """(q, sum p^3 or None, where q comes from) for the equal-element and duplicate-row
    components (see the module docstring)."""
    fine = summary.fine_bins
    if summary.hist is not None and summary.hist_bits <= 16:
        est = _observed_collisions(np.asarray(summary.hist, dtype=np.int64))
    elif fine is not None and fine[1] == 0 and summary.fine_hist is not None:
        est = _observed_collisions(np.asarray(summary.fine_hist, dtype=np.int64)[1:-1])
    else:
        est = None
    if est is not None:
        return est[0], est[1], "the output's own marginal"
    q = float(law.collision_prob)
    n = int(summary.n)
    if n > 0 and 0 < q < 1:
        atoms = {(float(law.rn_a), float(law.atom_a), int(summary.n_at_rn_a)),
                 (float(law.rn_b), float(law.atom_b), int(summary.n_at_rn_b))}
        for _, mass, count in atoms:
            q += (count / n) ** 2 - mass**2
        q = min(max(q, 0.0), 1.0)
    return q, None, "the law, boundary atoms as observed"


def _components(summary: Summary, law, alpha: float):
    """[(name, p, effect, unit, mde, text)] of every applicable component."""
    comps = []
    degenerate = not (float(law.std) > 0)
    shape = tuple(summary.shape)

    # -- correlations
    corr = [(f"lag-1 along dim {d}", s) for d, s in sorted(summary.lag1.items())]
    corr.append(("successive calls", summary.successive))
    if not degenerate:
        for name, s in corr:
            s = s if isinstance(s, LagSums) else LagSums(**s)
            r = s.correlation()
            if s.count < 3 or not math.isfinite(r):
                continue
            z = math.sqrt(s.count) * r
            comps.append([name, float(norm_two_sided(z)), r, "correlation r", s.count,
                          f"{name}: r {r:+.4g} over {s.count} pairs (z {z:+.2f})"])

    # -- bit-identical elements in successive calls
    q, s3, q_source = collision_rates(summary, law)
    n_pairs, k_eq = int(summary.n_pairs_successive), int(summary.n_equal_successive)
    if n_pairs > 0 and q < 1.0:
        exact_q = s3 is not None
        exp = n_pairs * q
        if exact_q:
            numel = max(1, math.prod(shape)) if shape else 1
            overlapping = max(0, n_pairs - numel)  # pairs (t-1, t) followed by (t, t+1)
            var = n_pairs * q * (1 - q) + 2.0 * overlapping * (s3 - q * q)
            if var > 1.01 * n_pairs * q * (1 - q):
                z = (k_eq - exp) / math.sqrt(var)
                p_eq = float(norm_two_sided(z))
            else:
                p_eq = float(binom_two_sided(k_eq, n_pairs, q))
        else:
            # q is not exact above 16 bits: only an excess of repeats is evidence
            p_eq = float(binom_upper(k_eq, n_pairs, q))
        ratio = k_eq / exp if exp > 0 else (math.inf if k_eq else 1.0)
        comps.append(["equal elements in successive calls", p_eq, ratio, "obs/exp", ("binom", n_pairs, q),
                      f"equal elements in successive calls: {k_eq} of {n_pairs} vs {exp:.4g} "
                      f"expected (q from {q_source})"])

    # -- duplicate rows within a call
    m = int(summary.row_len)
    rows_per_call = math.prod(shape[:-1]) if len(shape) >= 2 else 1
    n_rows = int(summary.n_rows_compared)
    if m >= 2 and rows_per_call >= 2 and n_rows > 0 and 0 < q < 1.0:
        calls = n_rows / rows_per_call
        log_qm = m * math.log(q)
        per_call = rows_per_call * (rows_per_call - 1) / 2 * math.exp(log_qm)
        if per_call <= DUP_POISSON_MAX_PER_CALL:
            lam = calls * per_call
            k_dup = int(summary.n_duplicate_rows)
            comps.append(poisson_count_component(
                "duplicate rows", k_dup, lam,
                f"duplicate rows: {k_dup} of {n_rows} rows vs {lam:.3g} expected"))
    elif m >= 2 and rows_per_call >= 2 and n_rows > 0 and q <= 0:
        k_dup = int(summary.n_duplicate_rows)
        comps.append(["duplicate rows", 0.0 if k_dup else 1.0, math.inf if k_dup else 1.0,
                      "obs/exp", ("poisson", 0.0),
                      f"duplicate rows: {k_dup} of {n_rows} rows vs 0 expected"])
    return comps


def poisson_count_component(name: str, k: int, lam: float, text: str) -> tuple:
    """A component for a count that is Poisson(lam) under the null (rare coincidences): exact
    upper-tail p, obs/exp effect; (name, p, effect, unit, MDE spec, message)."""
    p = clip_p(stats.poisson.sf(k - 1, lam)) if k > 0 else 1.0
    ratio = k / lam if lam > 0 else (math.inf if k else 1.0)
    return (name, p, ratio, "obs/exp", ("poisson", lam), text)


def component_mde(spec, level: float) -> float:
    """The effect detectable with power 0.5 at `level` by one component: a count ("binom", n, q)
    or ("poisson", lam) as an obs/exp ratio, or a correlation over `spec` pairs as |r|."""
    if isinstance(spec, tuple):
        if spec[0] == "binom":
            return binom_mde_ratio(spec[1], spec[2], level, upward=True)
        lam = spec[1]
        if lam <= 0:
            return math.inf
        k = stats.poisson.isf(level, lam) + 1  # smallest k with P(N >= k) <= level
        return float(k / lam)
    return z_crit(level) / math.sqrt(spec)  # |r| at the critical value


def independence_mde(law, n: int, shape: tuple, alpha: float = 1e-3) -> float:
    """|r| of a lag-1 correlation along the last dim detectable with power 0.5 (n samples of a
    tensor of `shape`; Bonferroni over the correlation components: one per dim of length >= 2,
    successive calls, equal elements, duplicate rows)."""
    if not (float(law.std) > 0) or n <= 0 or not shape or shape[-1] < 2:
        return math.nan
    k = sum(1 for s in shape if s >= 2) + 3
    pairs = n // shape[-1] * (shape[-1] - 1)
    return z_crit(alpha / k) / math.sqrt(pairs) if pairs > 0 else math.nan


@quiet
def check_independence(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    comps = _components(summary, law, alpha)
    if not comps:
        if not (float(law.std) > 0):
            why = "the law is a single atom"
        elif summary.n_pairs_successive > 0 and collision_rates(summary, law)[0] >= 1.0:
            why = "the output is one value throughout (nothing varies to correlate; gof, atoms judge it)"
        else:
            why = "no pairs to compare"
        return not_applicable(why, "correlation r")
    ps = [c[1] for c in comps]
    p, j = bonferroni(ps)
    name, pj, eff, unit, spec, text = comps[j]
    level = alpha / len(comps)
    if unit == "obs/exp" and isinstance(spec, tuple) and spec[0] == "binom" and eff < 1:
        mde = binom_mde_ratio(spec[1], spec[2], level, upward=False)
    else:
        mde = component_mde(spec, level)
    corr_effects = [abs(c[2]) for c in comps if c[3] == "correlation r"]
    others = "; ".join(c[5] for i, c in enumerate(comps) if i != j and c[1] < 1e-3)
    msg = f"worst: {text}" + (f"; also {others}" if others else "") + f" ({len(comps)} components)"
    details = {f"p[{c[0]}]": c[1] for c in comps}
    details["max_abs_r"] = max(corr_effects) if corr_effects else math.nan
    return Outcome(statistic=float(eff), p_value=p, effect=float(eff), effect_unit=unit, mde=mde,
                   message=msg, details=details)
