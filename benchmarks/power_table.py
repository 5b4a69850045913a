"""The README's MDE table and power table, computed by code, not typed.

Run: ``python benchmarks/power_table.py [--run] [--alpha 1e-3]``. Prints the markdown tables (a),
(a') and (b) below (and (c) with ``--simulate``).

(a) **MDE table.** Per check, the minimum detectable effect at the `pr` n (2**22) and the `nightly`
n (2**27) for two representative (case, dtype): normal-2sigma float32 and abs-bounds-trap bfloat16.
From `harness.checks.power.mde_table` (hence the ``*_mde`` functions of `harness.families`); n is
what the engine draws (whole calls of the case's tensor). Convention (see
`harness.families`): the effect the whole check, Bonferroni factor included, detects with
probability 0.5 at level alpha (= alpha_fail, 1e-3) in one stage; units per row (gof: Cohen's w;
ks: CDF distance D; atoms: obs/exp extra mass at the better-powered bound; tails: obs/exp deficit
of the 1e-3 tail; moments: mean shift in law sigma, std ratio, skewness / excess-kurtosis
differences; extremes: KS distance of the row-extreme PITs; independence: |r| lag-1 along the last
dim; position: Cohen's w of the smallest position class tested against the rest of the tensor).
A statistical fail needs p < alpha at stage 1 and again at stage 2 on 4x n: at an effect equal
to the MDE at n, stage 2 (4x n) has power ~1, so P(fail) ~ 0.5. The atoms cell gives the hits
that fail where the better-powered atom expects far below one sample (`atoms_cell`).

(a') **MDE per shape class at pr.** The same MDEs for each (case, dtype) of (a), at its grid shape
and at every shape class the `pr` profile draws it at on a CPU (`harness.cases.shape_classes_for`,
the session's rule), each at the n the engine draws for that group (`drawn_n`:
`Profile.samples`, whole calls, at least two): the calls, the n, and the MDE of ks, gof, atoms,
the moments' mean shift and position (whose smallest class holds one element per call).

(b) **Power table.** Per known-bad built-in (`candidates.REGISTRY`, ``known_bad=True``), on the case
and dtype where its defect shows (`PLAN`, the same as tests/calibration/test_power.py): each named check
(``caught_by``) with the defect's effect in that check's unit, computed from the *defect's law*
(no sampling, except for torch-legacy's bf16 hit rate; see below), and the **n needed**: the
smallest n at which the effect reaches the check's MDE (bisection over n on the ``*_mde``
functions, i.e. power ~0.5 at stage 1). Conventions for the effects:

* scale / shift / no-tail: the defect is another truncated normal; its rounded law
  (`reference.rounded_law`) gives the bin masses, moments and atoms.
* point mass 1e-4 at a, clamp: the exact law mixed with atoms at RN(a) (and RN(b)): (1-w) law + w
  delta, w = 1e-4, resp. Phi(alpha) and 1-Phi(beta) (clamp's normal_ is taken as exact).
* round-toward-zero: the law of RZ(X) on the 16-bit lattice: each value v gets the cell
  [v, next_up(v)) for v >= +0 and (next_down(v), v] for v <= -0.
* antithetic neighbours: r = (m/2)/(m-1) corr(Y, Y'), Y' = RN(F^-1(1-U)), corr by quadrature on 2**20
  midpoints of U; m the row length (half of the lag-1 pairs are antithetic).
* an atom where the law has no mass (torch-legacy and fp32-upcast at a = -100 sigma, round-toward-
  zero's empty boundary atoms read as deficits): any hit is decisive, so n needed = ln 2 / rate
  (P(at least one hit) = 0.5). fp32-upcast's rate is 2**-24 (float32 uniform_ draws k 2**-24, k = 0
  maps to -1, erfinv(-1) = -inf, clamped to a); torch-legacy's bf16 rate is measured from 2**22 draws
  of the sampler itself (the only sampled quantity; the seed is fixed).
* gof: the effective Cohen's w over the bins merged at that n (`gof_groups`): w^2 = (E[X2] - df) / n
  with E[X2] exact under the defect's multinomial (sum q(1-q)/p + n sum (q-p)^2/p): smaller than
  sum (q-p)^2/p when the groups differ in size, as float32 bins near 0 and in the bulk do; against
  `gof_mde`. Mass in bins the law gives none is decisive (n = ln 2 / that mass) when that comes first.
* tails: each tail set of the law (`tail_sets`), defect mass / law mass, two-sided binomial at
  alpha / sets; the best-powered set counts.
* extremes: D = sup over bin tops of |P_defect(row max <= v) - P_law(row max <= v)| (and the same for
  row minima), against `extremes_mde` (row length m, R = n/m rows, capped).
* hang: the first call does not return (rejection-loop on [5, inf)): n needed = one call.

"n needed" is rounded up to 2 significant digits; "—" where the check cannot see the defect at
any n up to 2**44 (e.g. extremes for a defect in the bulk) or has no effect model here. The last
column, with ``--run``, runs the known-bad sampler through `CaseRunner` at the `pr` profile
(default run seed, that one case, its named checks) and reports the verdict with both stages'
p-values; without ``--run`` it says "not run". Runtime: ~1 min without ``--run``, a few minutes more
with it (2 CPU cores).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

from candidates import REGISTRY, resolve  # noqa: E402
from candidates.builtin import FALLBACK_RATE, HOLE_AT, HOLE_MASS  # noqa: E402
from harness.cases import PROFILES, case_by_id, shape_classes_for, shaped  # noqa: E402
from harness.families.common import binom_mde_ratio  # noqa: E402
from harness.families.atoms import atom_sides  # noqa: E402
from harness.families.tails import tail_sets  # noqa: E402
from harness.families.extremes import extremes_mde  # noqa: E402
from harness.families.binned import gof_groups, gof_mde, ks_mde  # noqa: E402
from harness.families.independence import independence_mde  # noqa: E402
from harness.families.localized import (LocalBins, critical_excess, hole_guaranteed,  # noqa: E402
                                       check_scan, check_spikes, scan_families, scan_mde,
                                       spikes_mde, synthetic_summary)
from harness.families.moments import moments_mde  # noqa: E402
from harness.families.resolution import collisions_mde, lattices_mde  # noqa: E402
from harness.key_bins import RESOLUTION_SCAN  # noqa: E402
from harness.checks import CHECKS  # noqa: E402
from harness.checks.power import mde_table, samples_drawn  # noqa: E402
from harness.runner import CaseRunner, RunConfig  # noqa: E402
from reference.dtypes import dtype_name  # noqa: E402
from reference import TruncatedNormal, rounded_law  # noqa: E402

MDE_CASES = (("normal-2sigma", torch.float32), ("abs-bounds-trap", torch.bfloat16))

#: known-bad candidate -> (case, dtype): where its defect shows (as in tests/calibration/test_power.py)
PLAN = {
    "clamp": ("normal-2sigma", torch.float32),
    "torch-legacy": ("abs-bounds-trap", torch.bfloat16),
    "fp32-upcast": ("abs-bounds-trap", torch.float32),
    "rejection-loop": ("tail-5", torch.float32),
    "scale-2pct-wide": ("normal-2sigma", torch.float32),
    "shift-0.02sigma": ("normal-2sigma", torch.float32),
    "no-tail-beyond-3.5sigma": ("untruncated", torch.float32),
    "antithetic-neighbours": ("normal-2sigma", torch.float32),
    "round-toward-zero": ("normal-2sigma", torch.bfloat16),
    "point-mass-1e-4-at-a": ("normal-2sigma", torch.float32),
    "fallback-mean-1e-5": ("large-mean", torch.float32),
    "hole-2e-5": ("normal-2sigma", torch.float32),
    "uniform-24-bits": ("normal-2sigma", torch.float32),
    "float32-widened": ("normal-2sigma", torch.float64),
    "dropped-last-bit": ("normal-2sigma", torch.float32),
}
#: the localized checks' measured power (--simulate): case and dtype
SIM_CASE = ("normal-2sigma", torch.float32)
SIM_REPS = 100
SIM_BISECT = 5  # bisection steps for the measured power-0.5 size (between MDE / 8 and 2 MDE)
N_MAX = 2**44
LN2 = math.log(2.0)


# ------------------------------------------------------------------------------ formatting


def markdown(header: list, rows: list) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def g3(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.3g}"


def fmt_n(n) -> str:
    if n is None or (isinstance(n, float) and not math.isfinite(n)):
        return "—"
    if isinstance(n, str):
        return n
    e = math.log2(n)
    return f"{_round_up(n):.2g} (2^{e:.1f})"


def _round_up(n: float) -> float:
    if n <= 0:
        return n
    p = 10 ** (math.floor(math.log10(n)) - 1)
    return math.ceil(n / p) * p


# ------------------------------------------------------------------------------ (a) MDE table


def atoms_cell(law, n: int, alpha: float) -> str:
    """The atoms MDE as a reader takes it: an obs/exp ratio at an atom of real mass, or the hits
    that fail where the better-powered atom expects almost nothing at n (the +-100 sigma trap's
    bounds have mass 0; bf16's zero then decides, ~2e-39)."""
    sides = atom_sides(law)
    if not sides or n <= 0:
        return "—"
    level = alpha / len(sides)
    ratio, name, p = min((binom_mde_ratio(n, p, level, upward=True), name, p)
                         for name, _, p, _ in sides)
    if math.isinf(ratio):
        return "any hit (the atoms have mass 0)"
    if n * p < 1e-3:
        hits = max(1, round(ratio * n * p))
        return f"{hits} hit{'s' if hits > 1 else ''} on {name} (mass {p:.2g})"
    return g3(ratio)


def mde_markdown(alpha: float) -> str:
    cases = [case_by_id(c) for c, _ in MDE_CASES]
    df = mde_table({"pr": PROFILES["pr"], "nightly": PROFILES["nightly"]}, cases,
                   [d for _, d in MDE_CASES], alpha)
    cols = []
    for case_id, dtype in MDE_CASES:
        law = _law(case_by_id(case_id), dtype)
        for prof in ("pr", "nightly"):
            sub = df[(df.case == case_id) & (df.dtype == dtype_name(dtype)) & (df.profile == prof)]
            n = int(sub.n.iloc[0])
            cols.append((f"{case_id} {dtype_name(dtype)} {prof} (n={n:,})",
                         dict(zip(sub.check, sub.mde)), atoms_cell(law, n, alpha)))
    units = dict(zip(df.check, df.unit))

    def cell(check, col):
        v = col[1].get(check)
        if check == "atoms":
            return col[2]
        if units[check] == "ratio" and isinstance(v, float) and math.isfinite(v):
            return f"{v:.6f}"
        return g3(v)
    rows = [[check, units[check]] + [cell(check, c) for c in cols] for check in units]
    return markdown(["check", "unit"] + [c[0] for c in cols], rows)


# ------------------------------------------------------------------------------ (a') per shape class

#: The columns of the per-shape-class table: (check in `CHECKS.mdes`, header).
SHAPE_MDE_CHECKS = (("ks", "ks (D)"), ("gof", "gof (w)"), ("atoms", "atoms (obs/exp)"),
                    ("moments.mean", "moments mean (σ)"), ("position", "position (w)"))


def drawn_n(profile, case, device: str = "cpu") -> int:
    """The stage-1 n the engine draws for `case` (a grid case or a shape-axis one): the profile's
    n for it (`Profile.samples`), in whole calls, at least `min_calls`."""
    return samples_drawn(profile.samples(device, case), tuple(case.shape), profile.min_calls)


def shape_mde_rows(case_id: str, dtype, alpha: float, profile_name: str = "pr") -> list:
    """[label, calls, n, MDE per SHAPE_MDE_CHECKS] for the case's grid shape and each shape class
    `profile_name` draws it at (no sampling: `CHECKS.mdes` at the n drawn)."""
    profile = PROFILES[profile_name]
    base = case_by_id(case_id)
    law = _law(base, dtype)
    cases = [(f"grid {base.shape_text}", base)]
    cases += [(shape.name, shaped(base, shape))
              for shape in shape_classes_for(case_id, profile, on_cuda=False)]
    rows = []
    for label, case in cases:
        n = drawn_n(profile, case)
        mdes = CHECKS.mdes(law, n, tuple(case.shape), alpha)
        rows.append([label, n // max(1, case.numel), n]
                    + [mdes[check][0] for check, _ in SHAPE_MDE_CHECKS])
    return rows


def shape_mde_markdown(alpha: float, profile_name: str = "pr") -> str:
    """One table per MDE_CASES entry: rows the grid shape and the shape classes, columns the calls
    and n drawn and the MDE of the main checks."""
    out = []
    for case_id, dtype in MDE_CASES:
        law = _law(case_by_id(case_id), dtype)
        rows = [[label, f"{calls:,}", f"{n:,}"]
                + [atoms_cell(law, n, alpha) if check == "atoms" else g3(v)
                   for (check, _), v in zip(SHAPE_MDE_CHECKS, mdes)]
                for label, calls, n, *mdes in shape_mde_rows(case_id, dtype, alpha, profile_name)]
        header = ["shape class", "calls", "n drawn"] + [h for _, h in SHAPE_MDE_CHECKS]
        out.append(f"**{case_id} {dtype_name(dtype)}**\n\n" + markdown(header, rows))
    return "\n\n".join(out)


# ------------------------------------------------------------------------------ (b) power table


def smallest_n(pred, lo: int = 16, hi: int = N_MAX):
    """Smallest n in [lo, hi] with pred(n) (assumed monotone), to ~1 %; None if pred(hi) is False."""
    n = lo
    while not pred(n):
        n *= 2
        if n > hi:
            return None
    if n == lo:
        return float(lo)
    a, b = n // 2, n  # pred(a) False, pred(b) True
    while b - a > max(1, a // 200):
        mid = (a + b) // 2
        if pred(mid):
            b = mid
        else:
            a = mid
    return float(b)


def _law(case, dtype, **over):
    p = dict(mean=case.mean, std=case.std, a=case.a, b=case.b) | over
    return rounded_law(TruncatedNormal(p["mean"], p["std"], p["a"], p["b"]), dtype)


class Defect:
    """The defect's law as far as the checks see it: histogram-bin masses, moments, atoms."""

    def __init__(self, probs, mean=None, std=None, atoms=None, r_lag1=None, zero_rate=None,
                 spike=None, hole=None):
        self.spike = spike  # (value, extra share) of a point mass
        self.hole = hole  # (first quantile, mass) of an interval never produced
        self.probs = np.asarray(probs, dtype=np.float64)
        self.mean, self.std = mean, std
        self.atoms = atoms or {}  # bound value -> mass
        self.r_lag1 = r_lag1
        self.zero_rate = zero_rate  # rate of hits where the law has no mass (decisive)


def _mix_atoms(law, weights: dict) -> "Defect":
    """(1 - sum w) law + sum w_v delta_v: bin masses, atoms at the bounds, mean and std."""
    fmt = law.fmt
    total = sum(weights.values())
    probs = law.hist_bin_probs() * (1.0 - total)
    atoms = {float(law.rn_a): law.atom_a * (1.0 - total), float(law.rn_b): law.atom_b * (1.0 - total)}
    m1 = float(law.mean) * (1.0 - total)
    m2 = (float(law.var) + float(law.mean) ** 2) * (1.0 - total)
    for value, w in weights.items():
        key = int(fmt.ordered_keys(np.array([value]))[0]) >> (fmt.bits - fmt.hist_bits)
        probs[key] += w
        atoms[value] = atoms.get(value, 0.0) + w
        m1 += w * value
        m2 += w * value * value
    return Defect(probs, m1, math.sqrt(max(m2 - m1 * m1, 0.0)), atoms)


def _rz_law(law) -> Defect:
    """Round-toward-zero on a 16-bit lattice: every value takes the cell on its far side from 0."""
    fmt, dist = law.fmt, law.dist
    k_lo, k_hi = (int(k) for k in fmt.ordered_keys(np.array([law.rn_a, law.rn_b])))
    keys = np.arange(k_lo - 1, k_hi + 2, dtype=np.uint64)
    v = fmt.values_from_keys(keys)
    ok = np.isfinite(v)
    keys, v = keys[ok], v[ok]
    neg = np.signbit(v)
    up, down = fmt.next_up(v), fmt.next_down(v)
    lo = np.where(neg, down, v)
    hi = np.where(neg, v, up)
    mass = np.clip(dist.prob(np.maximum(lo, dist.a), np.minimum(hi, dist.b)), 0, None)
    mass = np.where((hi <= dist.a) | (lo >= dist.b), 0.0, mass)
    # the open end of each cell belongs to the neighbour; at a continuous law it carries no mass
    probs = np.zeros(2**fmt.hist_bits)
    np.add.at(probs, (keys >> np.uint64(fmt.bits - fmt.hist_bits)).astype(np.int64), mass)
    probs /= probs.sum()
    pv = mass / mass.sum()
    mean = float(np.sum(pv * v))
    std = float(math.sqrt(np.sum(pv * (v - mean) ** 2)))
    atoms = {float(law.rn_a): float(pv[v == law.rn_a].sum()), float(law.rn_b): float(pv[v == law.rn_b].sum())}
    return Defect(probs, mean, std, atoms)


def _antithetic_r(law, row_len: int) -> float:
    u = (np.arange(2**20) + 0.5) / 2**20
    x = law.fmt.round(law.dist.ppf(u))
    y = law.fmt.round(law.dist.ppf(1.0 - u))
    c = np.corrcoef(x, y)[0, 1]
    return float((row_len // 2) / (row_len - 1) * c)


def _torch_legacy_rate(case, dtype) -> float:
    cand = resolve("torch-legacy")
    g = torch.Generator().manual_seed(20260101)
    t = torch.empty(case.shape, dtype=dtype)
    hits = total = 0
    while total < 2**22:
        cand(t, case.mean, case.std, case.a, case.b, g)
        hits += int((t == case.a).sum())
        total += t.numel()
    return hits / total


def defect_model(name: str, case, dtype, law):
    base = law.hist_bin_probs()
    if name == "scale-2pct-wide":
        bad = _law(case, dtype, std=case.std * 1.02)
    elif name == "shift-0.02sigma":
        bad = _law(case, dtype, mean=case.mean + 0.02 * case.std)
    elif name == "no-tail-beyond-3.5sigma":
        bad = _law(case, dtype, a=max(case.a, case.mean - 3.5 * case.std),
                   b=min(case.b, case.mean + 3.5 * case.std))
    else:
        bad = None
    if bad is not None:
        atoms = {v: float(bad.atom_probs(np.array([v]))[0]) if math.isfinite(v) else 0.0
                 for v in (float(law.rn_a), float(law.rn_b))}
        return Defect(bad.hist_bin_probs(), float(bad.mean), float(bad.std), atoms)
    if name == "point-mass-1e-4-at-a":
        return _mix_atoms(law, {float(law.rn_a): 1e-4})
    if name == "clamp":
        normal = TruncatedNormal(case.mean, case.std, -math.inf, math.inf)
        return _mix_atoms(law, {float(law.rn_a): float(normal.cdf(np.array([case.a]))[0]),
                                float(law.rn_b): float(normal.sf(np.array([case.b]))[0])})
    if name == "round-toward-zero":
        return _rz_law(law)
    if name == "antithetic-neighbours":
        return Defect(base, r_lag1=_antithetic_r(law, int(case.shape[-1])))
    if name == "torch-legacy":
        return Defect(base, zero_rate=_torch_legacy_rate(case, dtype))
    if name == "fp32-upcast":
        return Defect(base, zero_rate=2.0**-24)
    if name == "fallback-mean-1e-5":
        value = float(law.fmt.round(np.array([case.mean]))[0])
        return Defect(base, spike=(value, FALLBACK_RATE))
    if name == "hole-2e-5":
        return Defect(base, hole=(HOLE_AT, HOLE_MASS))
    return None  # rejection-loop: no law (it hangs)


def _gof_pred(law, d: Defect, alpha):
    p = law.hist_bin_probs()
    q = d.probs
    imp = float(q[p <= 0].sum())

    def w_at(n):
        # effective w: sqrt((E_q[X2] - df) / n), E_q[X2] = sum_g q_g (1 - q_g) / p_g + n (q_g - p_g)^2 / p_g
        # exactly under the multinomial; not n w^2 alone: where the groups differ in size (float32 bins
        # near 0 vs the bulk) the first sum falls below df and eats part of the noncentrality.
        pos, starts = gof_groups(p, n)
        if starts.size < 2:
            return math.nan
        pg = np.add.reduceat(p[pos], starts)
        qg = np.add.reduceat(q[pos], starts)
        pg, qg = pg / pg.sum(), qg / max(qg.sum(), 1e-300)
        lam = float(np.sum(qg * (1 - qg) / pg) + n * np.sum((qg - pg) ** 2 / pg) - (pg.size - 1))
        return math.sqrt(max(lam, 0.0) / n)

    def pred(n):
        if imp > 0 and n * imp >= LN2:
            return True
        w = w_at(n)
        return not math.isnan(w) and w >= gof_mde(law, n, (), alpha)
    return pred, w_at


def _ks_effect(law, d):
    return float(np.max(np.abs(np.cumsum(d.probs) - np.cumsum(law.hist_bin_probs()))))



def _binom_detects(n: int, p: float, ratio: float, level: float) -> bool:
    """Whether a count of expected mass p, off by the factor `ratio`, is detected at n (power 0.5)."""
    if ratio > 1:
        return binom_mde_ratio(n, p, level, upward=True) <= ratio
    if ratio < 1:
        m = binom_mde_ratio(n, p, level, upward=False)
        return not math.isnan(m) and m >= ratio
    return False

def _atoms_pred(law, d, alpha):
    sides = atom_sides(law)
    if not sides:
        return None, None
    level = alpha / len(sides)
    best = []
    for _, v, p, _ in sides:
        q = d.atoms.get(v, p)
        best.append((v, p, q))
    def pred(n):
        for _, p, q in best:
            if p <= 0:
                if q > 0 and n * q >= LN2:
                    return True
                continue
            if _binom_detects(n, p, q / p, level):
                return True
        return False
    ratios = [q / p if p > 0 else (math.inf if q > 0 else 1.0) for _, p, q in best]
    return pred, max(ratios, key=lambda r: abs(math.log(min(max(r, 1e-300), 1e300))))


def _tails_pred(law, d, alpha):
    side, target, k, mass = tail_sets(law.hist_bin_probs())
    if side.size == 0:
        return None, None
    lower, upper = np.cumsum(d.probs), np.cumsum(d.probs[::-1])[::-1]
    q = np.where(side == 0, lower[k], upper[k])
    ratio = q / mass
    level = alpha / side.size

    def pred(n):
        return any(_binom_detects(n, m, r, level) for m, r in zip(mass, ratio))
    j = int(np.argmax(np.abs(np.log(np.maximum(ratio, 1e-300)))))
    return pred, float(ratio[j])


def _extremes_pred(law, d, row_len, alpha):
    f = np.cumsum(law.hist_bin_probs())
    g = np.cumsum(d.probs)
    s_f = np.cumsum(law.hist_bin_probs()[::-1])[::-1]  # P(Y >= bin)
    s_g = np.cumsum(d.probs[::-1])[::-1]
    eff = float(max(np.max(np.abs(g ** row_len - f ** row_len)),
                    np.max(np.abs(s_g ** row_len - s_f ** row_len))))

    def pred(n):
        m = extremes_mde(law, n, (row_len,), alpha)
        return not math.isnan(m) and eff >= m
    return pred, eff


def _bin_of_value(law, value: float) -> int:
    bins = LocalBins.of(law)
    key = law.fmt.ordered_keys(np.array([value]))
    return int(key[0] >> np.uint64(law.fmt.bits - law.fmt.hist_bits)) if bins.exact else \
        int(law.mass_bins.bin_of_keys(key)[0])


def _hole_bins(law, start: float, mass: float) -> np.ndarray:
    """Masses of the finest bins a hole over the quantiles [start, start + mass) touches."""
    probs = LocalBins.of(law).probs
    cum = np.cumsum(probs)
    j0 = int(np.searchsorted(cum, start, side="right"))
    j1 = int(np.searchsorted(cum, start + mass, side="left"))
    return probs[j0:j1 + 1]


def _local_row(check, law, d, alpha):
    """(effect text, n needed) of spikes / scan for a point mass or a hole (no sampling)."""
    bins = LocalBins.of(law)
    families = scan_families(bins.last - bins.first + 1)
    if d.spike is not None:
        value, eps = d.spike
        q = float(bins.probs[_bin_of_value(law, value)])
        if check == "spikes":
            level = alpha / bins.n_positive
        else:  # the one-bin family of the scan, two-sided
            size = next(size for level_, w, size in families if level_ == 0 and w == 1)
            level = alpha / (2 * len(families) * size)
        n = smallest_n(lambda m: critical_excess(m, q, level) <= eps)
        return f"extra {eps:.3g} of the samples on {value!r} (its bin's mass {q:.3g})", n
    if d.hole is not None and check == "scan":
        start, mass = d.hole
        q_local = float(np.mean(_hole_bins(law, start, mass)))
        n = smallest_n(lambda m: hole_guaranteed(families, len(families), q_local, m, alpha) <= mass)
        return f"hole of mass {mass:.3g} (bins of ~{q_local:.3g} there)", n
    return "—", None


def _resolution_row(name, check, case, law, alpha):
    """(effect text, n needed) of collisions / lattices for the resolution known-bads, from
    their laws' collision probabilities (no sampling): 24-bit uniforms give each of 2^24 cells of
    u its own value (q = 2^-24, where the float32 lattice is finer than those cells); the
    dropped bit merges each even value with its odd neighbour (q ~ 2 q_law); widened float32
    values have the float32 law's q and all lie on the float32 lattice."""
    q_law = float(law.collision_prob)
    if check == "collisions":
        q = {"uniform-24-bits": 2.0 ** -24, "dropped-last-bit": 2.0 * q_law,
             "float32-widened": float(rounded_law(law.dist, torch.float32).collision_prob)}[name]
        ratio = q / q_law
        n = smallest_n(lambda m: collisions_mde(law, m, (), alpha) <= ratio, hi=RESOLUTION_SCAN)
        return f"obs/exp pairs {ratio:.3g} (2^{-math.log2(q):.1f} values, law 2^{-math.log2(q_law):.1f})", n
    if check == "lattices" and name == "float32-widened":
        ratio = 1.0 / float(law.lattice_mass("float32"))
        n = smallest_n(lambda m: lattices_mde(law, m, (), alpha) <= ratio, hi=RESOLUTION_SCAN)
        return f"obs/exp {ratio:.3g} (every value on the float32 lattice)", n
    return "—", None


def check_rows(name, case, dtype, alpha):
    """[(check, effect text, n needed)] for the named checks of one known-bad candidate."""
    cand = resolve(name)
    law = rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)
    d = defect_model(name, case, dtype, law)
    shape = tuple(case.shape)
    out = []
    for check in cand.caught_by:
        pred, eff = None, None
        if check == "hang":
            out.append((check, "first call does not return", "1 call"))
            continue
        if check == "arguments":
            out.append((check, "a > b, std = inf: hang", "—"))
            continue
        if check in ("collisions", "lattices"):
            out.append((check, *_resolution_row(name, check, case, law, alpha)))
            continue
        if d is None:
            out.append((check, "—", "—"))
            continue
        if check in ("spikes", "scan"):
            out.append((check, *_local_row(check, law, d, alpha)))
            continue
        if d.zero_rate is not None:  # a hit where the law has no mass: decisive in atoms/gof/extremes
            if check in ("atoms", "gof", "extremes"):
                out.append((check, f"hits at a (mass 0) at rate {d.zero_rate:.3g}",
                            LN2 / d.zero_rate))
            else:
                out.append((check, "—", "—"))
            continue
        if check == "moments":
            lm, ls = float(law.mean), float(law.std)
            mde = lambda n: moments_mde(law, n, (), alpha)  # noqa: E731
            cands = []
            if d.mean is not None and abs(d.mean - lm) > 0:
                e = abs(d.mean - lm) / ls
                cands.append((f"mean {(d.mean - lm) / ls:+.3g} sigma",
                              smallest_n(lambda n: mde(n)["mean"] <= e)))
            if d.std is not None and abs(d.std / ls - 1) > 0:
                e = abs(d.std / ls - 1)
                cands.append((f"std ratio {d.std / ls:.4g}",
                              smallest_n(lambda n: mde(n)["std"] - 1 <= e)))
            if not cands:
                out.append((check, "no model (see the real run)", "—"))
                continue
            cands.sort(key=lambda c: c[1] if c[1] is not None else math.inf)
            out.append((check, cands[0][0], cands[0][1]))
            continue
        if check == "gof":
            pred, w_at = _gof_pred(law, d, alpha)
            n_pr = samples_drawn(PROFILES["pr"].n, shape)
            eff_txt = f"w {w_at(n_pr):.3g} at pr n (MDE {gof_mde(law, n_pr, (), alpha):.3g})"
        elif check == "ks":
            eff = _ks_effect(law, d)
            pred = lambda n, e=eff: ks_mde(law, n, (), alpha) <= e  # noqa: E731
            eff_txt = f"D {eff:.3g}"
        elif check == "atoms":
            pred, eff = _atoms_pred(law, d, alpha)
            eff_txt = f"obs/exp {eff:.3g}" if eff is not None else "—"
        elif check == "tails":
            pred, eff = _tails_pred(law, d, alpha)
            eff_txt = f"obs/exp {eff:.3g}" if eff is not None else "—"
        elif check == "extremes":
            pred, eff = _extremes_pred(law, d, int(shape[-1]), alpha)
            eff_txt = f"D {eff:.3g}"
        elif check == "independence":
            if d.r_lag1 is None:
                out.append((check, "—", "—"))
                continue
            e = abs(d.r_lag1)
            pred = lambda n, e=e: independence_mde(law, n, shape, alpha) <= e  # noqa: E731
            eff_txt = f"r {d.r_lag1:+.3g}"
        else:
            out.append((check, "—", "—"))
            continue
        out.append((check, eff_txt, smallest_n(pred) if pred is not None else None))
    return out


def real_run(name, case, dtype) -> dict:
    cand = resolve(name)
    runner = CaseRunner(cand, case, dtype, "cpu", RunConfig(profile="pr", case_timeout=2.0))
    out = {}
    for check in cand.caught_by:
        r = runner.run(check)
        if r.verdict == "fail" and (r.p_value_stage1 == 0 and math.isnan(r.p_value_stage2)):
            txt = "fail (decisive, stage 1)" if check not in ("hang", "arguments") else "fail"
        elif not math.isnan(r.p_value_stage2):
            txt = f"{r.verdict} (p1 {r.p_value_stage1:.2g}, p2 {r.p_value_stage2:.2g} at n {r.n:,})"
        elif not math.isnan(r.p_value_stage1):
            txt = f"{r.verdict} (p1 {r.p_value_stage1:.2g} at n {r.n_stage1:,})"
        else:
            txt = r.verdict
        out[check] = txt
    return out


def power_markdown(alpha: float, run: bool) -> str:
    rows = []
    pr_n = PROFILES["pr"].n
    for name in sorted(PLAN, key=list(REGISTRY).index):
        case_id, dtype = PLAN[name]
        case = case_by_id(case_id)
        cand = resolve(name)
        ran = real_run(name, case, dtype) if run else {}
        for check, eff, n in check_rows(name, case, dtype, alpha):
            if ran:
                verdict = ran.get(check, "—")
            else:
                verdict = "not run (--run)"
            numel = math.prod(case.shape)
            within = ("" if not isinstance(n, float) else
                      (" (< 1 call)" if n <= numel else "")
                      + (" ✓ pr" if n <= samples_drawn(pr_n, tuple(case.shape)) else
                         " nightly" if n <= samples_drawn(PROFILES["nightly"].n, tuple(case.shape))
                         else ""))
            rows.append([name, cand.defect, f"{case_id} {dtype_name(dtype)}", check, eff,
                         fmt_n(n) + within, verdict])
    return markdown(["candidate", "defect", "case", "check", "effect", "n needed (power 0.5)",
                     "at pr n (real run)"], rows)


# ------------------------------------------------------------------------------ (c) measured power


def _sim_counts(rng, n: int, probs: np.ndarray) -> np.ndarray:
    return rng.multinomial(n, probs / probs.sum()).astype(np.int64)


def _sim_spike(law, dtype, n: int, eps: float, rng) -> float:
    """One draw of n samples of the law with an extra point mass eps in its heaviest bin (the
    worst case): spikes' stage-1 p."""
    bins = LocalBins.of(law)
    j = int(np.argmax(bins.probs))
    extra = rng.binomial(n, eps)
    counts = _sim_counts(rng, n - extra, bins.probs)
    counts[j] += extra
    return check_spikes(synthetic_summary(law, dtype, counts), law).p_value


def _sim_hole(law, dtype, n: int, mass: float, rng) -> float:
    """One draw of n samples of the law conditioned on missing the quantiles [u, u + mass), u
    uniform in [0.2, 0.8) (a random alignment with the bins): scan's stage-1 p."""
    probs = LocalBins.of(law).probs.copy()
    cum = np.cumsum(probs)
    u = rng.uniform(0.2, 0.8)
    lo, hi = np.concatenate([[0.0], cum[:-1]]), cum
    overlap = np.clip(np.minimum(hi, u + mass) - np.maximum(lo, u), 0.0, None)
    thinned = np.clip(probs - overlap, 0.0, None)
    return check_scan(synthetic_summary(law, dtype, _sim_counts(rng, n, thinned)), law).p_value


def _power(sim, law, dtype, n: int, size: float, alpha: float, reps: int, tag: int) -> float:
    rng = np.random.default_rng([20260114, n, tag, int(round(size * 1e12))])
    return sum(sim(law, dtype, n, size, rng) < alpha for _ in range(reps)) / reps


def _half_power_point(sim, law, dtype, n: int, mde: float, alpha: float, reps: int, tag: int) -> float:
    """The defect size with measured power 0.5: bisection on log(size) in [mde / 8, 2 mde]."""
    lo, hi = math.log(mde / 8), math.log(2 * mde)
    for _ in range(SIM_BISECT):
        mid = 0.5 * (lo + hi)
        if _power(sim, law, dtype, n, math.exp(mid), alpha, reps, tag) >= 0.5:
            hi = mid
        else:
            lo = mid
    return math.exp(0.5 * (lo + hi))


def simulate_markdown(alpha: float, reps: int = SIM_REPS) -> str:
    """Measured stage-1 power of spikes and scan: at their MDE, and the size with power 0.5
    (bisection), at the pr and nightly n, on multinomial draws of the law's finest bins."""
    case_id, dtype = SIM_CASE
    case = case_by_id(case_id)
    law = _law(case, dtype)
    rows = []
    for prof in ("pr", "nightly"):
        n = samples_drawn(PROFILES[prof].n, tuple(case.shape))
        for tag, (check, mde, sim, what) in enumerate((
                ("spikes", spikes_mde(law, n, (), alpha), _sim_spike, "point mass, heaviest bin"),
                ("scan", scan_mde(law, n, (), alpha), _sim_hole, "hole, random place"))):
            at_mde = _power(sim, law, dtype, n, mde, alpha, reps, tag)
            half = _half_power_point(sim, law, dtype, n, mde, alpha, reps, tag)
            rows.append([check, what, prof, f"{n:,}", g3(mde), f"{at_mde:.2f}", g3(half)])
    return markdown(["check", "defect", "profile", "n", "MDE (formula)", "measured power at the MDE",
                     "measured size with power 0.5"], rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="run each known-bad sampler at pr n")
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--simulate", action="store_true",
                    help="measure the localized checks' power at their MDE (multinomial draws)")
    args = ap.parse_args(argv)
    print(f"### MDE per check (alpha {args.alpha:g}, power 0.5, one stage)\n")
    print(mde_markdown(args.alpha))
    print(f"\n### MDE per shape class at pr (alpha {args.alpha:g}, power 0.5, one stage)\n")
    print(shape_mde_markdown(args.alpha))
    print(f"\n### Power: known-bad built-ins (alpha {args.alpha:g}; pr n = 2^22, nightly n = 2^27)\n")
    print(power_markdown(args.alpha, args.run))
    if args.simulate:
        case_id, dtype = SIM_CASE
        print(f"\n### Measured power of the localized checks ({case_id} {dtype_name(dtype)}, "
              f"{SIM_REPS} draws per point, stage 1 p < {args.alpha:g})\n")
        print(simulate_markdown(args.alpha))
    return 0


if __name__ == "__main__":
    sys.exit(main())
