"""The moments family: the power sums of z, and `check_moments`, mean, std, skewness and excess
kurtosis against the rounded law's.

State (`MomentsState`): ``power_sums``, float64[5], the sums of z^k, k = 0..4 (k = 0 is the count
of finite values), z standardized with ``summary.center``/``summary.scale``. For 16-bit and 8-bit
dtypes they are exact float64 sums from the per-pattern histogram at the end.

Sample central moments come from the power sums. Each statistic T is asymptotically normal with variance
Var(IF_T(X)) / n, where IF_T is its influence function, a polynomial of degree <= 4 in d = X - mu:

    IF_m2 = d^2 - k2
    IF_m3 = d^3 - k3 - 3 k2 d
    IF_m4 = d^4 - k4 - 4 k3 d
    IF_g1 = IF_m3 / s^3 - 3/2 k3 IF_m2 / s^5          (g1 = m3 / m2^1.5)
    IF_g2 = IF_m4 / s^4 - 2 k4 IF_m2 / s^6            (g2 = m4 / m2^2 - 3)

and E[IF^2] needs the law's central moments up to 8 (k_j = law.central_moment(j) / scale^j).

The name is `reference.moments`'s on purpose: a family is named after the part of the law it
judges (`reference.moments` computes the law's moments, this family estimates and tests them).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

import numpy as np
import torch

from ..declaration import statistical
from ..engine import Family, fixed_sum, fixed_sum_squares, standard_scale
from ..result import Outcome
from ..summary import Summary
from . import binned
from .binned import exact_values
from .common import bonferroni, clip_p, norm_two_sided, not_applicable, quiet, z_crit

@dataclass
class MomentsState:
    """The sums of z^k, k = 0..4 (float64; k = 0 is the count of finite values)."""

    power_sums: np.ndarray = field(default_factory=lambda: np.zeros(5, dtype=np.float64))

    @classmethod
    def merge(cls, parts, whole) -> "MomentsState":
        out = cls(np.sum([np.asarray(p.power_sums, dtype=np.float64) for p in parts], axis=0))
        out.recount(whole)
        return out

    def recount(self, whole: Summary) -> None:
        """Exact float64 power sums from a per-pattern histogram (16-bit and 8-bit dtypes), where
        it has a finite value."""
        seen = exact_values(whole)
        if seen is None:
            return
        v, c = seen
        z = (v - whole.center) / whole.scale
        cf = c.astype(np.float64)
        self.power_sums = np.array([cf.sum(), (cf * z).sum(), (cf * z**2).sum(),
                                    (cf * z**3).sum(), (cf * z**4).sum()])


def shifted_power_sums(count: float, s1: float, s2: float, s3: float, s4: float,
                       delta: float) -> list:
    """Sums of (z + delta)^k, k = 0..4, from the sums of z^k (binomial expansion, float64)."""
    d = delta
    return [count,
            s1 + count * d,
            s2 + 2 * d * s1 + count * d**2,
            s3 + 3 * d * s2 + 3 * d**2 * s1 + count * d**3,
            s4 + 4 * d * s3 + 6 * d**2 * s2 + 4 * d**3 * s1 + count * d**4]


class MomentsFold:
    """Each chunk's power sums of z (32/64-bit dtypes; exact from the histogram for narrower)."""

    def __init__(self, law, shape: tuple, fold):
        self.owner = fold
        self.state = MomentsState()

    def fold(self, chunk) -> None:
        f = self.owner
        if f.exact_hist:
            return
        z, z2 = chunk.z, chunk.z2
        scratch = f.buffer("scratch", (chunk.numel,), f.work)
        cube = fixed_sum(torch.mul(z2, z, out=scratch))
        fourth = fixed_sum_squares(z2)
        self.state.power_sums += shifted_power_sums(float(chunk.numel - chunk.n_nonfinite),
                                                    chunk.total, chunk.total_sq, cube, fourth,
                                                    f.center_shift)

    def finish(self, whole: Summary) -> MomentsState:
        self.state.recount(whole)
        return self.state


FAMILY = Family("moments", MomentsFold, needs=(binned.FAMILY,))


COMPONENTS = ("mean", "std", "skewness", "kurtosis")
UNITS = {"mean": "sigma (mean shift)", "std": "ratio (std obs/law)",
         "skewness": "skewness (obs - law)", "kurtosis": "excess kurtosis (obs - law)"}


def _law_moments(law, scale: float, center: float):
    """(mu_z, k[0..8]) of z = (Y - center) / scale under the law; k[j] central moments."""
    k = np.zeros(9, dtype=np.float64)
    k[0] = 1.0
    for j in range(2, 9):
        k[j] = float(law.central_moment(j)) / scale**j
    return law.mean_offset(center) / scale, k


def _influence_polys(k: np.ndarray):
    """Coefficient vectors (increasing powers of d, length 5) of IF_mean, IF_m2, IF_g1, IF_g2."""
    s = math.sqrt(k[2])
    if_mean = np.array([0.0, 1.0, 0, 0, 0])
    if_m2 = np.array([-k[2], 0.0, 1.0, 0, 0])
    if_m3 = np.array([-k[3], -3 * k[2], 0, 1.0, 0])
    if_m4 = np.array([-k[4], -4 * k[3], 0, 0, 1.0])
    if_g1 = if_m3 / s**3 - 1.5 * k[3] * if_m2 / s**5
    if_g2 = if_m4 / s**4 - 2.0 * k[4] * if_m2 / s**6
    return if_mean, if_m2, if_g1, if_g2


def _expect_square(c: np.ndarray, k: np.ndarray) -> float:
    prod = np.convolve(c, c)  # coefficients of IF^2, degree <= 8
    return float(np.dot(prod, k[: prod.size]))


def moment_sds(law, scale: float | None = None, center: float | None = None):
    """Asymptotic sd * sqrt(n) of (mean_z, m2_z, g1, g2) under the law, in z units."""
    scale = standard_scale(law) if scale is None else scale
    center = float(law.mean) if center is None else center
    _, k = _law_moments(law, scale, center)
    var = np.array([_expect_square(c, k) for c in _influence_polys(k)])
    # numerically zero variance (e.g. the kurtosis of a symmetric two-point law): not testable
    # at first order; such a component is left out.
    scale_ref = np.array([k[2], k[4], 1.0, 1.0])
    var = np.where(var > 1e-10 * np.maximum(scale_ref, 1e-300), var, 0.0)
    return np.sqrt(var), k


def moments_mde(law, n: int, shape: tuple, alpha: float) -> dict:
    """MDE of each component at power 0.5 (level alpha, Bonferroni over the testable ones):
    mean shift in sigma of the law, std ratio (> 1), skewness and excess-kurtosis differences."""
    if not (float(law.std) > 0) or n <= 1:
        return {c: math.nan for c in COMPONENTS}
    sds, k = moment_sds(law)
    return moments_mde_from(sds, k, n, alpha)


#: The moments are judged only where the law puts at least this many expected samples off its
#: heaviest atom: a law that is one atom but for masses like 1e-127 has a skewness of 1e3 that no
#: sample of any size shows, and the moments' asymptotic normality is void there.
MIN_OFF_ATOM = 10.0


def _off_atom_mass(law) -> float:
    """Mass of the law outside its heaviest atom, or a bound above it: 1 - sum p^2 where the
    atoms are not enumerated one by one (a 32/64-bit law with moments from its atoms; sum p^2 <=
    max p), 1.0 where the moments are not the atoms' at all."""
    if not law.moments_from_atoms:
        return 1.0
    try:
        return float(max(0.0, 1.0 - np.max(law.probs)))
    except ValueError:  # a 32/64-bit format: its atoms are summed, not listed
        return float(max(0.0, 1.0 - law.collision_prob))


#: An atom the sample cannot be expected to hit: n p below this (P(any hit) <= it).
UNSEEN_ATOM = 1e-6
#: Key spans up to this many values are looked at atom by atom for `_two_point`.
FEW_VALUES = 8


def _two_point(law, n: float) -> bool:
    """Whether the sample is (but for an unseen atom) a two-point law: then std, skewness and
    kurtosis are functions of the mean, and their delta-method variances vanish where the
    function is stationary (the variance and kurtosis of a fair two-point law), so a z-score
    there is a ratio of noise to ~0: only the mean is tested. A float64 window one ulp wide is
    such a law."""
    fmt = law.fmt
    if not (math.isfinite(law.support_lo) and math.isfinite(law.support_hi)):
        return False
    k0, k1 = (int(k) for k in fmt.ordered_keys(np.array([law.support_lo, law.support_hi])))
    if k1 - k0 + 1 > FEW_VALUES:
        return False
    values = fmt.values_from_keys(np.arange(k0, k1 + 1, dtype=np.uint64))
    return int(np.count_nonzero(n * law.atom_probs(values) >= UNSEEN_ATOM)) <= 2


@quiet
def check_moments(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    if not (float(law.std) > 0):
        return not_applicable("the law is a single atom (std 0)", UNITS["mean"])
    ps_ = np.asarray(summary.moments.power_sums, dtype=np.float64)
    n = float(ps_[0])
    if n < 2:
        return not_applicable("fewer than 2 finite samples", UNITS["mean"])
    off = _off_atom_mass(law)
    if n * off < MIN_OFF_ATOM:
        return not_applicable(f"the law is one atom but for {off:.3g} of its mass: "
                              f"{n * off:.3g} samples off it expected at this n", UNITS["mean"])
    scale, center = float(summary.scale), float(summary.center)
    if not np.all(np.isfinite(ps_)):
        return Outcome(statistic=math.inf, p_value=0.0, effect=math.inf, effect_unit=UNITS["mean"],
                       mde=math.nan, message="power sums overflow: values beyond ~1e75 sigma")
    mu, k = _law_moments(law, scale, center)
    sds, _ = moment_sds(law, scale, center)
    r1, r2, r3, r4 = ps_[1:] / n
    m1 = r1
    m2 = max(r2 - m1 * m1, 0.0)
    m3 = r3 - 3 * m1 * r2 + 2 * m1**3
    m4 = r4 - 4 * m1 * r3 + 6 * m1 * m1 * r2 - 3 * m1**4
    s2 = k[2]
    g1_law = k[3] / s2**1.5
    g2_law = k[4] / s2**2 - 3.0
    if m2 > 0:
        g1, g2 = m3 / m2**1.5, m4 / m2**2 - 3.0
    else:  # all samples equal: skewness/kurtosis undefined; counts as far off when testable
        g1, g2 = math.nan, math.nan
    est = np.array([m1, m2, g1, g2])
    target = np.array([mu, s2, g1_law, g2_law])
    se = sds / math.sqrt(n)
    testable = sds > 0
    if _two_point(law, n):
        testable[1:] = False
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(testable, (est - target) / np.where(testable, se, 1.0), 0.0)
    z = np.where(np.isnan(z), np.inf, z)  # undefined g1/g2 (zero sample variance) is far off
    pvals = norm_two_sided(z)
    comp_p = [float(pvals[i]) if testable[i] else math.nan for i in range(4)]
    p, jj = bonferroni(comp_p)
    idx = [i for i in range(4) if testable[i]]
    j = idx[jj] if idx else 0
    effects = np.array([
        (m1 - mu) / math.sqrt(s2),
        math.sqrt(m2 / s2),
        g1 - g1_law,
        g2 - g2_law,
    ])
    mdes = moments_mde_from(sds, k, n, alpha)
    obs_txt = {
        "mean": f"mean {center + m1 * scale:.8g} vs law {center + mu * scale:.8g} "
                f"({effects[0]:+.3g} sigma)",
        "std": f"std {math.sqrt(m2) * scale:.6g} vs law {math.sqrt(s2) * scale:.6g} "
               f"(ratio {effects[1]:.5g})",
        "skewness": f"skewness {g1:.4g} vs law {g1_law:.4g}",
        "kurtosis": f"excess kurtosis {g2:.4g} vs law {g2_law:.4g}",
    }
    name = COMPONENTS[j]
    others = ", ".join(f"{c} z {z[i]:+.2f}" for i, c in enumerate(COMPONENTS) if testable[i] and i != j)
    msg = f"worst: {obs_txt[name]} (z {z[j]:+.2f})" + (f"; {others}" if others else "")
    details = {f"z_{c}": float(z[i]) for i, c in enumerate(COMPONENTS)}
    details.update({f"p_{c}": comp_p[i] for i, c in enumerate(COMPONENTS)})
    details.update({f"mde_{c}": mdes[c] for c in COMPONENTS})
    return Outcome(statistic=float(abs(z[j])), p_value=clip_p(p), effect=float(effects[j]),
                   effect_unit=UNITS[name], mde=mdes[name], message=msg, details=details)


def moments_mde_from(sds: np.ndarray, k: np.ndarray, n: float, alpha: float) -> dict:
    testable = sds > 0
    zc = z_crit(alpha / max(int(testable.sum()), 1))
    h = zc * sds / math.sqrt(n)
    vals = [h[0] / math.sqrt(k[2]), math.sqrt(1.0 + h[1] / k[2]), h[2], h[3]]
    return {c: (float(vals[i]) if testable[i] else math.nan) for i, c in enumerate(COMPONENTS)}


MOMENTS = statistical(
    "moments", check_moments, families=(FAMILY,),
    doc='Mean, std, skewness and kurtosis of the rounded law.',
    method=(
        "Mean, std, skewness and excess kurtosis of the samples (from the power sums of z) against "
        "those of the rounded law (not the std argument: 0.88 sigma at +-2 sigma). Each is a "
        "z-test with the asymptotic (delta-method / influence-function) variance computed from the "
        "law's central moments up to 8; Bonferroni over the four (components with zero "
        "first-order variance, e.g. the kurtosis of a symmetric two-atom law, are left out). Not "
        "applicable when the law is one atom. False-alarm rate ~alpha (asymptotic normality; the "
        "kurtosis statistic is skewed at small n). Effect: the worst component's deviation, in "
        "sigma of the law for the mean, obs/law ratio for the std, differences for skewness and "
        "kurtosis. MDE: the deviation equal to z_(alpha/8) estimator standard errors (mean in "
        "sigma, std as a ratio > 1), for the worst component."
    ),
    unit={"mean": "sigma", "std": "ratio", "skewness": "difference", "kurtosis": "difference"},
    mde=moments_mde,
)
