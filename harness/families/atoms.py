"""The atoms family: the counts at the boundary atoms RN(a) and RN(b) and at zero, and
`check_atoms`, their masses against the law's (exact binomial tests, Bonferroni across the
components).

State (`AtomsState`): ``n_at_rn_a``, ``n_at_rn_b``, and ``n_at_zero`` (+0 and -0, counted where
RN(a) < 0 < RN(b)). For 16-bit and 8-bit dtypes they come from the per-pattern histogram at the
end; for 32/64-bit ones a chunk is counted only when its min/max says it reached the value.

The name is `reference.atoms`'s on purpose: a family is named after the part of the law it
judges (`reference.atoms` computes the atoms' masses, this family counts and tests them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..key_bins import signed
from ..declaration import statistical
from ..engine import Family
from ..result import Outcome
from ..summary import Summary
from . import binned
from .binned import exact_values
from .common import (binom_mde_ratio, binom_two_sided, bonferroni, cached_on_law, fmt_value,
                     not_applicable, quiet)


@dataclass
class AtomsState:
    """Counts at RN(a), RN(b) and zero."""

    n_at_rn_a: int = 0
    n_at_rn_b: int = 0
    n_at_zero: int = 0  # +0 and -0, counted where RN(a) < 0 < RN(b)

    @classmethod
    def merge(cls, parts, whole) -> "AtomsState":
        out = cls(*(sum(int(getattr(p, name)) for p in parts)
                    for name in ("n_at_rn_a", "n_at_rn_b", "n_at_zero")))
        out.recount(whole)
        return out

    def recount(self, whole: Summary) -> None:
        """The counts from a per-pattern histogram (16-bit and 8-bit dtypes), where it has a
        finite value."""
        seen = exact_values(whole)
        if seen is None:
            return
        v, c = seen
        self.n_at_rn_a = int(c[v == whole.rn_a].sum())
        self.n_at_rn_b = int(c[v == whole.rn_b].sum())
        self.n_at_zero = int(c[v == 0].sum()) if whole.rn_a < 0 < whole.rn_b else 0


class AtomsFold:
    """The counts at the atoms of each chunk that reaches them (32/64-bit dtypes)."""

    def __init__(self, law, shape: tuple, fold):
        self.owner = fold
        self.state = AtomsState()

    def fold(self, chunk) -> None:
        f = self.owner
        if f.exact_hist:
            return
        values = chunk.finite_values
        if values is None:
            return
        flat, ints, lo, hi = values
        s, state = f.s, self.state
        # Scalars below are representable in the dtype, so comparing in the dtype is exact.
        if lo <= s.rn_a <= hi:
            state.n_at_rn_a += self._count_equal(flat, ints, s.rn_a)
        if lo <= s.rn_b <= hi:
            state.n_at_rn_b += self._count_equal(flat, ints, s.rn_b)
        if lo <= 0.0 <= hi and s.rn_a < 0.0 < s.rn_b and not self._holds_no_zero(chunk):
            state.n_at_zero += self._count_equal(flat, ints, 0.0)

    def _holds_no_zero(self, chunk) -> bool:
        """Whether the chunk surely holds no +0 or -0, told by one reduction where the fold
        standardizes around 0 (z = x / scale): a zero gives z^2 = 0, so a positive least z^2
        rules zeros out. z^2 is the moments family's, computed once per chunk anyway. False
        where it cannot tell (a zero z^2 from a zero, an underflow or a non-finite value)."""
        return self.owner.center_work == 0 and float(chunk.z2.min()) > 0

    def _count_equal(self, flat: torch.Tensor, ints: torch.Tensor, value: float) -> int:
        """How many elements equal `value` (a finite value of the dtype; +0 and -0 both count).

        Away from zero a value has one bit pattern, so XOR and count_nonzero (two integer passes)
        do it; `(x == v).sum()` costs three times as much on CPU (a bool tensor, then an int64
        copy of it for the sum)."""
        if value == 0:  # -0.0 is not "nonzero" either; no bool tensor is written
            return flat.numel() - int(torch.count_nonzero(flat))
        f = self.owner
        pattern = signed(int(f.fmt.encode(np.float64(value))), f.bits)
        xored = torch.bitwise_xor(ints, pattern,
                                  out=f.buffer("ints", tuple(ints.shape), f.int_dtype))
        return ints.numel() - int(torch.count_nonzero(xored))

    def finish(self, whole: Summary) -> AtomsState:
        self.state.recount(whole)
        return self.state


FAMILY = Family("atoms", AtomsFold, needs=(binned.FAMILY,))


def atom_counts(summary: Summary) -> dict:
    """The counts at RN(a) and RN(b) (``n_at_rn_a``, ``n_at_rn_b``) a failing group's figure
    states (`harness.figure_data`); zeros for a Summary not folded with this family."""
    state = summary.states.get(FAMILY.name)
    return {name: int(getattr(state, name, 0)) for name in ("n_at_rn_a", "n_at_rn_b")}


def _zero_mass(law) -> float:
    return float(np.sum(law.atom_probs(np.array([0.0, -0.0]))))


def atom_sides(law):
    """[(name, value, exact mass, Summary counter)]: the finite bounds (one entry when RN(a) ==
    RN(b)), and zero where it lies strictly inside [RN(a), RN(b)]. Zero is the value samplers
    write by construction (a Box-Muller radius of 0 when the uniform is 1, mean + std * 0,
    an underflow flushed to zero), and where the lattice is fine it is an atom of mass ~1e-40."""
    sides = []
    if math.isfinite(law.rn_a):
        sides.append(("RN(a)", float(law.rn_a), float(law.atom_a), "n_at_rn_a"))
    if math.isfinite(law.rn_b) and not (sides and float(law.rn_b) == sides[0][1]):
        sides.append(("RN(b)", float(law.rn_b), float(law.atom_b), "n_at_rn_b"))
    if float(law.rn_a) < 0.0 < float(law.rn_b):
        sides.append(("zero", 0.0, cached_on_law(law, "_zero_mass", _zero_mass), "n_at_zero"))
    return sides


def atoms_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """Smallest obs/exp ratio (> 1, extra mass) at the better-powered bound detected with power 0.5."""
    sides = atom_sides(law)
    if not sides or n <= 0:
        return math.nan
    level = alpha / len(sides)
    return min(binom_mde_ratio(n, p, level, upward=True) for _, _, p, _ in sides)


@quiet
def check_atoms(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = "obs/exp"
    sides = atom_sides(law)
    if not sides:
        return not_applicable("no finite bound and no zero inside the law", unit)
    n = int(summary.n)
    if n == 0:
        return not_applicable("no samples", unit)
    obs = np.array([getattr(summary.atoms, attr) for *_, attr in sides], dtype=np.float64)
    mass = np.array([p for _, _, p, _ in sides], dtype=np.float64)
    exp = n * mass
    ps = binom_two_sided(obs, n, mass)
    p, j = bonferroni(ps)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(exp > 0, obs / np.where(exp > 0, exp, 1.0), np.where(obs > 0, np.inf, 1.0))
    decisive = bool(np.any((mass <= 0) & (obs > 0)))
    name, value = sides[j][0], sides[j][1]
    level = alpha / len(sides)
    upward = obs[j] >= exp[j]
    mde = binom_mde_ratio(n, mass[j], level, upward=upward)
    if math.isnan(mde):  # a deficit is not detectable at this n: state the excess one
        mde = binom_mde_ratio(n, mass[j], level, upward=True)
    msg = (f"worst {name} = {fmt_value(value)}: {int(obs[j])} observed vs {exp[j]:.6g} expected "
           f"(mass {mass[j]:.4g}, obs/exp {ratio[j]:.4g})")
    for o in range(len(sides)):
        if o != j:
            msg += f"; {sides[o][0]}: {int(obs[o])} vs {exp[o]:.6g}"
    details = {f"p_{s[0]}": float(q) for s, q in zip(sides, ps)}
    return Outcome(statistic=float(obs[j]), p_value=0.0 if decisive else p, effect=float(ratio[j]),
                   effect_unit=unit, mde=mde, message=msg, decisive=decisive, details=details)


ATOMS = statistical(
    "atoms", check_atoms, families=(FAMILY,),
    doc='Mass of the boundary atoms RN(a) and RN(b).',
    method=(
        "Counts at RN(a) and RN(b) against their exact masses law.atom_a / law.atom_b: exact "
        "two-sided binomial tests (doubled smaller tail, valid for any n and conservative), "
        "Bonferroni over the finite bounds (one test when RN(a) == RN(b)); not applicable when both "
        "bounds are infinite. A positive count at an atom of mass 0 is decisive. This is the check "
        "that sees a sampler that rounds first and truncates after (a whole cell instead of the "
        "half cell), clamping, or a point mass at a bound. False-alarm rate <= alpha. Effect: "
        "observed/expected count at the worse bound. MDE: the obs/exp ratio (extra mass) at the "
        "better-powered bound whose mean sits on the critical count at level alpha / bounds."
    ),
    unit="obs/exp (extra mass at a bound)",
    mde=atoms_mde,
)
