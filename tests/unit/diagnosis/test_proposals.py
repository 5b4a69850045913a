"""`uniform-proposals`: the law of a rejection sampler whose uniforms and acceptance test live in
the dtype, priced by the reference, names torch's uniform branch and nothing of an exact sampler.

The model's parts are checked bit for bit against the installed torch (the lock's 2.13): the
proposal lattice on the same random stream, the acceptance test's arithmetic on every value of a
window, ``log`` of every value ``uniform_()`` writes. Then the catalog reads torch's Summaries.

Failure chances. Bit-for-bit checks: none (deterministic). Torch side: the runs use the default
run seed, so each verdict is deterministic; over run seeds, RN(b) is empty where the law expects
>= 128 values at these n (P(0) <= e^-128 under the law, so the departure holds), and a true
mechanism fails its atoms' agreement or its histogram's fit with probability <= 2 AGREE_LEVEL =
2e-6 each. Exact side: each row of the catalog matches an exact Summary with probability <= 2
FALSE_MATCH (two sides at most), library-construction counted once with inverse-cdf-in-dtype (both
match only where the per-value histogram departs from the rounded law at FALSE_MATCH: one event),
the clamped `shifted` once with `clamp` (both only where a bound atom departs at FALSE_MATCH,
`bound_departures`), and coarse-construction counted only on the float32 Summaries (it reads none
narrower) with its five events (equal pairs, last bits, tails, scan, histogram): 17 rows x 2e-9
x 28 Summaries (7 cases x 2 samplers x 2 seeds) + 1 row x 5e-9 x 8 = 9.92e-7 <= 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.diagnosis.mechanism_catalog import FALSE_MATCH, MECHANISMS, diagnose, explain
from harness.diagnosis.mechanisms.bound_atoms import BINNED
from harness.diagnosis.mechanisms.proposals import (ProposalLaw, UniformLattice, acceptance_table,
                                                    in_dtype, log_density_test)
from harness.checks import summarize_samples
from reference import TruncatedNormal, float_format, rounded_law
from summaries import stage_one

pytestmark = pytest.mark.usefixtures("one_thread")




def test_the_lattice_is_torchs_uniform_bit_for_bit():
    """uniform_(a, b) and the float32/float64 uniform_() on one generator seed: the float
    uniform is j 2^-D, and the lattice's value of that j (a rounded `to` written as `from`) is
    what torch wrote, in every dtype (float64: the kernel's fused multiply-add), bounds the
    dtype cannot hold included (the kernel computes on them as float32 holds them)."""
    for dtype, source in ((torch.bfloat16, torch.float32), (torch.float16, torch.float32),
                          (torch.float32, torch.float32), (torch.float64, torch.float64)):
        fmt = float_format(dtype)
        for lo, hi in ((1.0, 3.0), (3.0, 4.0), (-1.0, 1.0), (10.0, 1000.0), (0.3, 0.30001),
                       (-0.9544997361036416, 0.9544997361036416), (-0.3, 0.7)):
            lattice = UniformLattice(fmt, lo, hi)
            u = torch.empty(1 << 16, dtype=source).uniform_(
                generator=torch.Generator().manual_seed(7)).double().numpy()
            wrote = torch.empty(1 << 16, dtype=dtype).uniform_(
                lo, hi, generator=torch.Generator().manual_seed(7)).double().numpy()
            j = np.ldexp(u, lattice.digits)
            assert np.array_equal(j, np.round(j))
            values = lattice.raw_values(j.astype(np.int64))
            values = np.where(values == lattice.hi, lattice.start, values)
            assert np.array_equal(values, wrote), (dtype, lo, hi)


def test_the_lattice_floors_into_ra_and_never_writes_rb():
    """bfloat16 uniform_(1, 3), lattice points 1 + j 2^-23: 1 owns [1, 1 + 2^-8] and 3's lower
    half cell [3 - 2^-7, 3), 3 * 2^15 + 2 of the 2^24 points (the tie 1 + 2^-8 goes to the even
    1; 3 - 2^-7 - 2^-23 is a float32 tie that rounds onto the bfloat16 tie 3 - 2^-7, and on to
    the even 3); 3 owns none. uniform_() is 0 on 2^15 + 1 points (its lattice's 0 and the half
    cell below 1), 2^-9 of them: the figure measured on torch."""
    keys, values, counts = UniformLattice(float_format(torch.bfloat16), 1.0, 3.0).counts()
    assert values[0] == 1.0 and counts[0] == 3 * 2**15 + 2
    assert values[-1] == 3.0 and counts[-1] == 0
    assert counts.sum() == 2**24
    _, values, counts = UniformLattice(float_format(torch.bfloat16), 0.0, 1.0).counts()
    assert values[0] == 0.0 and counts[0] == 2**15 + 1
    draws = torch.empty(1 << 22, dtype=torch.bfloat16).uniform_(
        generator=torch.Generator().manual_seed(3))
    zeros = int((draws == 0).sum())
    expected = (1 << 22) * (2**15 + 1) / 2**24  # 8192: 6 sd = 540
    assert abs(zeros - expected) < 6 * expected**0.5


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_acceptance_test_is_torchs_arithmetic(dtype):
    """c(x) = -((x - mean) / std)^2 / 2 - log_peak on every value of each window, and log of
    every value uniform_() writes, as torch computes them in the dtype."""
    fmt = float_format(dtype)
    for mean, std, a, b in ((0.0, 1.0, 1.0, 3.0), (0.0, 1.0, 3.0, 4.0), (0.0, 1000.0, -1.0, 1.0),
                            (0.0, 1.0, 10.0, 1000.0), (0.0, 1.0, 0.3, 0.30001),
                            (0.3, 1.3, 2.0, 5.0)):
        _, values, _ = UniformLattice(fmt, a, b).counts()
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2
        x = torch.tensor(values, dtype=torch.float64).to(dtype)
        torch_c = x.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak).double().numpy()
        assert np.array_equal(torch_c, log_density_test(values, mean, std, a, b, fmt))
    _, values, _ = UniformLattice(fmt, 0.0, 1.0).counts()
    with np.errstate(divide="ignore"):
        ours = in_dtype(np.log(values), fmt)
    logs = torch.tensor(values, dtype=torch.float64).to(dtype).log_().double().numpy()
    assert np.array_equal(logs, ours)
    table, cum, total = acceptance_table(fmt.name)
    assert table[0] == -np.inf and cum[-1] == total


#: (case, dtype, n): torch's uniform branch (the normal's mass in [a, b] <= 0.3), each group the
#: pr grid fails on every binned check; the law expects >= 128 values at RN(b) at this n.
TORCH = [("asym-window-1-3", torch.bfloat16, 1 << 20), ("asym-window-1-3", torch.float16, 1 << 20),
         ("mean-outside-3-4", torch.bfloat16, 1 << 20),
         ("mean-outside-3-4", torch.float16, 1 << 20), ("huge-std", torch.bfloat16, 1 << 20),
         ("huge-std", torch.float16, 1 << 20), ("sub-ulp-window", torch.float32, 1 << 20),
         ("narrow-window-8", torch.float32, 1 << 20),
         ("narrow-window-8", torch.float16, 1 << 20)]


@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
@pytest.mark.parametrize("case,dtype,n", TORCH)
def test_torchs_uniform_branch_reads_uniform_proposals(case, dtype, n):
    """The bound atoms agree with the proposal law's, and the histogram (main bins, or the fine
    bins of a narrow float32 window) fits it: every binned check is explained."""
    runner, summary = stage_one("torch", case, dtype, n)
    matches = diagnose(summary, runner.law)
    assert matches and matches[0].name == "uniform-proposals", \
        [(m.name, m.note) for m in matches]
    match = matches[0]
    assert match.explains == BINNED, match.note
    assert match.parameter == 24
    assert "RN(b)" in match.note and "predicted 0" in match.note
    for check in ("atoms", "gof", "ks", "tails", "extremes"):
        assert explain(check, "fail", "", matches) == ("uniform-proposals", match.note)


@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
def test_the_deep_window_is_the_uniform_of_a_zero_acceptance():
    """bfloat16 [10, 1000] (one 256x256 call, ~4 s on a quiet core; the call may take up to 120 s
    here, where the grid's 20 s would read a loaded machine's slow call as a stall): a
    uniform_() of 0 (2^-9) accepts any proposal, half the values; RN(a) = 10 holds its cell and
    1000's (2 / 990 of the proposals, always accepted): 0.50 of the values where the law puts
    0.27."""
    runner, summary = stage_one("torch", "deep-window-10-1000", torch.bfloat16, 1 << 16,
                                case_timeout=120.0)
    alt = ProposalLaw.of(runner.law)
    assert 0.45 <= alt.zero_share <= 0.5
    assert alt.prob_at(10.0) == pytest.approx(0.504, abs=0.005)
    matches = diagnose(summary, runner.law)
    assert matches and matches[0].name == "uniform-proposals", \
        [(m.name, m.note) for m in matches]
    assert matches[0].explains == BINNED and "uniform of 0" in matches[0].note


#: (case, dtype) where the uniform-proposal law departs most from the rounded law, for the exact
#: samplers (the bound atoms off by 2x to 3x, RN(b) empty, a mixed-in uniform).
EXACT = [("asym-window-1-3", torch.bfloat16), ("mean-outside-3-4", torch.float16),
         ("huge-std", torch.bfloat16), ("sub-ulp-window", torch.float32),
         ("narrow-window-8", torch.float32), ("narrow-window-8", torch.float16),
         ("deep-window-10-1000", torch.bfloat16)]
SEEDS = (11, 12)


@pytest.mark.parametrize("name", ["exact", "fast-exact"])
def test_the_exact_samplers_match_nothing_on_the_uniform_branch(name):
    """Failure chance: <= 17 rows x 28 Summaries x 2 FALSE_MATCH + 1 row x 8 x 5 FALSE_MATCH =
    9.92e-7 (module docstring)."""
    # library-construction departs on inverse-cdf-in-dtype's event, the clamped shift on clamp's;
    # coarse-construction reads only the 32/64-bit Summaries; repeated-shards only sharded ones
    rows = len(MECHANISMS) - 4
    wide = sum(1 for _, dtype in EXACT if float_format(dtype).bits >= 32)
    assert (rows * len(EXACT) * 2 + wide * 5) * FALSE_MATCH * 2 * len(SEEDS) <= 1e-6
    for case, dtype in EXACT:
        for seed in SEEDS:
            runner, summary = stage_one(name, case, dtype, 1 << 20, run_seed=seed)
            matches = diagnose(summary, runner.law)
            assert matches == (), (case, dtype, seed, [(m.name, m.note) for m in matches])


def rejection_by_table(tensor, mean, std, a, b, accept_bits, zero_share=0.0, generator=None):
    """Uniform proposals on [a, b] in float64, accepted where u' <= f(x) / max f: u' on the
    lattice j 2^-accept_bits (accept_bits > 0), or continuous and 0 with probability
    zero_share; the accepted values rounded into the tensor's dtype."""
    z_peak = min(max(0.0, (a - mean) / std), (b - mean) / std)
    kept, have, n = [], 0, tensor.numel()
    while have < n:
        x = a + (b - a) * torch.rand(1 << 20, dtype=torch.float64, generator=generator)
        u = torch.rand(1 << 20, dtype=torch.float64, generator=generator)
        if accept_bits:
            u = torch.floor(u * (1 << accept_bits)) / (1 << accept_bits)
        else:
            u = torch.where(torch.rand(1 << 20, dtype=torch.float64, generator=generator)
                            < zero_share, 0.0, u)
        z = (x - mean) / std
        x = x[u <= torch.exp(-(z * z - z_peak * z_peak) / 2)]
        kept.append(x)
        have += x.numel()
    return tensor.copy_(torch.cat(kept)[:n].reshape(tensor.shape))


@pytest.mark.parametrize("dtype,bounds,accept_bits,zero_share,expected", [
    (torch.bfloat16, (2.5, 5.0), 8, 0.0, "K = 8"),
    (torch.float16, (2.0, 4.0), 0, 2.0**-7, "mixture")])
def test_a_coarse_acceptance_test_reads_uniform_proposals(dtype, bounds, accept_bits,
                                                         zero_share, expected):
    """A rejection sampler no library wrote: an 8-bit table acceptance uniform on [2.5, 5]
    sigma (bfloat16), and a continuous one that is 0 one time in 128 on [2, 4] sigma (float16).
    Its law, fitted (K, or the mixture's weight), fits the histogram and names every binned
    check (deterministic seeds; a true law fails its fit with probability <= AGREE_LEVEL =
    1e-6, and the law departs at z > 20 at 2^19 values)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, *bounds), dtype)
    samples = torch.empty(8, 256, 256, dtype=dtype)
    rejection_by_table(samples, 0.0, 1.0, *bounds, accept_bits, zero_share,
                       torch.Generator().manual_seed(5))
    matches = diagnose(summarize_samples(samples, law), law)
    assert matches and matches[0].name == "uniform-proposals", \
        [(m.name, m.note) for m in matches]
    match = matches[0]
    assert match.explains == BINNED and expected in match.note, match.note
    for check in ("gof", "tails", "moments"):
        assert explain(check, "fail", "", matches)[0] == "uniform-proposals"
