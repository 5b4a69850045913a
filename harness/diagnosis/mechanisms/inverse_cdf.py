"""The `inverse-cdf-in-dtype` mechanism: an inverse-CDF sampler whose every step is rounded
into the output dtype (torch's `trunc_normal_` up to 2.11, timm's copy of it):

    u = uniform_(2 Phi(alpha) - 1, 2 Phi(beta) - 1)         (torch's uniform kernel)
    x = RN(RN(RN(erfinv(u)) s) + mean), s = std sqrt(2)       (each step via float32)
    x = clamp(x, a, b)

Its law is pushed value by value over the dtype's values of u (16-bit: at most 2^16): the uniform's
lattice counted per value as `uniform-proposals` counts it
(`harness.diagnosis.mechanisms.proposals.UniformLattice`: 2^24 equally likely indices, a value
rounding up to `to` written as `from`), each carried through the steps to its output value, every
product and sum computed in float32 and rounded into the dtype (the arithmetic of a 16-bit tensor
op, with torch's scalar conventions: a factor enters float32 as is, an added scalar is cast into the
dtype first). The rule is the construction, not one library's code, so it is priced in each
space an inverse CDF is written in:

* erf space on the law's own parameters (above);
* erf space on the standard law, the bounds in sigma units, then scaled and shifted in the dtype
  (timm's `trunc_normal_tf_`);
* Phi space: u = uniform_(Phi(alpha), Phi(beta)), z = ndtri(u) rounded into the dtype, then
  scaled, shifted and clamped to [a, b] in the dtype.

The histogram, which holds every value in 16-bit, must fit one of them (chi-square p >=
AGREE_LEVEL) where it departs from the rounded law at the false-match rate. A fit then explains
every check that reads the values' counts, the resolution checks included (their repeats are
functions of the per-value counts the fit judged): the whole law of the values, where
`coarse-uniform` reads its uniform's end cell alone (the atom at a bound and the cut far tail),
so the catalog lists this row before that one.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ...families.common import cached_on_law
from ..evidence import AGREE_LEVEL, Evidence, chi2_fit, share_text
from ..match import Match, Mechanism
from .bound_atoms import (BEYOND_CELL, BINNED, REPEATED, bound_value, finite_sides, law_atom,
                          sigma_text)
from .proposals import UniformLattice, in_accumulator, in_dtype


def clamped_in_dtype(fmt, x: np.ndarray, a: float, b: float) -> np.ndarray:
    """``x.clamp_(a, b)`` on a 16-bit tensor: x compared with the bounds as float32 holds them,
    a value beyond one written as that bound cast into the dtype."""
    lo32, hi32 = (float(v) for v in in_accumulator(np.array([a, b]), fmt))
    lo, hi = (float(v) for v in fmt.round_torch(np.array([a, b])))
    with np.errstate(invalid="ignore"):
        return np.where(x < lo32, lo, np.where(x > hi32, hi, x))


def scaled_in_dtype(fmt, x: np.ndarray, mean: float, std: float) -> np.ndarray:
    """``x.mul_(std).add_(mean)`` on a 16-bit tensor: each step via float32."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = in_dtype(x * float(in_accumulator(np.array([std]), fmt)[0]), fmt)
        return in_dtype(x + float(fmt.round_torch(np.array([mean]))[0]), fmt)


def pushed_values(fmt, mean: float, std: float, a: float, b: float):
    """(values, counts): the output value of each of the dtype's u values on TN(mean, std, a,
    b) in erf space (u on [erf(alpha / sqrt 2), erf(beta / sqrt 2)], x = erfinv(u) std sqrt 2 +
    mean), and how many of the uniform's 2^D lattice indices write that u (None: an empty
    range)."""
    low = math.erf((a - mean) / std / math.sqrt(2.0))
    high = math.erf((b - mean) / std / math.sqrt(2.0))
    if not high > low:
        return None
    _, u, counts = UniformLattice(fmt, low, high).counts()
    with np.errstate(over="ignore", invalid="ignore"):
        z = in_dtype(special.erfinv(u), fmt)
    return clamped_in_dtype(fmt, scaled_in_dtype(fmt, z, mean, std * math.sqrt(2.0)), a, b), \
        counts


def phi_pushed_values(fmt, mean: float, std: float, a: float, b: float):
    """(values, counts) as `pushed_values`, in Phi space: u on [Phi(alpha), Phi(beta)], z =
    ndtri(u) rounded into the dtype, then scaled, shifted and clamped to [a, b] in the dtype."""
    low = float(special.ndtr((a - mean) / std))
    high = float(special.ndtr((b - mean) / std))
    if not high > low:
        return None
    _, u, counts = UniformLattice(fmt, low, high).counts()
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        z = in_dtype(special.ndtri(u), fmt)
    return clamped_in_dtype(fmt, scaled_in_dtype(fmt, z, mean, std), a, b), counts


#: The constructions: in erf space on the law's own parameters (torch <= 2.11, timm's
#: trunc_normal_), in erf space on the standard law on the bounds in sigma units, then scaled
#: and shifted in the dtype (timm's trunc_normal_tf_), and in Phi space (ndtri), then scaled,
#: shifted and clamped in the dtype.
VARIANTS = ("on the law", "standard, then scaled", "Phi space, then scaled")


def pushed_bin_probs(law, variant: str = VARIANTS[0]) -> np.ndarray:
    """The per-value histogram's masses under the dtype's inverse CDF (the module's steps)."""
    fmt, dist = law.fmt, law.dist
    mean, std, a, b = float(dist.loc), float(dist.scale), float(dist.a), float(dist.b)
    probs = np.zeros(1 << fmt.hist_bits, dtype=np.float64)
    if variant == VARIANTS[0]:
        pushed = pushed_values(fmt, mean, std, a, b)
    elif variant == VARIANTS[1]:
        pushed = pushed_values(fmt, 0.0, 1.0, (a - mean) / std, (b - mean) / std)
        if pushed is not None:
            pushed = scaled_in_dtype(fmt, pushed[0], mean, std), pushed[1]
    else:
        pushed = phi_pushed_values(fmt, mean, std, a, b)
    if pushed is None:
        return probs
    x, counts = pushed
    keep = ~np.isnan(x) & (counts > 0)
    keys = fmt.ordered_keys(x[keep]).astype(np.int64)
    np.add.at(probs, keys, counts[keep])
    total = probs.sum()
    return probs / total if total > 0 else probs


def end_cell_text(ev: Evidence, probs: np.ndarray) -> str:
    """'; the uniform's end cell on RN(a) = -2 (-100 sigma): observed 0.002 +- 8.7e-05 =
    2^-8.97, predicted 0.00195, the law 0' for each bound the pushed law loads beyond a rounding
    cell (BEYOND_CELL x the law's atom): the atom `coarse-uniform` reads, as this law prices it
    ('' where none)."""
    if not ev.has("atoms") or ev.n <= 0:
        return ""
    texts = []
    for side in finite_sides(ev.law):
        value = bound_value(ev.law, side)
        predicted = float(probs[int(ev.law.fmt.ordered_keys(np.array([value]))[0])])
        if not predicted > BEYOND_CELL * law_atom(ev.law, side):
            continue
        observed = ev.atom_count(side) / ev.n
        power = f" = 2^{np.log2(observed):.3g}" if observed > 0 else ""
        texts.append(f"; the uniform's end cell on RN({side}) = {value:.6g} "
                     f"({sigma_text(ev, value)}): observed {share_text(observed, ev.n)}{power}, "
                     f"predicted {predicted:.3g}, the law {law_atom(ev.law, side):.3g}")
    return "".join(texts)


class InverseCdfInDtype(Mechanism):
    name = "inverse-cdf-in-dtype"
    explains = BINNED | REPEATED
    doc = ("An inverse CDF whose uniform, inverse (erfinv, or ndtri in Phi space), scale, shift "
           "and clamp are each rounded into the output dtype (torch <= 2.11, timm, or the same "
           "steps in Phi space). Prediction: the law pushed value by value over the dtype's "
           "lattice of u; the per-value histogram (16-bit) departs from the rounded law and fits "
           "the pushed one of one construction, which then explains every check that reads the "
           "values' counts (the resolution checks' repeats are functions of them).")

    def test(self, ev: Evidence) -> Match | None:
        if ev.bins is None or ev.summary.hist_bits != ev.law.fmt.bits or not ev.binned_departs:
            return None
        for variant in VARIANTS:
            probs = cached_on_law(ev.law, f"_inverse_cdf_in_dtype_{VARIANTS.index(variant)}",
                                  lambda law, v=variant: pushed_bin_probs(law, v))
            p = chi2_fit(ev.hist, probs)
            if p is None or p < AGREE_LEVEL:
                continue
            written = int(np.count_nonzero(probs))
            note = (f"the histogram fits the inverse CDF computed in the dtype ({variant}; "
                    f"chi-square p {p:.2g}): {written} values reachable from the dtype's "
                    f"uniforms, where the law writes {int(np.count_nonzero(ev.bins.probs))}; "
                    f"not the rounded law (p {ev.canonical_fit:.2g})")
            note += end_cell_text(ev, probs)
            return self.match(note, parameter=written)
        return None
