"""`coarse-construction`: a library's inverse CDF whose uniform's image the 32/64-bit dtype
rounds onto few values, its law enumerated value by value, names the rows of a sample of that
construction and of the libraries themselves where installed, for a candidate that runs the
library's kernel (`explain`'s candidate: the catalog names a kernel only for its own).

Failure chances. The numpy sample is drawn from a fixed seed (deterministic); over seeds, a true
construction fails each agreement (equal pairs within MODEL_TOL, the fits at AGREE_LEVEL) with
probability <= AGREE_LEVEL = 1e-6. The library rows run at the default run seed (deterministic);
over run seeds the same bound holds for each agreement asserted. The exact sampler's Summaries
matching no row is test_catalog's and test_proposals'.
"""

from __future__ import annotations

import importlib.util

import mpmath
import numpy as np
import pytest
import torch

from harness.checks import summarize_samples
from harness.diagnosis.library_ops.library_kernels import (
    NumpyroSteps,
    PaddleSteps,
    TensorflowSteps,
    paddle_erfinv,
)
from harness.diagnosis.mechanism_catalog import diagnose, explain
from harness.diagnosis.mechanisms.coarse_construction import (
    CONSTRUCTIONS,
    Steps,
    cell_law,
    construction_law,
    window_law,
)
from reference import TruncatedNormal, rounded_law
from summaries import named, stage_one

pytestmark = pytest.mark.usefixtures("one_thread")

PADDLE = next(c for c in CONSTRUCTIONS if c.short == "Paddle")


def test_the_enumeration_holds_every_lattice_point_once():
    """TN(0, 1, 3, 4) in float32 through torch's construction (24 bits): ~44 000 values of v,
    their lattice counts summing to 2^24 (no point lost or counted twice), and the law's mass on
    every value a multiple of 2^-24."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 3.0, 4.0), torch.float32)
    coarse = construction_law(law, CONSTRUCTIONS[0])
    assert 40_000 < coarse.keys.size < 50_000
    units = coarse.probs * 2.0**24
    assert np.allclose(units, np.rint(units), atol=1e-6) and abs(units.sum() - 2.0**24) < 1e-3


def test_a_sample_of_the_construction_reads_as_it():
    """2^19 float32 values of torch's 24-bit construction on mean-outside-3-4 (numpy's uniform
    indices through the construction's own steps): the equal pairs, the mass bins (spikes, scan)
    and the last bits read coarse-construction, and so does the histogram."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 3.0, 4.0), torch.float32)
    steps = Steps.of(law, CONSTRUCTIONS[0])
    rng = np.random.default_rng(20261204)
    j = rng.integers(0, 1 << 24, size=1 << 19, dtype=np.int64)
    samples = torch.from_numpy(steps.values(j).astype(np.float32)).reshape(-1, 256, 256)
    matches = diagnose(summarize_samples(samples, law), law)
    match = named(matches, "coarse-construction")
    for check in ("collisions", "spikes", "scan", "low_bits", "gof"):
        assert explain(check, "fail", "", matches, "timm")[0] == "coarse-construction", (
            check, match.note)


def test_a_window_that_writes_one_value_reads_its_last_bits():
    """JAX's float32 construction on TN(0, 1, 10, 1000): erf(10 / sqrt2) rounds to 1, so every
    draw is erfinv(1) = inf clipped to the float below 1000. Its last bits sit in one class,
    which the one-value law predicts exactly (the class test has nothing to pool)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 10.0, 1000.0), torch.float32)
    steps = Steps.of(law, CONSTRUCTIONS[2])
    j = np.random.default_rng(20261205).integers(0, 1 << 23, size=1 << 19, dtype=np.int64)
    values = steps.values(j).astype(np.float32)
    assert np.unique(values).size == 1
    samples = torch.from_numpy(values).reshape(-1, 256, 256)
    matches = diagnose(summarize_samples(samples, law), law)
    assert explain("low_bits", "fail", "", matches, "jax")[0] == "coarse-construction"


def test_a_sample_of_numpyros_construction_reads_as_it():
    """2^19 float32 values of NumPyro's construction on TN(0, 1, -2, 2) (numpy's uniform indices
    through `NumpyroSteps`): its 2^23 lattice through Phi space and JAX's ndtri, each step in
    float32, gives last bits the rounded law does not; coarse-construction reads them from the
    law pushed over the whole lattice (the equal pairs are few-random-bits': 23 bits)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float32)
    steps = NumpyroSteps.of(law)
    j = np.random.default_rng(20261205).integers(0, 1 << 23, size=1 << 19, dtype=np.int64)
    values = steps.x_of(steps.v_of(j)).astype(np.float32)
    samples = torch.from_numpy(values).reshape(-1, 256, 256)
    matches = diagnose(summarize_samples(samples, law), law)
    assert explain("low_bits", "fail", "", matches, "numpyro")[0] == "coarse-construction", (
        [(m.name, m.note[:200]) for m in matches])


@pytest.mark.parametrize("mt,far,bound", [(np.float32, -7, 4.0), (np.float64, -15, 6.0)])
def test_paddles_erfinv_sits_within_a_few_ulps(mt, far, bound):
    """Paddle's Erfinv (Giles-style rationals in three ranges), repeated: within a few ulps of
    mpmath's erfinv on (-1, 1) and up to 1 - 10^far (3.5 ulps measured in float32, 5.0 in
    float64); a wrong coefficient is off by thousands. Deterministic (fixed seed)."""
    rng = np.random.default_rng(11)
    xs = np.concatenate([rng.uniform(-1, 1, 1500), 1 - 10 ** rng.uniform(far, -1, 300)])
    xs = xs.astype(mt)
    xs = xs[np.abs(xs) < 1]
    with mpmath.workprec(120):
        exact = np.array([float(mpmath.erfinv(mpmath.mpf(float(x)))) for x in xs])
    spacing = np.spacing(np.abs(exact.astype(mt))).astype(np.float64)
    assert np.max(np.abs(paddle_erfinv(xs, mt).astype(np.float64) - exact) / spacing) <= bound


def test_paddles_kernel_enumerated_holds_its_windows():
    """Paddle's kernel, enumerated: TN(0, 1, 8, 8.01) in float64 writes 8 and float32(8.01) =
    8.0100002 (its bounds arrive as float32), half the draws each (p's window holds two values,
    and the clamp takes each to a bound); TN(0, 1, 3, 4) in float32 writes ~22 000 values whose
    masses sum to 1, the first RN(a) with half a cell."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 8.0, 8.01), torch.float64)
    far = construction_law(law, PADDLE)
    values = law.fmt.values_from_keys(far.keys)
    assert list(values) == [8.0, float(np.float32(8.01))] and np.allclose(far.probs, 0.5)
    law = rounded_law(TruncatedNormal(0.0, 1.0, 3.0, 4.0), torch.float32)
    near = construction_law(law, PADDLE)
    assert 20_000 < near.keys.size < 25_000 and abs(near.probs.sum() - 1.0) < 1e-12
    assert np.isclose(near.probs[0], near.probs[1] / 2, rtol=1e-3)


def test_a_sample_of_paddles_kernel_reads_as_it():
    """2^19 float32 values of Paddle's kernel on mean-outside-3-4, drawn the kernel's way (a
    uniform 64-bit word rounded into float32 by numpy's conversion, then its steps): the equal
    pairs, the mass bins and the last bits read coarse-construction from the enumerated law (a
    second path: enumeration by bisection over p, the sample through numpy's uint64 -> float32)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 3.0, 4.0), torch.float32)
    steps = PaddleSteps.of(law)
    rng = np.random.default_rng(20261205)
    words = rng.integers(0, np.iinfo(np.uint64).max, size=1 << 19, dtype=np.uint64,
                         endpoint=True)
    c = np.minimum(words.astype(np.float32) * np.float32(2.0**-64),
                   np.nextafter(np.float32(1.0), np.float32(0.0)))
    values = steps.x_of(steps.v_of(c.view(np.uint32))).astype(np.float32)
    samples = torch.from_numpy(values).reshape(-1, 256, 256)
    matches = diagnose(summarize_samples(samples, law), law)
    for check in ("collisions", "spikes", "low_bits"):
        assert explain(check, "fail", "", matches, "paddle")[0] == "coarse-construction", (
            check, [(m.name, m.note[:200]) for m in matches])


def test_a_law_on_cells_brackets_the_enumerated_one():
    """Paddle's kernel on TN(0, 1, 3, 4) in float32 (~22 000 values of p, enumerable) held on
    cells of its uniform: below each of 200 edges across the window, the enumerated law's mass
    lies between the masses of the cells whose whole image is below it and of those whose image
    starts below it (the range each fit pools over)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 3.0, 4.0), torch.float32)
    steps = PaddleSteps.of(law)
    exact, cells = window_law(steps), cell_law(steps)
    assert not cells.values_exact and abs(cells.probs.sum() - 1.0) < 1e-12
    for edge in np.linspace(exact.keys[0], exact.keys[-1], 200).astype(np.uint64):
        mass = exact.probs[exact.keys < edge].sum()
        assert cells.probs[cells.hi_keys < edge].sum() - 1e-12 <= mass
        assert mass <= cells.probs[cells.lo_keys < edge].sum() + 1e-12


def test_a_sample_of_paddles_float64_kernel_on_a_sub_ulp_window_reads_as_it():
    """2^19 float64 values of Paddle's kernel on sub-ulp-window [0.3, 0.30001], drawn the
    kernel's way: its bounds arrive as float32 (0.30000001192..., 0.30000999569...), so its
    window is moved by a fraction of a bin and no value lies below float32(0.3). The window
    holds ~10^11 doubles of p; the law held on cells of the uniform explains the tails, the
    scan and the extremes, and neither the equal pairs nor the lattices (none of its single
    values is known)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 0.3, 0.30001), torch.float64)
    steps = PaddleSteps.of(law)
    rng = np.random.default_rng(20261205)
    words = rng.integers(0, np.iinfo(np.uint64).max, size=1 << 19, dtype=np.uint64,
                         endpoint=True)
    c = np.minimum(words.astype(np.float64) * 2.0**-64, np.nextafter(1.0, 0.0))
    values = steps.x_of(steps.v_at(c))
    samples = torch.from_numpy(values).reshape(-1, 256, 256)
    matches = diagnose(summarize_samples(samples, law), law)
    match = named(matches, "coarse-construction")
    assert "cells of its uniform" in match.note, match.note
    for check in ("tails", "scan", "extremes"):
        assert explain(check, "fail", "", matches, "paddle")[0] == "coarse-construction", (
            check, [(m.name, m.note[:200]) for m in matches])
    assert not match.explains & {"collisions", "lattices"}


@pytest.mark.parametrize("a,b,branch,dtype", [(1.0, 3.0, "exponential", torch.float32),
                                               (-1e-3, 1e-3, "uniform", torch.float32),
                                               (1.0, 3.0, "exponential", torch.float64)])
def test_a_sample_of_tensorflows_rejection_kernel_reads_as_it(a, b, branch, dtype):
    """2^19 values of TensorFlow's kernel drawn its way with numpy's generator (a proposal k, a
    second uniform m kept where m 2^-bits <= its acceptance): on asym-window's exponential
    proposals and on a sigma-narrow window's uniform ones, the last bits read
    coarse-construction from the law pushed over the 2^23 proposals (float32) or held on cells
    of the 52-bit uniform, the last bits' shares estimated (float64)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, a, b), dtype)
    steps = TensorflowSteps.of(law)
    assert steps.branch == branch
    rng = np.random.default_rng(20261205)
    kept = []
    while sum(map(len, kept)) < 1 << 19:
        k = rng.integers(0, 1 << steps.bits, size=1 << 19)
        z, share = steps.proposals(k)
        kept.append(steps.outputs(z)[rng.random(k.size) < share])
    values = np.concatenate(kept)[: 1 << 19].astype(steps.real)
    samples = torch.from_numpy(values).reshape(-1, 256, 256)
    matches = diagnose(summarize_samples(samples, law), law)
    named_as = explain("low_bits", "fail", "", matches, "tensorflow-param")[0]
    assert named_as == "coarse-construction", (
        [(m.name, m.note[:300]) for m in matches])


def test_a_sample_of_numpyros_float64_kernel_reads_as_it():
    """2^19 float64 values of NumPyro's TruncatedNormal on normal-2sigma drawn its way (52-bit
    uniforms from numpy's generator through its icdf): the last bits depart from the rounded
    law's and read coarse-construction from the law held on cells of the uniform, its shares
    estimated from one point drawn in each cell."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float64)
    steps = NumpyroSteps.of(law)
    j = np.random.default_rng(20261205).integers(0, 1 << 52, size=1 << 19).astype(np.float64)
    samples = torch.from_numpy(steps.x_of(steps.v_of(j))).reshape(-1, 256, 256)
    matches = diagnose(summarize_samples(samples, law), law)
    assert explain("low_bits", "fail", "", matches, "numpyro")[0] == "coarse-construction", (
        [(m.name, m.note[:300]) for m in matches])
    assert "NumPyro" in named(matches, "coarse-construction").note


#: (candidate, case, dtype, the library's package, checks the construction explains at 2^19)
LIBRARY_ROWS = [
    ("timm", "mean-outside-3-4", torch.float32, "timm", ("collisions", "spikes", "low_bits")),
    ("timm", "deep-window-10-1000", torch.float32, "timm", ("collisions",)),
    # timm's construction is torch <= 2.11's: its law through torch's own kernels
    ("torch-legacy", "sub-ulp-window", torch.float32, "torch", ("gof", "spikes", "low_bits")),
    ("torch-legacy", "huge-std", torch.float32, "torch", ("collisions", "low_bits")),
    ("jax", "mean-outside-3-4", torch.float32, "jax", ("collisions", "low_bits", "spikes")),
    ("jax", "sub-ulp-window", torch.float32, "jax", ("gof", "spikes", "low_bits")),
    ("jax", "tail-5", torch.float32, "jax", ("gof", "ks", "collisions", "low_bits")),
    ("jax", "huge-std", torch.float32, "jax", ("collisions", "lattices", "low_bits")),
    ("jax-init", "huge-std", torch.float32, "jax", ("collisions", "low_bits")),
    ("numpyro", "normal-2sigma", torch.float32, "numpyro", ("low_bits",)),
    ("numpyro", "huge-std", torch.float32, "numpyro", ("collisions", "low_bits", "spikes")),
    ("numpyro", "tail-5", torch.float32, "numpyro", ("low_bits",)),
    ("mlx", "mean-outside-3-4", torch.float32, "mlx.core", ("collisions", "spikes")),
    # MLX's float32 kernels repeated (its erf, its uniform, its erfinv through the C logf)
    ("mlx", "sub-ulp-window", torch.float32, "mlx.core", ("gof", "spikes", "low_bits")),
    ("paddle", "sub-ulp-window", torch.float32, "paddle", ("gof", "spikes", "low_bits")),
    ("paddle", "mean-outside-3-4", torch.float32, "paddle", ("collisions", "low_bits", "spikes")),
    ("paddle", "huge-std", torch.float32, "paddle", ("low_bits", "lattices")),
    ("paddle", "narrow-window-8", torch.float64, "paddle", ("gof", "atoms", "moments")),
    # ~10^11 doubles of p in the window: held on cells of the uniform (bins; no single value)
    ("paddle", "sub-ulp-window", torch.float64, "paddle", ("extremes", "scan", "tails")),
    # TensorFlow's rejection samplers in float32: exponential proposals, uniform proposals
    ("tensorflow-param", "asym-window-1-3", torch.float32, "tensorflow",
     ("collisions", "low_bits")),
    ("tensorflow-param", "mean-outside-3-4", torch.float32, "tensorflow", ("low_bits",)),
    ("tensorflow-param", "huge-std", torch.float32, "tensorflow", ("low_bits",)),
    ("tensorflow-param", "sub-ulp-window", torch.float32, "tensorflow", ("gof", "scan", "tails")),
    # in float64 held on cells of its 52-bit uniform: the last bits' shares estimated
    ("tensorflow-param", "asym-window-1-3", torch.float64, "tensorflow", ("low_bits",)),
    ("tensorflow-param", "huge-std", torch.float64, "tensorflow", ("low_bits",)),
    ("numpyro", "normal-2sigma", torch.float64, "numpyro", ("low_bits",)),
    ("numpyro", "half-normal", torch.float64, "numpyro", ("low_bits",)),
]


@pytest.mark.parametrize("name,case,dtype,module,checks", LIBRARY_ROWS)
def test_a_library_coarse_law_reads_as_its_construction(name, case, dtype, module, checks):
    """The libraries' inverse CDFs far out or on a sub-ulp window, at 2^19 (deterministic at the
    default run seed; a true construction fails an agreement with probability <= 1e-6)."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        pytest.skip(f"{module} is not installed")
    # timm's package imports torchvision, which its adapter sidesteps: found is enough
    runner, summary = stage_one(name, case, dtype, 1 << 19)
    matches = diagnose(summary, runner.law)
    match = named(matches, "coarse-construction")
    for check in checks:
        assert explain(check, "fail", "", matches, name)[0] == "coarse-construction", (check,
                                                                               match.note)
