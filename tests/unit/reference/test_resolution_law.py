"""The law at the resolution of single values against mpmath: sum p^2 and sum p^3 of a law's atoms
(`RoundedLaw.collision_prob`, `collision_cube`) and its mass on a coarser format's values
(`RoundedLaw.lattice_mass`), each summed atom by atom over 40-digit mpmath cell masses
(`reference.oracle.Oracle`), on laws narrow enough to enumerate; and the bin rules of wide laws
against the enumeration where both apply. Deterministic (no sampling)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import torch

from reference import TruncatedNormal, rounded_law
from reference import resolution
from reference import rounded as R
from reference.dtypes import float_format
from reference.oracle import Oracle


def _fresh(params, dtype):
    """A law built anew (not from the cache: the tests below change module constants)."""
    return R.RoundedLaw(TruncatedNormal(*params), float_format(dtype))


def _mp_cell_mass(oracle: Oracle, v: float, fmt) -> mp.mpf:
    """mpmath mass of value v's rounding cell in `fmt` (exact midpoints to its neighbours)."""
    lo = (mp.mpf(v) + mp.mpf(float(fmt.next_down(np.array([v]))[0]))) / 2
    hi = (mp.mpf(v) + mp.mpf(float(fmt.next_up(np.array([v]))[0]))) / 2
    return oracle.prob(lo, hi)


def _mp_atoms(params, fmt, values) -> list:
    oracle = Oracle(*params, dps=40)
    with mp.workdps(40):
        return [_mp_cell_mass(oracle, float(v), fmt) for v in values]


#: (law parameters, dtype): a few hundred atoms at most, bound atoms partial or outside [a, b].
NARROW = [
    ((0.5, 1e-6, 0.5 - 3e-6, 0.5 + 3e-6), torch.float32),  # ~100 atoms, 16 per std
    ((0.0, 1.0, 8.0, 8.0001), torch.float32),  # ~100 atoms of one spacing, bounds not on the lattice
    ((8.0, 0.001, 8.0, 8.0 + 2e-13), torch.float64),  # ~110 float64 atoms, a at a binade's foot
]


@pytest.mark.parametrize("params,dtype", NARROW, ids=str)
def test_sums_of_powers_match_mpmath(params, dtype):
    law = _fresh(params, dtype)
    fmt = law.fmt
    lo_key, hi_key = (int(k) for k in fmt.ordered_keys(np.array([law.support_lo, law.support_hi])))
    values = fmt.values_from_keys(np.arange(lo_key, hi_key + 1, dtype=np.uint64))
    assert 50 <= values.size <= 400
    p = _mp_atoms(params, fmt, values)
    with mp.workdps(40):
        q2, q3 = mp.fsum(x**2 for x in p), mp.fsum(x**3 for x in p)
        assert abs(mp.fsum(p) - 1) < mp.mpf(10) ** -30  # every atom of the law is there
    assert law.collision_prob == pytest.approx(float(q2), rel=1e-12)
    assert law.collision_cube == pytest.approx(float(q3), rel=1e-12)


#: (law parameters, dtype, coarse format): a few coarse values in a law of many atoms, bounds on
#: and off the coarse lattice.
LATTICES = [
    ((0.0, 1.0, 1.0, 1.0625), torch.float32, "bfloat16"),  # 9 bf16 values, both bounds on them
    ((0.0, 1.0, 1.0, 1.0625), torch.float32, "float16"),  # 65 float16 values
    ((0.3, 0.5, 0.299, 0.30002), torch.float32, "float16"),  # bounds off the lattice
    ((8.0, 0.001, 8.0, 8.00001), torch.float64, "float32"),  # 11 float32 values in float64
]


@pytest.mark.parametrize("params,dtype,coarse", LATTICES, ids=str)
def test_lattice_mass_matches_mpmath(params, dtype, coarse):
    law = _fresh(params, dtype)
    cf = float_format(coarse)
    a, b = params[2], params[3]
    k0, k1 = (int(k) for k in cf.ordered_keys(np.array([a, b])))
    values = cf.values_from_keys(np.arange(k0 - 1, k1 + 2, dtype=np.uint64))
    values = values[(values >= law.support_lo) & (values <= law.support_hi)]
    assert 3 <= values.size <= 100
    with mp.workdps(40):
        expected = float(mp.fsum(_mp_atoms(params, law.fmt, values)))
    assert law.lattice_mass(coarse) == pytest.approx(expected, rel=1e-12)


def test_lattice_mass_of_a_wide_float64_law_against_its_atoms(monkeypatch):
    """The wide-law rule (2^-29 of the mass between float32's smallest normal and its largest)
    against the float32 values' float64 atoms summed one by one, on a law of ~3e5 float32
    values where both apply: equal up to the cells at the binade edge 1.0 (~1 / 3e5)."""
    params = (1.0, 0.01, 0.99, 1.01)
    exact = _fresh(params, torch.float64).lattice_mass("float32")
    monkeypatch.setattr(resolution, "ENUMERATE_MAX", 1 << 10)
    ruled = _fresh(params, torch.float64).lattice_mass("float32")
    assert ruled == pytest.approx(2.0**-29, rel=1e-3)
    assert ruled == pytest.approx(exact, rel=2e-5)


def test_collision_cube_by_bins_against_the_atoms():
    """h^2 int f^3 per bin (wide laws) against sum p^3 of the enumerated atoms (16 atoms per std:
    the bin rule's O((h / std)^2) error is ~1e-8 here, far below what a variance needs)."""
    law = rounded_law(TruncatedNormal(0.5, 1e-4, 0.5 - 4e-4, 0.5 + 4e-4), torch.float32)
    assert law.collision_from_bins(power=3) == pytest.approx(law.collision_cube, rel=1e-6)
    assert law.collision_from_bins(power=2) == pytest.approx(law.collision_prob, rel=1e-6)


def test_lattice_mass_refuses_a_finer_format():
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float32)
    with pytest.raises(ValueError, match="not coarser"):
        law.lattice_mass("float64")
    assert math.log2(law.lattice_mass("bfloat16")) == pytest.approx(-16.0, abs=1e-4)
