"""The proposal `fast-exact` (candidates/fast_exact.py): its protocol, its bounded work, its law.

Cheap (a few seconds): the harness's own runs (`pytest suites --candidate fast-exact`) are what
judge its law at scale; these tests pin what a run cannot see directly (the number of rounds, the
fallback by itself, one rounding per value, the chosen proposals' acceptance rates) and prove the
known-bad twin differs where it should.

Failure chances of the statistical assertions are stated where they are made; every seed is fixed,
so each verdict is deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from candidates import fast_exact, resolve
from candidates.fast_exact import (FLOAT32_CORE, FLOAT32_TAIL, MAX_ROUNDS, choose_proposal,
                                   fast_exact_float32_normal_, fast_exact_rounds_first_,
                                   fast_exact_trunc_normal_, fast_exact_unrefined_, float32_resolves,
                                   float64_pieces_draw, inverse_cdf_fallback)
from candidates.rounding import rn_cast
from reference import TruncatedNormal, rounded_law

INF = math.inf

#: windows that stall a rejection sampler or lose digits: far tails, one-sided, narrower than an
#: ulp (of bf16, of float64), the mean far outside, a bound beyond float64's std range
HARD = {
    "normal-2sigma": (0.0, 1.0, -2.0, 2.0),
    "trap": (0.0, 0.02, -2.0, 2.0),
    "one-sided-5": (0.0, 1.0, 5.0, INF),
    "far-tail-1e3": (0.0, 1.0, 1e3, INF),
    "deep-10-1000": (0.0, 1.0, 10.0, 1000.0),
    "below-mean": (0.0, 1.0, -INF, -40.0),
    "mean-far-outside": (1e6, 1.0, 0.0, 1.0),
    "sub-bf16-ulp": (0.0, 1.0, 0.3, 0.30001),
    "two-float64s": (0.0, 1.0, 0.3, math.nextafter(0.3, 1.0)),
    "underflowing-width": (0.0, 1e300, -1e-300, 1e-300),
    "straddling-narrow": (0.0, 1.0, -1e-6, 2.5),
    "asymmetric": (0.0, 1.0, 1.0, 3.0),
    "untruncated": (0.0, 1.0, -INF, INF),
}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_generator_honoured_and_global_rng_untouched():
    torch.manual_seed(0)
    state = torch.get_rng_state()
    for params in HARD.values():
        x1 = fast_exact_trunc_normal_(torch.empty(3000), *params, generator=gen(1))
        x2 = fast_exact_trunc_normal_(torch.empty(3000), *params, generator=gen(1))
        assert torch.equal(x1, x2), params
    x3 = fast_exact_trunc_normal_(torch.empty(3000), 0.0, 1.0, -2.0, 2.0, generator=gen(2))
    assert not torch.equal(x1, x3)
    assert torch.equal(torch.get_rng_state(), state)
    # without a generator it draws from the global RNG, as torch.nn.init does
    torch.manual_seed(5)
    y1 = fast_exact_trunc_normal_(torch.empty(100))
    torch.manual_seed(5)
    assert torch.equal(y1, fast_exact_trunc_normal_(torch.empty(100)))


def test_meta_parameter_and_views_as_torch_nn_init():
    meta = torch.empty(1000, 1000, device="meta")
    assert fast_exact_trunc_normal_(meta, 0.0, 0.02) is meta
    p = torch.nn.Parameter(torch.zeros(64, 32))
    assert fast_exact_trunc_normal_(p, 0.0, 0.02, generator=gen(0)) is p
    assert p.requires_grad and p.grad_fn is None and p.abs().max() <= 2 and p.ne(0).all()
    # a view is written in its own row-major order: the same values as a contiguous tensor
    ref = fast_exact_trunc_normal_(torch.empty(6, 8), generator=gen(3))
    base = torch.full((8, 6), 99.0)
    assert torch.equal(fast_exact_trunc_normal_(base.t(), generator=gen(3)), ref)
    with pytest.raises(ValueError):
        fast_exact_trunc_normal_(torch.empty(3), 0.0, 1.0, 2.0, -2.0)


def _takes_float32_draw(params) -> bool:
    return choose_proposal(*params).kind == "normal" and float32_resolves(*params)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16),
                         ids=lambda d: str(d).removeprefix("torch."))
def test_one_rounding_per_value(dtype):
    """Each value is one draw rounded once: a float32 output is RN of the float64 sampler's draw
    (the float64 output before its last bits are refined); a 16-bit output is RN of the float32
    draw where that applies (a normal proposal, float32 resolving std), else RN of the float64
    draw. Same seed, same stream: bit for bit."""
    used = 0
    for params in HARD.values():
        y = fast_exact_trunc_normal_(torch.empty(5000, dtype=dtype), *params, generator=gen(4))
        if dtype != torch.float32 and _takes_float32_draw(params):
            used += 1
            x32 = fast_exact_float32_normal_(torch.empty(5000), *params, generator=gen(4))
            assert torch.equal(y, x32.to(dtype)), params
        else:
            x64 = fast_exact_unrefined_(torch.empty(5000, dtype=torch.float64), *params,
                                        generator=gen(4))
            assert torch.equal(y, rn_cast(x64, dtype)), params
    assert dtype == torch.float32 or used >= 3


def test_float64_refines_the_last_bits_only():
    """The float64 output moves each value of the unrefined draw inside its block of float64
    values (at most 2^-12 std wide), never across it, and moves most of them."""
    for params in (HARD["trap"], HARD["normal-2sigma"], HARD["one-sided-5"]):
        x = fast_exact_trunc_normal_(torch.empty(4000, dtype=torch.float64), *params, generator=gen(5))
        u = fast_exact_unrefined_(torch.empty(4000, dtype=torch.float64), *params, generator=gen(5))
        assert float((x - u).abs().max()) <= params[1] * 2.0**-12, params
        assert float((x != u).double().mean()) > 0.99, params


def test_float32_draw_where_float32_resolves_std():
    """The float32 draw needs float32 to resolve std to 16 bits where the values lie: the init
    cases and a large mean at std 1 do; std 1e-6 at mean 0.5 does not (float64 path)."""
    assert float32_resolves(0.0, 0.02, -2.0, 2.0) and float32_resolves(0.0, 1.0, -2.0, 2.0)
    assert float32_resolves(100.0, 1.0, 98.0, 102.0)
    assert not float32_resolves(0.5, 1e-6, -INF, INF)
    assert not float32_resolves(0.0, 1e-200, -1.0, 1.0)


def test_16bit_tails_and_core_come_from_the_float64_sampler():
    """Beyond |z| = FLOAT32_TAIL and within |z| < FLOAT32_CORE the float32 draw is replaced by
    the float64 sampler's draw of the law's parts there (float32's Box-Muller is coarse in both:
    sparse rings out there, an angle grid and exact zeros in there). The replacement alone, on
    N(0, 1): KS of each part against the reference's law of it (each fails an exact sampler with
    probability 1e-7); the tails' share, 1.0058 % of 20000 (201 expected, a band of 6 sd: P <
    2e-9). In the sampler: N(0, 1) in bfloat16 at n = 2^22, P(|z| > 4) = 6.33e-5, 265.6 expected
    (6 sd: P < 2e-9); the trap in bfloat16 at n = 2^24: no exact zero (the law's mass at 0 is
    ~1e-39; float32's Box-Muller writes one per ~2^24 values)."""
    like = torch.empty(0, dtype=torch.float64)
    x = float64_pieces_draw(20000, 0.0, 1.0, -INF, INF, like, gen(12))
    tail, core = x[x.abs() >= FLOAT32_TAIL], x[x.abs() <= FLOAT32_CORE]
    assert tail.numel() + core.numel() == x.numel()
    share = 2 * stats.norm.sf(FLOAT32_TAIL)
    share /= share + math.erf(FLOAT32_CORE / math.sqrt(2.0))
    expected = x.numel() * share
    assert abs(tail.numel() - expected) < 6 * math.sqrt(expected)
    assert stats.kstest(tail.abs().numpy(), TruncatedNormal(0.0, 1.0, FLOAT32_TAIL, INF).cdf).pvalue > 1e-7
    core_law = TruncatedNormal(0.0, 1.0, -FLOAT32_CORE, FLOAT32_CORE)
    assert stats.kstest(core.numpy(), core_law.cdf).pvalue > 1e-7
    n = 2**22
    y = fast_exact_trunc_normal_(torch.empty(n, dtype=torch.bfloat16), 0.0, 1.0, -INF, INF,
                                 generator=gen(14))
    expected = n * 2 * stats.norm.sf(FLOAT32_TAIL)
    assert abs(int((y.float().abs() > FLOAT32_TAIL).sum()) - expected) < 6 * math.sqrt(expected)
    trap = fast_exact_trunc_normal_(torch.empty(2**24, dtype=torch.bfloat16), 0.0, 0.02,
                                    generator=gen(16))
    assert not (trap == 0).any()


def test_float32_bounds_are_tested_exactly():
    """A bound that is not a float32 (0.1, 2.3) is tested against the float32s inside [a, b]: no
    float32 value below a or above b survives (the float32 draw itself, before a 16-bit cast)."""
    params = (0.0, 1.0, 0.1 - 2.5, 2.3)
    assert _takes_float32_draw(params)
    y = fast_exact_float32_normal_(torch.empty(2**18), *params, generator=gen(15))
    assert float(y.double().min()) >= params[2] and float(y.double().max()) <= params[3]
    assert float(y.double().min()) < params[2] + 1e-2  # reached: 60 values expected there


def test_bounded_rounds_and_no_stall(monkeypatch):
    """At most 1 + MAX_ROUNDS proposal batches per chunk on every hard window, whatever happens."""
    calls = []
    real = fast_exact.propose

    def counting(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(fast_exact, "propose", counting)
    for name, params in HARD.items():
        calls.clear()
        x = fast_exact_trunc_normal_(torch.empty(2**16, dtype=torch.float64), *params, generator=gen(6))
        assert 1 <= len(calls) <= 1 + MAX_ROUNDS, name
        assert calls[0] == 2**16 and all(m < 2**16 for m in calls[1:]), name  # only the rejected
        assert torch.isfinite(x).all() and x.min() >= params[2] and x.max() <= params[3], name


def test_acceptance_rate_bounded_below():
    """Every window gets a proposal accepting >= 0.49 of its draws (Robert's choice between
    normal, half-normal, uniform and exponential), so after 1 + MAX_ROUNDS batches an element is
    left to the fallback with probability <= 0.51^17 ~ 1e-5."""
    alphas = sorted({*np.linspace(-6.0, 6.0, 61).tolist(), -40.0, 0.0, 10.0, 40.0, 1e3, 1e100})
    widths = [*np.geomspace(1e-12, 50.0, 40).tolist(), INF]
    worst = min(choose_proposal(0.0, 1.0, lo, lo + w).rate
                for lo in alphas for w in widths if lo + w > lo)
    worst = min(worst, *(choose_proposal(0.0, 1.0, -INF, hi).rate for hi in alphas))
    assert worst >= 0.49


@pytest.mark.parametrize("name", ["normal-2sigma", "one-sided-5", "deep-10-1000", "below-mean",
                                  "sub-bf16-ulp", "straddling-narrow", "asymmetric"])
def test_law_of_sampler_and_of_fallback(name):
    """KS against the reference's CDF, for the sampler and for the fallback alone (the inversion
    the rounds end in). Each assertion fails an exact sampler with probability 1e-7 (KS p-values
    of a continuous law are uniform; float64's lattice is far finer than 1/sqrt(n))."""
    params = HARD[name]
    dist = TruncatedNormal(*params)
    like = torch.empty(0, dtype=torch.float64)
    x = fast_exact_trunc_normal_(torch.empty(8000, dtype=torch.float64), *params, generator=gen(8))
    f = inverse_cdf_fallback(2000, *params, like, gen(9))
    for sample in (x, f):
        assert stats.kstest(sample.numpy(), dist.cdf).pvalue > 1e-7, name
        assert sample.min() >= params[2] and sample.max() <= params[3]


def test_rounds_first_twin_is_caught_where_fast_exact_is_not():
    """N(0,1) on +-2 in bfloat16: the law gives RN(a) = -2 the mass of its half cell inside [a, b]
    (2.2e-4); the twin gives it the whole cell (6.6e-4). At n = 2^20 the counts are Poisson-like
    around 233 and 694: the band of 6 sd around the law's count (+-92) fails fast-exact with
    P < 2e-9 and passes the twin with P < 1e-20."""
    n = 2**20
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.bfloat16)
    expected = n * law.atom_a
    band = 6 * math.sqrt(expected)
    good = fast_exact_trunc_normal_(torch.empty(n, dtype=torch.bfloat16), generator=gen(10))
    bad = fast_exact_rounds_first_(torch.empty(n, dtype=torch.bfloat16), generator=gen(10))
    assert abs(int((good == -2).sum()) - expected) < band
    assert int((bad == -2).sum()) - expected > band
    assert resolve("fast-exact-rounds-first").known_bad and not resolve("fast-exact").known_bad


def _fill_on_mesh(rank: int, world: int, store: str, results) -> None:
    """One rank: fill a 37x50 DTensor under each placement, chunks of 128 elements so that parts
    straddle chunk boundaries; rank 0 records whether the whole tensor equals a plain fill."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    fast_exact.CHUNK = 128
    mesh = init_device_mesh("cpu", (world,))
    for placement in (Shard(0), Shard(1), Replicate()):
        for params in ((0.0, 1.0, -2.0, 2.0), (0.0, 1.0, 3.0, 10.0)):
            d = distribute_tensor(torch.zeros(37, 50, dtype=torch.bfloat16), mesh, [placement])
            # per-rank seeds: the key every rank uses is mesh coordinate 0's
            fast_exact_trunc_normal_(d, *params, generator=gen(11 + rank))
            whole = d.full_tensor()
            plain = fast_exact_trunc_normal_(torch.zeros(37, 50, dtype=torch.bfloat16), *params,
                                             generator=gen(11))
            if rank == 0:
                results[f"{placement}-{params}"] = bool(torch.equal(whole, plain))
    dist.destroy_process_group()


@pytest.mark.slow
def test_sharding_invariant_on_a_cpu_mesh(tmp_path):
    """3 ranks (uneven splits of 37 rows), row and column shards and replicas, per-rank seeds:
    the DTensor holds, bit for bit, the plain tensor of rank 0's seed (deterministic). Slow (three
    spawned processes: ~60 s on 2 busy cores, -m slow); CI's sharded runs hold fast-exact to the
    same bits through the `sharding` check on tensors of one chunk."""
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_fill_on_mesh, args=(3, str(tmp_path / "store"), results), nprocs=3)
        assert len(results) == 6 and all(results.values()), dict(results)
