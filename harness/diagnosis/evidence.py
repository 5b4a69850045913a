"""The observations a mechanism's prediction is tested against, read once from one Summary, and
the two tests every row of the catalog is built from.

Every match is two tests (docs/method/checks.md, "Diagnosis"):

* **departure**: the statistic the mechanism changes is off the rounded law's value beyond noise,
  at the false-match rate `FALSE_MATCH` (an exact sampler matches a row with at most that chance
  per Summary);
* **agreement**: the observed value lies within `Z_AGREE` standard deviations of the mechanism's
  prediction, plus a stated model tolerance `MODEL_TOL` of the prediction where the mechanism is
  a family of samplers rather than one (a true mechanism fails agreement by noise with at most
  `AGREE_LEVEL`); where the mechanism is a whole alternative law, the binned histogram must fit
  it (`Evidence.fit`, chi-square p >= `AGREE_LEVEL`).

A mechanism never matches on the departure alone, and the observation is never adjusted to fit.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats

from reference import TruncatedNormal, rounded_law

from ..families import independence, position, repetition
from ..families.binned import gof_groups
from ..families.common import LawBins, binom_two_sided

#: The chance that an exact sampler matches one row of the catalog on one Summary (each
#: departure test is exact or conservative at this level).
FALSE_MATCH = 1e-9
#: The two-sided normal z of FALSE_MATCH (6.1).
DEPART_Z = float(stats.norm.isf(FALSE_MATCH / 2))
#: The chance that noise alone makes a true mechanism's data disagree with its prediction.
AGREE_LEVEL = 1e-6
#: The two-sided normal z of AGREE_LEVEL (4.9).
Z_AGREE = float(stats.norm.isf(AGREE_LEVEL / 2))
#: Relative tolerance of a prediction that stands for a family of samplers (the cell of a
#: uniform lattice, the order of an affine step): 5% of the predicted value.
MODEL_TOL = 0.05
#: The families the catalog reads from the stage that judged their checks, not from the row's
#: deciding stage: a deciding stage 2 folds them only where one of their checks went to stage 2
#: (`harness.runner.CaseRunner.stage_families`), and otherwise their stage-1 state, on which
#: their checks passed, is the evidence (`Evidence.holder`). Every other family the catalog and
#: the severity figures read from the deciding stage, which always folds them.
OWN_STAGE_FAMILIES = frozenset(f.FAMILY.name for f in (independence, repetition, position))
#: The expected count behind an empty region whose emptiness departs at FALSE_MATCH:
#: P(Poisson(m) = 0) = e^-m <= FALSE_MATCH.
EMPTY_EXPECTED = -math.log(FALSE_MATCH)


def departs(count: float, n: int, mass: float) -> bool:
    """Whether a Bin(n, mass) count is off its law at FALSE_MATCH (exact two-sided binomial)."""
    return bool(n > 0 and float(binom_two_sided(count, n, mass)) < FALSE_MATCH)


def agrees(observed: float, predicted: float, sd: float, tolerance: float = 0.0) -> bool:
    """|observed - predicted| <= Z_AGREE sd + tolerance |predicted|."""
    if not (math.isfinite(observed) and math.isfinite(predicted)):
        return False
    return abs(observed - predicted) <= Z_AGREE * max(sd, 0.0) + tolerance * abs(predicted)


def count_sd(n: int, mass: float) -> float:
    """The sd of a share (count / n) of Bin(n, mass)."""
    mass = min(max(mass, 0.0), 1.0)
    return math.sqrt(mass * (1.0 - mass) / n) if n > 0 else math.inf


def share_text(observed: float, n: int) -> str:
    """'1.96e-03 +- 4.3e-05': a share and its binomial sd."""
    return f"{observed:.3g} +- {count_sd(n, observed):.2g}"


def chi2_statistic(hist, probs) -> tuple[float, int] | None:
    """(X2, df) of histogram counts `hist` against bin masses `probs`, bins merged to expect
    >= 5 each (X2 inf where a count falls where `probs` has no mass; df 0 for one merged bin);
    None for an empty histogram."""
    hist = np.asarray(hist)
    probs = np.asarray(probs, dtype=np.float64)
    n = float(hist.sum())
    if n <= 0:
        return None
    if np.any((probs <= 0) & (hist > 0)):
        return math.inf, 1
    pos, starts = gof_groups(probs, n)
    if starts.size < 2:
        return 0.0, 0
    p_pos = probs[pos] / probs[pos].sum()
    exp = np.add.reduceat(n * p_pos, starts)
    obs = np.add.reduceat(hist[pos].astype(np.float64), starts)
    return float(np.sum((obs - exp) ** 2 / exp)), int(starts.size) - 1


def chi2_fit(hist, probs, fitted: int = 0) -> float | None:
    """The chi-square p-value of histogram counts `hist` against bin masses `probs`
    (`chi2_statistic`; a count where `probs` has no mass gives 0), `fitted` the parameters of
    `probs` estimated from the same histogram (each takes one degree of freedom); None for an
    empty histogram."""
    found = chi2_statistic(hist, probs)
    if found is None:
        return None
    x2, df = found
    if math.isinf(x2):
        return 0.0
    return 1.0 if df <= fitted else float(stats.chi2.sf(x2, df - fitted))


def fine_bin_index(keys: np.ndarray, bins: LawBins) -> np.ndarray:
    """The bin of `bins` (a narrow law's fine bins, with one bin below the support and one above)
    that holds each ordered key."""
    fb = bins.law.fine_bins
    # uint64 keys (float64's reach 2^64): the difference wraps into int64 exactly
    rel = (np.asarray(keys).astype(np.uint64) - np.uint64(fb.key_lo)).astype(np.int64)
    return np.where(rel < 0, 0, np.minimum((np.maximum(rel, 0) >> fb.shift) + 1,
                                           bins.probs.size - 1))


#: The most values of a fine-binned window a law is summed over, value by value.
MAX_FINE_VALUES = 1 << 20


def log_likelihood_ratio(counts: np.ndarray, shares: np.ndarray, law: np.ndarray) -> float:
    """log of the multinomial likelihood of `counts` under `shares` over that under `law`
    (+inf where the law forbids an observed class, -inf where the prediction does, the
    prediction's -inf first: a prediction that forbids what was seen is refuted whatever the law
    says, and the ratio is never NaN)."""
    seen = counts > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = counts[seen] * (np.log(shares[seen]) - np.log(law[seen]))
    if np.any(np.isnan(terms)) or np.any(shares[seen] <= 0):
        return -math.inf
    return float(np.sum(terms))


class Evidence:
    """The views of one Summary the catalog reads, each computed once (on first use). `first`:
    the group's stage-1 Summary where `summary` is its stage 2's, which holds the
    OWN_STAGE_FAMILIES that stage 2 did not fold."""

    def __init__(self, summary, law, first=None):
        self.summary = summary
        self.first = first
        self.law = law
        self.dist = law.dist
        self.n = int(summary.n)
        self.dtype = summary.dtype
        #: what one mechanism's test found, by its name, where another mechanism reads it too
        self.memo: dict = {}

    # -- the law's parameters ------------------------------------------------------------------
    @property
    def mean(self) -> float:
        return float(self.dist.loc)

    @property
    def std(self) -> float:
        return float(self.dist.scale)

    def holder(self, family: str):
        """The Summary the catalog reads `family` from: the deciding one, or for one of the
        OWN_STAGE_FAMILIES it did not fold, the stage-1 Summary that judged its checks."""
        if (family in OWN_STAGE_FAMILIES and not self.summary.has(family)
                and self.first is not None and self.first.has(family)):
            return self.first
        return self.summary

    def has(self, family: str) -> bool:
        return self.holder(family).has(family)

    def state(self, family: str):
        """`family`'s state, from its `holder`."""
        return getattr(self.holder(family), family)

    def alternative(self, mean: float, std: float, a: float, b: float, rounding: str = "rn"):
        """The rounded law of another TN in the Summary's dtype (`reference.rounded_law`)."""
        return rounded_law(TruncatedNormal(mean, std, a, b), self.law.fmt, rounding)

    # -- counts at the atoms -------------------------------------------------------------------
    def atom_count(self, side: str) -> int:
        atoms = self.summary.atoms
        return int(atoms.n_at_rn_a if side == "a" else atoms.n_at_rn_b)

    # -- the binned histogram ------------------------------------------------------------------
    @functools.cached_property
    def bins(self) -> LawBins | None:
        """The main histogram's bins (None for a law judged on fine bins: a narrow window)."""
        if not self.has("binned"):
            return None
        bins = LawBins.of(self.law)
        return None if bins.fine else bins

    @functools.cached_property
    def judged_hist(self) -> tuple[LawBins, np.ndarray] | None:
        """(bins, counts) of the histogram the law is judged on: the main bins, or a narrow
        law's fine bins (None: no binned family, or a Summary folded without the fine bins)."""
        if not self.has("binned"):
            return None
        bins = LawBins.of(self.law)
        try:
            return bins, bins.counts(self.summary)
        except ValueError:
            return None

    @functools.cached_property
    def hist(self) -> np.ndarray | None:
        return None if self.bins is None else self.bins.counts(self.summary)

    def fit(self, probs) -> float | None:
        """The chi-square p-value of the binned histogram against bin masses `probs`
        (`chi2_fit`); None where the Summary has no main histogram."""
        if self.hist is None:
            return None
        return chi2_fit(self.hist, probs)

    @functools.cached_property
    def canonical_fit(self) -> float | None:
        """The histogram's fit to the rounded law itself."""
        return None if self.bins is None else self.fit(self.bins.probs)

    @property
    def binned_departs(self) -> bool:
        p = self.canonical_fit
        return p is not None and p < FALSE_MATCH

    def copies_inflate(self, copies: float) -> str | None:
        """Where each value is counted `copies` times over (repeated rows, copied shards), every
        count's variance grows that many-fold, and the main histogram's chi-square over its df
        reads `copies`: the note where it does (None: no main histogram, or a chi-square that
        disagrees, Z_AGREE sd and MODEL_TOL)."""
        if self.bins is None:
            return None
        found = chi2_statistic(self.hist, self.bins.probs)
        if found is None or found[1] < 1 or not math.isfinite(found[0]):
            return None
        x2, df = found
        ratio = x2 / df
        if not agrees(ratio, copies, copies * math.sqrt(2.0 / df), MODEL_TOL):
            return None
        return (f"each value counted {copies:.3g} times predicts the histogram's chi-square at "
                f"{copies:.3g} x its {df} df, observed {ratio:.4g} x")

    def log_likelihood_ratio(self, probs: np.ndarray) -> float:
        """`log_likelihood_ratio` of the binned histogram under bin masses `probs` over the law;
        NaN where the Summary has no main histogram."""
        if self.hist is None:
            return math.nan
        return log_likelihood_ratio(self.hist, probs, self.bins.probs)

    def departs_toward(self, probs: np.ndarray, predictions: int) -> bool:
        """Whether the histogram leaves the law, for `probs`, one of `predictions` laws fixed
        before the data: the chi-square rejects the law (`binned_departs`), or the likelihood
        ratio of `probs` over the law reaches predictions / FALSE_MATCH. Under the law the
        ratio averages 1, so (Markov) an exact sampler reaches that for any of the predictions
        with probability <= FALSE_MATCH; it is the most powerful test of the law against each
        (Neyman-Pearson), where the chi-square spreads its power over every departure."""
        return self.binned_departs or bool(
            self.log_likelihood_ratio(probs) >= math.log(predictions / FALSE_MATCH))

    def fits(self, law) -> bool | None:
        """Whether the histogram fits `law` at AGREE_LEVEL (None: no main histogram)."""
        if self.bins is None or law.fine_bins is not None:
            return None
        p = self.fit(law.hist_bin_probs())
        return None if p is None else p >= AGREE_LEVEL

    def fits_by_value(self, law) -> bool | None:
        """Whether the fine histogram of a narrow law fits `law`, summed value by value over the
        Summary's law's support onto its fine bins (None: not a fine-binned law, a window of
        more than MAX_FINE_VALUES values, or no fine histogram)."""
        judged = self.judged_hist
        fmt = self.law.fmt
        if judged is None or not judged[0].fine or not (
                math.isfinite(self.law.rn_a) and math.isfinite(self.law.rn_b)):
            return None
        bins, hist = judged
        k0, k1 = (int(k) for k in fmt.ordered_keys(np.array([self.law.rn_a, self.law.rn_b])))
        if k1 < k0 or k1 - k0 + 1 > MAX_FINE_VALUES:
            return None
        keys = np.arange(k0, k1 + 1, dtype=np.int64)
        probs = law.atom_probs(fmt.values_from_keys(keys))
        probs = np.bincount(fine_bin_index(keys, bins), weights=probs,
                            minlength=bins.probs.size)[:bins.probs.size]
        p = chi2_fit(hist, probs)
        return None if p is None else p >= AGREE_LEVEL

    def bin_of(self, value: float) -> int:
        """The main histogram bin holding `value`."""
        fmt = self.law.fmt
        key = int(fmt.ordered_keys(np.array([value], dtype=np.float64))[0])
        return key >> (fmt.bits - self.summary.hist_bits)

    # -- the moments, in the Summary's standardized units --------------------------------------
    @functools.cached_property
    def moments(self) -> dict | None:
        """Observed mean and std (in x units) with their sds, the law's, and the excess kurtosis:
        None where the moments were not folded or the law has std 0."""
        from ..families.moments import moment_sds

        if not self.has("moments") or not float(self.law.std) > 0:
            return None
        sums = np.asarray(self.summary.moments.power_sums, dtype=np.float64)
        n = float(sums[0])
        if n < 2 or not np.all(np.isfinite(sums)):
            return None
        scale, center = float(self.summary.scale), float(self.summary.center)
        r1, r2, r3, r4 = sums[1:] / n
        m2 = max(r2 - r1 * r1, 0.0)
        m4 = r4 - 4 * r1 * r3 + 6 * r1 * r1 * r2 - 3 * r1**4
        sds, k = moment_sds(self.law, scale, center)
        law_std = math.sqrt(k[2]) * scale
        std = math.sqrt(m2) * scale
        return {"n": n, "mean": center + r1 * scale, "mean_sd": sds[0] * scale / math.sqrt(n),
                "law_mean": float(self.law.mean), "std": std, "law_std": law_std,
                # sd of the std from that of the second moment: d sqrt(m2) = d m2 / (2 sqrt m2)
                "std_sd": sds[1] * scale**2 / math.sqrt(n) / (2.0 * law_std),
                "kurtosis": m4 / m2**2 - 3.0 if m2 > 0 else math.nan,
                "kurtosis_sd": sds[3] / math.sqrt(n),
                "law_kurtosis": k[4] / k[2] ** 2 - 3.0}

    # -- the check outcomes some rows read -----------------------------------------------------
    def outcome(self, check):
        """The outcome of `check` (a statistical check's declaration) at FALSE_MATCH, once per
        check, on the Summary that holds its families (`holder`)."""
        done = self.__dict__.setdefault("outcomes", {})
        if check.name not in done:
            own = [f.name for f in check.families if f.name in OWN_STAGE_FAMILIES]
            summary = self.holder(own[0]) if own else self.summary
            done[check.name] = check.outcome(summary, self.law, alpha=FALSE_MATCH)
        return done[check.name]
