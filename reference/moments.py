"""The moments of a rounded law: mean, variance, skewness, excess kurtosis and the central moments
up to 8 of Y = RN(X).

Exact from the atoms where they are few enough: every atom of a <=16-bit law, and the atoms of a
32/64-bit law between its 1e-30 quantiles (`reference.intervals.ENUMERATE_TAIL`) when there are at
most `ENUMERATE_MAX`; a law with many atoms (more than `LATTICE_MIN`) has them summed in closed form
per row of atoms (`_lattice_stats`). Beyond that, the continuous law's moments, with Sheppard's
bound on what rounding changes (`LawMoments.sheppard_bound`)."""

from __future__ import annotations

import functools
import math

import numpy as np

from .atoms import Atoms
from .cells import CellMeasure
from .intervals import IntervalMasses

__all__ = ["ENUMERATE_MAX", "LATTICE_MIN", "LawMoments"]

#: 32/64-bit laws are enumerated atom by atom (exact moments, collision probability) when the
#: lattice values between the 1e-30 and 1 - 1e-30 quantiles are at most this many.
ENUMERATE_MAX = 1 << 22

#: 32/64-bit laws with more atoms than this between the 1e-30 quantiles get their moments and
#: collision probability from `_lattice_stats` (rows of atoms summed in closed form).
LATTICE_MIN = 1 << 15
_LAT_RHO = 1.0 / 16.0  # |x s| <= this inside a row (s: offset from the row's centre, standardized)
_LAT_Q = 16  # terms of exp(-x s - s^2/2) kept: the rest is below e^1.5 (1/16)^17 = 4e-20


def _stats_of_atoms(v: np.ndarray, p: np.ndarray):
    """(mean, central moments 0..8, sum p**2, (anchor, offset)) of atoms (values v, masses p):
    mean = anchor + offset, with the offset unrounded by the anchor's ulp."""
    collision = float(np.dot(p, p))
    fin = np.isfinite(v)
    if np.any(p[~fin] > 0):
        return np.nan, np.full(9, np.nan), collision, (np.nan, 0.0)
    keep = fin & (p > 0)
    v, p = v[keep], p[keep]
    total = p.sum()
    # Offsets from the heaviest atom (exact: the atoms are within a factor 2 of each other or far
    # apart), and the mean as an offset from it: a large mean with a tiny spread keeps its digits
    # (v - mean with the mean rounded to float64 would shift every offset by up to half an ulp).
    c = v[np.argmax(p)]
    pw = p / total
    offset = float(np.dot(pw, v - c))
    mean = c + offset
    dv = (v - c) - offset
    cm = np.empty(9)
    for k in range(9):
        cm[k] = float(np.dot(pw, dv**k)) if k else 1.0
    cm[1] = 0.0
    return float(mean), cm, collision, (float(c), offset)


def _lattice_stats(cells: CellMeasure, klo: int, khi: int):
    """`LawMoments.atom_stats` of a 32/64-bit law with many atoms, without a pass over them.

    The keys klo..khi are cut into runs of one binade; inside a run the atoms are v0 + k h with
    cells [v - h/2, v + h/2] (measured from the law's origin, exact: `reference.cells.law_origin`).
    Rows of 2K + 1 such atoms around a centre x_r (standardized, in the law's frame) have masses

        p_k = w e^{l(x_r)} int_{-1/2}^{1/2} exp(-x_r s - s^2/2) dt,  s = k d + w t,

    (l = log density relative to the frame's anchor, d = w = h / std): a polynomial in k from the
    Taylor series of exp(-x s - s^2/2) (Hermite polynomials; |x s| <= 1/16, 16 terms), which the
    law gives (`TruncatedNormal.lattice_series`), so the row's sums of p, p k^m (m <= 8) and p^2
    are closed forms in sum_k k^j. The masses are those of `CellMeasure.mass` to ~1e-16 relative
    (the same integral, the same standardization); the atoms at run ends, the bound atoms and
    rows' leftovers are enumerated (`CellMeasure.enumerate_keys`).
    None where this does not apply (the enumeration then does it all)."""
    fmt = cells.fmt
    origin = cells.origin
    series = cells.lattice_series
    if series is None or cells.via_float32:
        return None
    kf_lo, kf_hi = fmt.finite_key_range
    if not (kf_lo <= klo <= khi <= kf_hi):
        return None
    mb = fmt.man_bits
    cuts = list(range(((klo >> mb) + 1) << mb, khi + 1, 1 << mb))
    if len(cuts) > 64:
        return None
    run_lo = [klo] + cuts
    run_hi = [c - 1 for c in cuts] + [khi]
    q = np.arange(_LAT_Q + 1)
    rows_v, rows_p0, rows_s, rows_c2, rows_n = [], [], [], [], []
    extra = []  # key ranges enumerated atom by atom
    for ka0, kb0 in zip(run_lo, run_hi):
        if kb0 - ka0 < 6:
            extra.append((ka0, kb0))
            continue
        ka = ka0 + 1
        kb = kb0 - 1
        va = float(fmt.values_from_keys(np.array([ka], dtype=np.uint64))[0])
        vb = float(fmt.values_from_keys(np.array([kb], dtype=np.uint64))[0])
        big_h = float(fmt.spacing(np.array([va]))[0])
        # (v - origin is exact in the law's window: `reference.cells.law_origin`)
        half, _, log_base, beta = series(va - origin, vb - origin, big_h, _LAT_RHO, _LAT_Q)
        n_rows = log_base.size
        if n_rows == 0:
            extra.append((ka0, kb0))
            continue
        width = 2 * half + 1
        extra.append((ka0, ka - 1))
        done = ka + n_rows * width
        extra.append((done, kb0))
        v_r = va + (np.arange(n_rows) * width + half) * big_h  # the rows' centres
        kappa = np.arange(-half, half + 1) / half
        powers = np.empty(2 * _LAT_Q + 9)
        acc = np.ones(width)
        for j in range(powers.size):
            powers[j] = acc.sum()
            acc *= kappa
        base = np.exp(log_base)
        qm = powers[q[:, None] + np.arange(9)[None, :]]  # (Q+1) x 9: sum kappa^(n+m)
        scale = (big_h * half) ** np.arange(9)
        s_rm = base[:, None] * (beta @ qm) * scale[None, :]  # sum_k p (k H)^m
        qc = powers[q[:, None] + q[None, :]]
        c2 = np.exp(2.0 * log_base) * np.einsum("rn,nm,rm->r", beta, qc, beta)
        rows_v.append(v_r)
        rows_p0.append(s_rm[:, 0])
        rows_s.append(s_rm)
        rows_c2.append(c2)
        rows_n.append(np.full(n_rows, float(width)))
    if not rows_v:
        return None
    ev, ep = [], []
    for k0, k1 in extra:
        if k1 >= k0:
            v, p = cells.enumerate_keys(k0, k1)
            ev.append(v)
            ep.append(p)
    ev = np.concatenate(ev) if ev else np.empty(0)
    ep = np.concatenate(ep) if ep else np.empty(0)
    rv = np.concatenate(rows_v)
    rp0 = np.concatenate(rows_p0)
    rs = np.concatenate(rows_s)
    collision = float(np.sum(np.concatenate(rows_c2))) + float(np.dot(ep, ep))
    keep = ep > 0
    ev, ep = ev[keep], ep[keep]
    total = float(rp0.sum()) + float(ep.sum())
    # The centre: the heaviest enumerated atom or the centre of the row heaviest per atom (only
    # the digits of the sums depend on it: any atom near the top will do).
    per_atom = rp0 / np.concatenate(rows_n)
    i_row = int(np.argmax(per_atom))
    if ep.size and ep.max() > per_atom[i_row]:
        c = float(ev[np.argmax(ep)])
    else:
        c = float(rv[i_row])
    offset = (float(np.dot(rp0, rv - c)) + float(rs[:, 1].sum())
              + float(np.dot(ep, ev - c))) / total
    mean = c + offset
    d_r = (rv - c) - offset  # offsets from c, not from the rounded mean (see `_stats_of_atoms`)
    dv = (ev - c) - offset
    cm = np.empty(9)
    cm[0], cm[1] = 1.0, 0.0
    for k in range(2, 9):
        acc = np.zeros(rv.size)
        for m in range(k + 1):
            acc += math.comb(k, m) * d_r ** (k - m) * rs[:, m]
        cm[k] = (float(acc.sum()) + float(np.dot(ep, dv**k))) / total
    return float(mean), cm, collision, (c, offset)


class LawMoments:
    """Mean, variance, skewness, excess kurtosis and central moments up to 8 of Y, and the atoms'
    collision sum they are computed with (`atom_stats`)."""

    def __init__(self, cells: CellMeasure, atoms: Atoms, intervals: IntervalMasses):
        self.cells = cells
        self.atoms = atoms
        self.intervals = intervals

    @functools.cached_property
    def atom_stats(self):
        """(mean, central moments 0..8, collision probability, (anchor, offset)) of the atoms: every
        atom for <=16-bit formats; for 32/64-bit the atoms between the 1e-30 quantiles when there
        are at most ENUMERATE_MAX of them (else None). Many atoms: `_lattice_stats` (no per-atom
        work)."""
        if self.atoms.enumerated:
            return _stats_of_atoms(self.atoms.values, self.atoms.probs)
        klo, khi = self.intervals.bulk_keys
        n = khi - klo + 1
        if n > ENUMERATE_MAX:
            return None
        if n > LATTICE_MIN:
            stats = _lattice_stats(self.cells, klo, khi)
            if stats is not None:
                return stats
        return _stats_of_atoms(*self.cells.enumerate_keys(klo, khi))

    @property
    def moments_from_atoms(self) -> bool:
        """True when the moments are those of the atoms; False: the continuous law's (see
        `sheppard_bound`)."""
        return self.atom_stats is not None

    @functools.cached_property
    def sheppard_bound(self) -> float:
        """For continuous-law moments: h**2 / (12 var) with h the widest lattice spacing between the
        1e-30 quantiles -- Sheppard's relative change of the variance by rounding (0 when exact)."""
        if self.atom_stats is not None:
            return 0.0
        fmt = self.cells.fmt
        v = fmt.values_from_keys(np.array(self.intervals.bulk_keys, dtype=np.uint64))
        h = float(np.max(fmt.spacing(v)))
        return h * h / (12.0 * float(self.cells.dist.var))

    @functools.cached_property
    def moments(self) -> tuple[float, np.ndarray, tuple[float, float]]:
        """(mean, central moments 0..8, (anchor, offset): mean = anchor + offset) of Y."""
        stats = self.atom_stats
        if stats is None:
            # 32/64-bit with >2**22 atoms in the bulk: the lattice is then fine against the spread
            # (spacing <= 2**-23 |x|), and rounding changes the variance by h**2/12 relative to var,
            # below 1e-10 in every case of the grid (`sheppard_bound`), far under any sampling
            # error.
            d = self.cells.dist
            cm = np.array([1.0, 0.0] + [float(d.central_moment(k)) for k in range(2, 9)])
            return float(d.mean), cm, (float(d.mean), 0.0)
        return stats[0], stats[1], stats[3]

    @property
    def mean(self) -> float:
        """E[Y]."""
        return self.moments[0]

    def mean_offset(self, center: float) -> float:
        """E[Y] - center, without rounding E[Y] to float64 first: a float64 law a few ulps wide
        has a mean whose own rounding (half an ulp) is many standard errors of a sample mean."""
        anchor, offset = self.moments[2]
        return (anchor - float(center)) + offset

    @property
    def var(self) -> float:
        """Var[Y]."""
        return float(self.moments[1][2])

    @property
    def std(self) -> float:
        """The standard deviation of Y."""
        return float(np.sqrt(self.var))

    @property
    def skewness(self) -> float:
        """The skewness of Y (NaN for a single atom)."""
        cm = self.moments[1]
        return float(cm[3] / cm[2] ** 1.5) if cm[2] > 0 else np.nan

    @property
    def kurtosis(self) -> float:
        """Excess kurtosis of Y."""
        cm = self.moments[1]
        return float(cm[4] / cm[2] ** 2 - 3.0) if cm[2] > 0 else np.nan

    def central_moment(self, k: int) -> float:
        """E[(Y - E[Y])**k], k in 0..8."""
        if not 0 <= int(k) <= 8:
            raise ValueError(f"central_moment: k must be in 0..8, got {k}")
        return float(self.moments[1][int(k)])
