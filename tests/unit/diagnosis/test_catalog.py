"""The catalog names the cause the docs give each known-bad sampler, and names nothing for the
exact one.

Each known-bad runs through `CaseRunner` on the case where its defect shows (the power plan of
tests/calibration/test_power.py), stage 1 only, at a small n; `diagnose` reads that Summary and
`explain` the rows of the checks that catch it.

Failure chances. Known-bad side: the runs use the default run seed, so each verdict is
deterministic; over run seeds, each departure sits at z >= 12 at these n (measured: the atoms
of rounds-first z 15, the shift z 18, the scale z 17, the cut tails 245 expected values where
20.7 suffice), and a true mechanism fails its agreement with probability <= AGREE_LEVEL = 1e-6
by construction. Exact side: each row of the catalog matches an exact Summary with probability
<= 2 FALSE_MATCH = 2e-9 (two sides at most; coarse-construction 5e-9, five events); 20 rows
over the 14 Summaries below give <= 6.0e-7.
The count lattice's own test draws its counts from fixed numpy seeds (deterministic); over
seeds, a true lattice fails its fit with probability <= AGREE_LEVEL = 1e-6, and the law's
counts (a departure the catalog also requires) fit no lattice with k <= 12 at n = 2^20: each
k's nearest multiples miss by ~unit/4 on ~30 000 values.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch

from candidates import resolve
from harness.cases import case_by_label
from harness.checks import summarize_samples
from harness.diagnosis.mechanism_catalog import FALSE_MATCH, MECHANISMS, NAMES, diagnose, explain
from harness.diagnosis.mechanisms.fine_structure import count_lattice
from reference import TruncatedNormal, rounded_law
from harness.runner import CaseRunner, RunConfig
from summaries import named, stage_one


pytestmark = pytest.mark.usefixtures("one_thread")




#: candidate -> (case, dtype, n, the mechanism the docs give, its parameter or None, a check
#: that catches the candidate and that the match must explain)
KNOWN = {
    "fast-exact-rounds-first": ("normal-2sigma", torch.bfloat16, 1 << 18, "rounds-first", None,
                                "atoms"),
    "clamp": ("normal-2sigma", torch.float32, 1 << 18, "clamp", None, "atoms"),
    "torch-legacy": ("abs-bounds-trap", torch.bfloat16, 1 << 18, "inverse-cdf-in-dtype", None,
                     "tails"),
    "uniform-24-bits": ("normal-2sigma", torch.float32, 1 << 19, "few-random-bits", 24,
                        "collisions"),
    "dropped-last-bit": ("normal-2sigma", torch.float32, 1 << 19, "dtype-arithmetic", 1,
                         "low_bits"),
    "float32-widened": ("normal-2sigma", torch.float64, 1 << 19, "dtype-arithmetic", 29,
                        "lattices"),
    "fast-exact-float32-normal": ("abs-bounds-trap", torch.float32, 1 << 19, "dtype-arithmetic",
                                  None, "low_bits"),
    "shift-0.02sigma": ("normal-2sigma", torch.float32, 1 << 20, "shifted", None, "moments"),
    "scale-2pct-wide": ("normal-2sigma", torch.float32, 1 << 20, "scaled", None, "moments"),
    "no-tail-beyond-3.5sigma": ("untruncated", torch.float32, 1 << 18, "tail-cut", None,
                                "tails"),
    "antithetic-neighbours": ("normal-2sigma", torch.float32, 1 << 16, "dependence", None,
                              "independence"),
    "round-toward-zero": ("normal-2sigma", torch.bfloat16, 1 << 20, "directed-rounding", None,
                          "gof"),
    "point-mass-1e-4-at-a": ("normal-2sigma", torch.float32, 1 << 20, "point-mass", None,
                             "atoms"),
    "fallback-mean-1e-5": ("large-mean", torch.float32, 1 << 22, "point-mass", None, "spikes"),
    "hole-2e-5": ("normal-2sigma", torch.float32, 1 << 22, "hole", None, "scan"),
    "remainder-loop": ("normal-2sigma:61x67", torch.float32, 1 << 20, "position-class", None,
                       "position"),
    "small-tensor-path": ("normal-2sigma:7", torch.float32, 1 << 16, "outside-support", None,
                          "bounds"),
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_a_known_bad_reads_as_its_mechanism(name):
    case, dtype, n, mechanism, parameter, check = KNOWN[name]
    runner, summary = stage_one(name, case, dtype, n)
    matches = diagnose(summary, runner.law)
    match = named(matches, mechanism)
    if parameter is not None:
        assert match.parameter == parameter, match.note
    assert check in match.explains
    named_as, note = explain(check, "fail", "", matches, name)
    # the note opens with the match's; the group's other mechanisms, and what a library's kernel
    # the candidate does not run reads like, follow it
    assert named_as == mechanism and note.startswith(match.note), note
    assert diagnose(summary, runner.law) is matches  # once per Summary


def test_the_parameters_of_the_shape_mechanisms_are_the_defects():
    """The shift, the scale and the cut, estimated: 0.02 sigma, x1.02, 3.5 sigma."""
    runner, summary = stage_one("shift-0.02sigma", "normal-2sigma", torch.float32, 1 << 20)
    shift = named(diagnose(summary, runner.law), "shifted").parameter
    assert shift == pytest.approx(0.02, abs=6 * 0.00098 / 0.88)  # 6 sd of the mean
    runner, summary = stage_one("scale-2pct-wide", "normal-2sigma", torch.float32, 1 << 20)
    scale = named(diagnose(summary, runner.law), "scaled").parameter
    assert scale == pytest.approx(1.02, abs=0.004)  # ~6 sd of the std, through the bounds
    runner, summary = stage_one("no-tail-beyond-3.5sigma", "untruncated", torch.float32, 1 << 18)
    cut = named(diagnose(summary, runner.law), "tail-cut").parameter
    assert 3.49 <= cut <= 3.5  # the largest |value| written, just inside the cut


def test_the_rows_of_a_known_bad_name_it_through_the_runner():
    """explain on the Results the runner gives (stage 2 where stage 1 suspected), with the
    deciding stage's Summary."""
    runner = CaseRunner(resolve("fast-exact-rounds-first"), case_by_label("normal-2sigma"),
                        torch.bfloat16, "cpu", RunConfig(samples=1 << 17))
    result = runner.run("atoms")
    assert result.verdict == "fail", result.message
    summary = runner.cached_summary(2 if result.n_stage2 else 1)
    mechanism, note = explain(result.check, result.verdict, result.message,
                              diagnose(summary, runner.law))
    assert mechanism == "rounds-first" and "whole cell" in note


def test_a_hang_is_a_stall_and_a_raise_is_api():
    config = RunConfig(samples=1 << 10, case_timeout=0.5)
    runner = CaseRunner(resolve("selftest-infinite-loop"), case_by_label("normal-2sigma"),
                        torch.float32, "cpu", config)
    hang = runner.run("hang")
    assert hang.verdict == "fail"
    assert explain(hang.check, hang.verdict, hang.message, ())[0] == "stall"
    gof = runner.run("gof")
    assert explain(gof.check, gof.verdict, gof.message, ())[0] == "stall"
    runner = CaseRunner(resolve("selftest-raises"), case_by_label("normal-2sigma"),
                        torch.float32, "cpu", config)
    gof = runner.run("gof")
    assert gof.verdict == "fail"
    assert explain(gof.check, gof.verdict, gof.message, ()) == ("api", "")
    assert explain("arguments", "xfail", "std < 0 accepted", ()) == ("api", "")


def test_a_row_no_match_explains_is_unexplained_and_a_pass_is_nothing():
    assert explain("gof", "fail", "chi2 ...", ()) == ("unexplained", "")
    assert explain("gof", "pass", "", ()) == ("", "")
    assert set(NAMES) >= {"rounds-first", "clamp", "coarse-uniform", "few-random-bits",
                          "dtype-arithmetic", "shifted", "scaled", "tail-cut", "exact-zeros",
                          "dependence", "stall", "api", "unexplained"}


#: (case, dtype, n) of the exact sampler's Summaries: the bounds, the trap, the tails, the
#: resolution of float32 and float64, a half-normal with its zero bound, a law on fine bins.
EXACT = [("normal-2sigma", torch.bfloat16, 1 << 18), ("normal-2sigma", torch.float32, 1 << 19),
         ("abs-bounds-trap", torch.bfloat16, 1 << 18), ("untruncated", torch.float32, 1 << 18),
         ("half-normal", torch.bfloat16, 1 << 18), ("normal-2sigma", torch.float64, 1 << 19),
         ("tiny-std", torch.float32, 1 << 19)]
SEEDS = (11, 12)


@pytest.mark.parametrize("case,dtype,n", EXACT)
def test_the_exact_sampler_matches_nothing(case, dtype, n):
    """Failure chance: <= (19 rows x 2 + 5) FALSE_MATCH x 14 Summaries = 6.0e-7 (module
    docstring)."""
    rows = len(MECHANISMS) - 1  # repeated-shards reads only sharded Summaries
    assert (rows * 2 + 3) * FALSE_MATCH * len(EXACT) * len(SEEDS) <= 1e-6
    for seed in SEEDS:
        runner, summary = stage_one("exact", case, dtype, n, run_seed=seed)
        matches = diagnose(summary, runner.law)
        assert matches == (), [(m.name, m.note) for m in matches]


def test_jax_float32_reads_as_23_random_bits():
    """jax.random.truncated_normal in float32 (no x64): its uniforms hold 23 random bits, also
    on abs-bounds-trap (std 0.02), whose last bits `dtype-arithmetic` reads (mean + std z in
    float32)."""
    pytest.importorskip("jax")
    for case in ("normal-2sigma", "abs-bounds-trap"):
        runner, summary = stage_one("jax", case, torch.float32, 1 << 19)
        matches = diagnose(summary, runner.law)
        match = named(matches, "few-random-bits")
        assert match.parameter == 23, match.note
        assert explain("collisions", "fail", "", matches)[0] == "few-random-bits"


@pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 12),
                    reason="torch before 2.12 draws by the inverse CDF")
def test_torch_tiny_std_float32_reads_rounds_first_on_its_fine_bins():
    """torch's normal branch on +-2 sigma at std 1e-6 (float32 spacing 6e-8): the bounds get
    their whole cells, and the law, judged on fine bins, is summed value by value to fit the
    histogram. Deterministic at the default run seed (its atoms depart at z ~ 16)."""
    runner, summary = stage_one("torch", "tiny-std", torch.float32, 1 << 20)
    matches = diagnose(summary, runner.law)
    match = named(matches, "rounds-first")
    assert "the histogram fits" in match.note, match.note
    assert explain("gof", "fail", "", matches)[0] == "rounds-first"


def test_a_count_lattice_reads_its_bits_and_the_law_reads_none():
    """Every value a whole multiple of 2^-7 of the draws (a function of 7 random bits) gives
    k = 7; the rounded law's own counts at the same n fit no lattice."""
    rng = np.random.default_rng(7)
    units = np.bincount(rng.integers(0, 100, size=128), minlength=100)  # sums to 2^7
    n = 1 << 20
    found = count_lattice(rng.multinomial(n, units / 128.0), n)
    assert found is not None and found[0] == 7 and found[2] == np.count_nonzero(units), found
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.bfloat16)
    probs = np.asarray(law.hist_bin_probs(), dtype=np.float64)
    assert count_lattice(rng.multinomial(n, probs / probs.sum()), n) is None
    assert count_lattice(np.array([0, n, 0]), n) is None  # one value: no bits to count


def test_jax_16_bit_reads_as_its_mantissa_bits():
    """jax draws its uniforms in the output dtype: 7 random bits in bfloat16, 10 in float16,
    every written value a whole multiple of 2^-k of the draws (deterministic at the default run
    seed; a true lattice fails its fit with probability <= 1e-6)."""
    pytest.importorskip("jax")
    for dtype, bits in ((torch.bfloat16, 7), (torch.float16, 10)):
        runner, summary = stage_one("jax", "normal-2sigma", dtype, 1 << 20)
        matches = diagnose(summary, runner.law)
        assert named(matches, "few-random-bits").parameter == bits
        assert explain("gof", "fail", "", matches)[0] == "few-random-bits"


def test_a_dropped_last_bit_predicts_the_coarse_lattices_too():
    """Every float32 value's last bit zero: a bfloat16 or float16 value (its last 13-16 bits
    zero) is then twice as likely as under the law, and dtype-arithmetic explains the lattices
    row with that prediction (deterministic at the default run seed; a true prediction fails
    its agreement with probability <= AGREE_LEVEL = 1e-6)."""
    runner, summary = stage_one("dropped-last-bit", "normal-2sigma", torch.float32, 1 << 19)
    match = named(diagnose(summary, runner.law), "dtype-arithmetic")
    assert match.parameter == 1 and "lattices" in match.explains, match.note


def test_a_shift_clamped_back_into_the_window_reads_as_shifted():
    """compile-only-shift's defect without torch.compile: the exact sampler's float32 values on
    +-2 sigma plus 0.1 sigma, clamped back into [a, b]. The atom at b (0.62 %) gives d, and the
    shifted, clamped law fits the whole histogram (z ~ 300 for the atom at 2^20; a true law
    fails its fit with probability <= AGREE_LEVEL = 1e-6)."""
    runner, summary = stage_one("exact", "normal-2sigma", torch.float32, 1 << 20)
    samples = torch.empty((1 << 20) // (256 * 256), 256, 256)
    resolve("exact")(samples, 0.0, 1.0, -2.0, 2.0, generator=torch.Generator().manual_seed(5))
    samples.add_(0.1).clamp_(-2.0, 2.0)
    shifted = summarize_samples(samples, runner.law)
    matches = diagnose(shifted, runner.law)
    mechanism, note = explain("gof", "fail", "", matches)
    assert mechanism == "shifted" and abs(named(matches, "shifted").parameter - 0.1) < 0.005, note
    assert explain("atoms", "fail", "", matches)[0] == "shifted"


@pytest.mark.parametrize("on_bound,expected", [((1 << 18) + 100, "coarse-uniform"),
                                               (int(0.6 * (1 << 19)), None)])
def test_a_two_point_lattice_reads_as_coarse_uniform_k_1(on_bound, expected):
    """A 1-bit uniform on TN(0, 1, 8, 8.01) in float64: half the draws on RN(a) = 8, half on
    one value inside. An atom 100 draws above 1/2 of 2^19 (0.27 sd) is a two-point lattice's,
    k = 1; one holding 60 % (150 sd above) is not a lattice's cell. Deterministic counts (the
    positions permuted from a fixed seed)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, 8.0, 8.01), torch.float64)
    n = 1 << 19
    values = np.full(n, 8.002291820637137)
    values[:on_bound] = 8.0
    values = np.random.default_rng(7).permutation(values)
    summary = summarize_samples(torch.from_numpy(values).reshape(-1, 256, 256), law)
    matches = diagnose(summary, law)
    found = [m for m in matches if m.name == "coarse-uniform"]
    if expected:
        assert found and found[0].parameter == 1, [(m.name, m.note) for m in matches]
    else:
        assert not found, found[0].note


def test_a_construction_the_chi_square_cannot_single_out_is_read_by_its_likelihood_ratio():
    """TensorFlow's bfloat16 construction on large-mean (the standard law on [-2, 2] rounded,
    then x std + mean in bfloat16) moves mass among the law's 9 values: on the histogram it
    gives on average at 2^19 draws (each value's count n q, rounded; deterministic), the
    chi-square's p against the law is 7.9e-8, above the 1e-9 a departure needs, while the
    likelihood ratio toward the construction, e^24.3 (n times its KL divergence), passes
    7 / 1e-9 = e^22.7 (what tensorflow's own row showed: p 1.75e-9, ratio e^23.3)."""
    from harness.diagnosis.evidence import Evidence
    from harness.diagnosis.mechanisms.library_laws import (CONSTRUCTIONS, LibraryConstruction,
                                                          construction_law)
    law = rounded_law(TruncatedNormal(100.0, 1.0, 98.0, 102.0), torch.bfloat16)
    index = next(i for i, c in enumerate(CONSTRUCTIONS) if "TensorFlow" in c.label)
    pushed = construction_law(law, index)
    keys = np.nonzero(pushed.probs)[0]
    shares = pushed.probs[keys] / pushed.probs[keys].sum()
    values = np.repeat(law.fmt.values_from_keys(keys.astype(np.uint64)),
                       np.round((1 << 19) * shares).astype(int))[:1 << 19]
    summary = summarize_samples(torch.from_numpy(values.astype(np.float32))
                                .reshape(-1, 256, 256).to(torch.bfloat16), law)
    ev = Evidence(summary, law)
    assert not ev.binned_departs, ev.canonical_fit
    assert ev.departs_toward(pushed.probs, len(CONSTRUCTIONS)), ev.log_likelihood_ratio(pushed.probs)
    match = LibraryConstruction().test(ev)
    assert match is not None and "TensorFlow" in match.note, match


def test_the_likelihood_ratio_is_never_nan():
    """A prediction that forbids an observed class is refuted (-inf) even where the law forbids
    another one (+inf): the sum of both would be NaN, which no comparison ranks."""
    from harness.diagnosis.evidence import log_likelihood_ratio
    counts = np.array([5.0, 3.0, 0.0])
    law = np.array([0.5, 0.0, 0.5])
    assert log_likelihood_ratio(counts, np.array([0.0, 0.5, 0.5]), law) == -math.inf
    assert log_likelihood_ratio(counts, np.array([0.5, 0.5, 0.0]), law) == math.inf
    assert log_likelihood_ratio(counts, law, law) == -math.inf  # both forbid a seen class
    assert log_likelihood_ratio(np.array([5.0, 0.0, 3.0]), law, law) == 0.0


def test_infinities_the_law_never_writes_read_as_outside_support():
    """torch <= 2.11's algorithm on tail-5 (b = inf) in bfloat16: 2 Phi(beta) - 1 = 1 and
    erfinv(1) = inf, which the clamp to b = inf keeps; the law gives +inf no mass, so the finite
    row names outside-support (deterministic: every value is +inf)."""
    runner, summary = stage_one("torch-legacy", "tail-5", torch.bfloat16, 1 << 16)
    matches = diagnose(summary, runner.law)
    mechanism, note = explain("finite", "fail", "", matches)
    assert mechanism == "outside-support" and f"+inf {summary.n}," in note, note


def test_torch_legacy_16_bit_reads_as_its_inverse_cdf_in_the_dtype():
    """torch <= 2.11's algorithm on normal-2sigma: the uniform, erfinv, the scale and the shift
    each rounded into the 16-bit dtype; its pushed law fits the histogram (deterministic at the
    default run seed; a true law fails the fit with probability <= 1e-6)."""
    for dtype in (torch.bfloat16, torch.float16):
        runner, summary = stage_one("torch-legacy", "normal-2sigma", dtype, 1 << 20)
        matches = diagnose(summary, runner.law)
        match = named(matches, "inverse-cdf-in-dtype")
        assert explain("gof", "fail", "", matches) == ("inverse-cdf-in-dtype", match.note)


def test_the_trap_names_the_whole_inverse_cdf_and_reads_its_end_cell():
    """torch <= 2.11 on abs-bounds-trap in bfloat16: its uniform's end cell puts 2^-9 of the
    values on RN(a) = -100 sigma, which coarse-uniform reads (k = 9); the law of every step in
    the dtype fits the whole histogram and is named, its note quoting that end cell
    (deterministic at the default run seed; a true law fails its fit with probability <=
    1e-6)."""
    runner, summary = stage_one("torch-legacy", "abs-bounds-trap", torch.bfloat16, 1 << 18)
    matches = diagnose(summary, runner.law)
    assert named(matches, "coarse-uniform").parameter == 9
    match = named(matches, "inverse-cdf-in-dtype")
    assert "end cell on RN(a) = -2 (-100 sigma)" in match.note, match.note
    for check in ("atoms", "gof", "tails", "collisions"):
        name, note = explain(check, "fail", "", matches)
        assert name == "inverse-cdf-in-dtype" and note.startswith(match.note), note


def phi_space_in_dtype(tensor, mean, std, a, b, generator=None):
    """An inverse CDF in Phi space, every step in the tensor's dtype: u = uniform_(Phi(alpha),
    Phi(beta)), ndtri in float32 rounded into the dtype, then x std + mean and the clamp."""
    alpha, beta = (a - mean) / std, (b - mean) / std
    lo, hi = (0.5 * math.erfc(-t / math.sqrt(2.0)) for t in (alpha, beta))
    u = torch.empty(tensor.shape, dtype=tensor.dtype).uniform_(lo, hi, generator=generator)
    z = torch.special.ndtri(u.to(torch.float32)).to(tensor.dtype)
    return tensor.copy_(z.mul_(std).add_(mean).clamp_(a, b))


def test_an_inverse_cdf_in_phi_space_reads_as_inverse_cdf_in_dtype():
    """The Phi-space construction in bfloat16 on +-2 sigma: the uniform's lattice in the dtype
    leaves an atom at RN(a) and cuts the far tail (coarse-uniform's signature), and the law of
    every step in the dtype fits the per-value histogram: that law is named for every check
    (deterministic seeds; a true law fails its fit with probability <= 1e-6)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.bfloat16)
    samples = torch.empty(16, 256, 256, dtype=torch.bfloat16)
    phi_space_in_dtype(samples, 0.0, 1.0, -2.0, 2.0, torch.Generator().manual_seed(5))
    matches = diagnose(summarize_samples(samples, law), law)
    match = named(matches, "inverse-cdf-in-dtype")
    assert "Phi space" in match.note, match.note
    for check in ("atoms", "gof", "tails", "moments"):
        name, note = explain(check, "fail", "", matches)
        assert name == "inverse-cdf-in-dtype" and note.startswith(match.note), note


def test_a_library_construction_reads_its_own_sample_and_not_the_law():
    """A sample of JAX's bfloat16 construction on large-mean (9 values, each holding a whole
    number of the 128 uniforms), drawn with numpy from the reference's own law of it, reads
    `library-construction`; the rounded law's own sample at the same n matches no row. Failure
    chance: a true law fails its fit with probability <= AGREE_LEVEL = 1e-6; the law's sample
    departs from itself at FALSE_MATCH per row (deterministic seeds here)."""
    from harness.checks.registry import summarize_samples
    from harness.diagnosis.mechanisms.library_laws import CONSTRUCTIONS

    law = rounded_law(TruncatedNormal(100.0, 1.0, 98.0, 102.0), torch.bfloat16)
    fmt, n = law.fmt, 1 << 19
    pushed = CONSTRUCTIONS[0].law(fmt, 100.0, 1.0, 98.0, 102.0)
    rng = np.random.default_rng(3)
    for probs, expected in ((pushed.probs, "library-construction"),
                            (np.asarray(law.hist_bin_probs(), dtype=np.float64), None)):
        counts = rng.multinomial(n, probs / probs.sum())
        keys = np.repeat(np.arange(counts.size, dtype=np.uint64), counts)
        values = rng.permutation(fmt.values_from_keys(keys))
        samples = torch.from_numpy(values).to(torch.bfloat16).reshape(-1, 256, 256)
        matches = diagnose(summarize_samples(samples, law), law)
        if expected is None:
            assert matches == (), [(m.name, m.note) for m in matches]
        else:
            assert explain("gof", "fail", "", matches, "jax")[0] == expected, matches
            # a sampler no library wrote is never given the library's kernel as its mechanism
            mechanism, note = explain("gof", "fail", "", matches, "my_sampler.py:fn")
            assert mechanism == "unexplained" and note.startswith("reads like JAX's"), note


#: (candidate, case, dtype, the library's module) whose 16-bit law is the library's own
#: construction, at smoke's stage-2 n where the count lattice does not resolve it
LIBRARY_ROWS = [("jax", "large-mean", torch.bfloat16, "jax"),
                ("jax", "large-mean", torch.float16, "jax"),
                ("jax-init", "mean-outside-3-4", torch.float16, "jax"),
                ("mlx", "normal-2sigma", torch.bfloat16, "mlx.core"),
                ("mlx", "vit-pos-embed", torch.float16, "mlx.core"),
                ("tensorflow", "vit-pos-embed", torch.bfloat16, "tensorflow"),
                ("tensorflow-param", "tail-5", torch.float16, "tensorflow"),
                ("tensorflow-param", "abs-bounds-trap", torch.float16, "tensorflow"),
                ("paddle", "tail-5", torch.bfloat16, "paddle"),
                ("paddle", "huge-std", torch.bfloat16, "paddle")]


@pytest.mark.parametrize("name,case,dtype,module", LIBRARY_ROWS)
def test_a_library_16_bit_law_reads_as_its_construction(name, case, dtype, module):
    """JAX's and MLX's inverse CDF with the uniform in the dtype, TensorFlow's standard law
    scaled in the dtype and its parameterized sampler's branches, Paddle's float32 kernel cast
    into bfloat16, pushed by the reference: the
    histogram fits (deterministic at the default run seed; a true law fails its fit with
    probability <= 1e-6)."""
    # found, not imported: paddle imported here after TensorFlow kills the process, and its
    # adapter draws in a child of its own
    if importlib.util.find_spec(module.split(".")[0]) is None:
        pytest.skip(f"{module} is not installed")
    runner, summary = stage_one(name, case, dtype, 1 << 19)
    matches = diagnose(summary, runner.law)
    match = named(matches, "library-construction")
    assert explain("gof", "fail", "", matches, name)[0] == "library-construction", match.note
