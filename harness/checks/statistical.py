"""The statistical checks: pure functions ``(Summary, RoundedLaw, *, alpha) -> Outcome``.

``alpha`` is only used to state the minimum detectable effect (MDE); the verdict is taken by
`harness.runner.CaseRunner` from the p-value. Every p-value is valid (exact or conservative) for the rounded
law, in [0, 1], and never NaN when ``Outcome.applicable``. Zero-probability events under the law
(counts in bins the law gives no mass, a row extreme outside the support, an atom of mass 0 hit)
set ``decisive=True`` with p = 0.

MDE convention (all checks): the effect that the whole check, Bonferroni factor included, detects
with probability 0.5 at level alpha, i.e. the effect that puts the statistic's median on the
critical value. Power 0.9 needs roughly 1.6x (z-tests) to 2x (counts) the effect, or ~(1.6)^2 the n.

The math lives in the ``stat_*`` modules, one per family; this module declares each check
(`harness.checks.check.statistical`): its one-line doc, its method, the unit of its effect and
its MDE as a function of the law, n, the tensor's shape and alpha.
"""

from __future__ import annotations

from .check import statistical
from .stat_counts import atoms_mde, check_atoms, check_tails, tails_mde
from .stat_extremes import check_extremes, extremes_mde
from .stat_fit import check_gof, check_ks, gof_mde, ks_mde
from .stat_independence import check_independence, independence_mde
from .stat_local import SPIKES_UNIT, check_scan, check_spikes, scan_mde, spikes_mde
from .stat_moments import check_moments, moments_mde
from .stat_position import check_position, check_repetition, position_mde
from .stat_resolution import (COLLISIONS_UNIT, LATTICES_UNIT, LOW_BITS_DOC, LOW_BITS_UNIT,
                              check_collisions, check_lattices, check_low_bits, collisions_mde,
                              lattices_mde, low_bits_mde)

GOF = statistical(
    "gof", check_gof,
    doc='Chi-square / G over exact histogram bins of the rounded law.',
    method=(
        "Pearson chi-square goodness of fit over the Summary's histogram (ordered-key bins: every "
        "bit pattern for 16-bit dtypes, runs of 2^12 / 2^44 consecutive values for float32 / "
        "float64) against the rounded law's exact bin masses. Null: the samples are iid draws of "
        "the rounded law. Bins the law gives zero mass are judged apart: any count there is a "
        "zero-probability event (decisive, p = 0). Positive-mass bins are merged, in order and "
        "never across a zero-mass bin's count, into groups expecting >= 5 samples (Cochran); the "
        "statistic X2 = sum (O - E)^2 / E is referred to chi-square(groups - 1). False-alarm rate: "
        "alpha up to the chi-square approximation (measured calibrated; p-values uniform). Effect: "
        "excess Cohen's w = sqrt(max(X2 - df, 0) / n); message names the group with the largest "
        "standardized residual by value range. MDE: the w whose noncentral chi-square "
        "(lambda = n w^2) has median at the level-alpha critical value."
    ),
    unit="Cohen's w",
    mde=lambda law, n, shape, alpha: gof_mde(law, n, alpha),
)

KS = statistical(
    "ks", check_ks,
    doc="Kolmogorov-Smirnov against the rounded law's CDF at the bin edges.",
    method=(
        "Kolmogorov-Smirnov distance D = max |F_n - F| over histogram bin edges, F the rounded "
        "law's CDF at the top of each bin (cumulative bin masses; the left limit at a bin's bottom "
        "is the previous bin's top, so for 16-bit dtypes D is the exact sup over the line). Null: "
        "iid draws of the rounded law. p-value from the continuous one-sample KS law (exact "
        "scipy.stats.kstwo up to n = 20000, Kolmogorov's limit above, which is conservative): "
        "conservative for a discrete law and for a sup over a subset of points, so the false-alarm "
        "rate is <= alpha (close to alpha for 32/64-bit bins, well below it for coarse lattices). "
        "Effect: D. MDE: the level-alpha critical value of D at this n (an alternative with "
        "sup |F_alt - F| at that value is detected with probability ~0.5)."
    ),
    unit="D (CDF distance)",
    mde=lambda law, n, shape, alpha: ks_mde(law, n, alpha),
)

ATOMS = statistical(
    "atoms", check_atoms,
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
    mde=lambda law, n, shape, alpha: atoms_mde(law, n, alpha),
)

TAILS = statistical(
    "tails", check_tails,
    doc="Counts beyond the law's 1e-3, 1e-5 and 1e-7 quantiles on each side.",
    method=(
        "Counts beyond the rounded law's 1e-3, 1e-5 and 1e-7 quantiles on each side. The cuts are "
        "histogram bin boundaries chosen from the law's cumulative bin masses (lower tail from the "
        "cumulative sum, upper tail from the reversed one, no 1 - F cancellation) so that the "
        "exact tail mass is closest to each target (log scale, at most 10x it); duplicate cuts on "
        "coarse lattices are tested once. Null: iid draws of the rounded law; each count is "
        "Bin(n, exact tail mass); exact two-sided binomial tests, Bonferroni over the <= 6 tests. "
        "Catches cut tails (observed << expected) and far outliers (observed >> expected). "
        "False-alarm rate <= alpha. Effect: obs/exp of the worst tail. MDE: the obs/exp ratio "
        "below 1 (a deficit, e.g. a cut tail) of the heaviest tail set whose mean sits on the "
        "lower critical count at level alpha / tests."
    ),
    unit="obs/exp (deficit in the 1e-3 tail)",
    mde=lambda law, n, shape, alpha: tails_mde(law, n, alpha),
)

MOMENTS = statistical(
    "moments", check_moments,
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
    mde=lambda law, n, shape, alpha: moments_mde(law, n, alpha),
)

EXTREMES = statistical(
    "extremes", check_extremes,
    doc='Row minima and maxima against the exact order-statistic law.',
    method=(
        "Per-row minima and maxima (along the last dimension) against the exact order-statistic "
        "law of a row of m iid draws of the rounded law: P(rowmin <= v) = 1 - P(Y > v)^m etc., "
        "computed in log space. Randomized probability-integral transform for the discrete law "
        "(V from a fixed seed mixed with a hash of the data: deterministic verdicts), so under the "
        "null the PITs are exactly iid U(0, 1). Four components, Bonferroni: KS of the row-min "
        "PITs and of the row-max PITs against U(0, 1), and the smallest PIT of each side against "
        "the law of the minimum of R uniforms, 1 - (1 - u)^R (one row far beyond what the law "
        "allows barely moves a KS statistic over 65536 rows but gets p ~ R u). A row extreme "
        "outside the law's support is decisive. This is the '9 of 10 rows have minimum -100 "
        "sigma' check. False-alarm rate <= alpha (exact under the null up to KS's own accuracy). "
        "Effect: the larger KS distance. MDE: the level alpha/4 KS critical value at R rows."
    ),
    unit="D (row-extreme PIT vs uniform)",
    mde=lambda law, n, shape, alpha: extremes_mde(law, n, int(shape[-1]) if shape else 0, alpha),
)

INDEPENDENCE = statistical(
    "independence", check_independence,
    doc='Lag-1 correlation along every dim and across calls; duplicate rows.',
    method=(
        "Lag-1 Pearson correlation along every dimension of the filled tensor and between the same "
        "element of successive calls (z = sqrt(pairs) r ~ N(0, 1) under independence), bit-identical "
        "elements between successive calls against law.collision_prob (exact binomial for 16-bit "
        "with the overlapping-pair variance term when it matters; one-sided above 16 bits, where "
        "the collision probability is approximate), and rows equal to an earlier row of their call "
        "(Poisson with mean calls * C(R, 2) * q^m, one-sided, while that is small). Bonferroni over "
        "the applicable components; correlations not applicable for a one-atom law. False-alarm "
        "rate <= alpha (asymptotic for the correlations). Effect: the worst component's r (or "
        "obs/exp for the counts); message names the dimension/component. MDE: |r| = "
        "z_(alpha/2K) / sqrt(pairs) (for counts: the obs/exp ratio on the critical count)."
    ),
    unit="abs(r), lag-1 last dim",
    mde=lambda law, n, shape, alpha: independence_mde(law, n, tuple(shape), alpha),
)

SPIKES = statistical(
    "spikes", check_spikes,
    doc='No single value over-represented: the finest exact bins, then (stage 2) the values themselves.',
    method=(
        "Point masses: the most over-represented single values. Bins: every bit pattern for "
        "16-bit dtypes; for 32/64-bit dtypes the law's mass bins (contiguous runs of values holding "
        "about 2^-18.5 = 2.7e-6 of the law each at most, a single value where one holds more; exact masses), "
        "where a main histogram bin holds up to 1e-4. Null: iid draws of the rounded law; each bin's count "
        "is Bin(n, its exact mass): exact upper-tail binomial test, Bonferroni over the K bins of "
        "positive mass (a count where the law has no mass is decisive). Stage 2 (4x n, fresh "
        "seed) also tallies the exact values falling in the <= 8 bins stage 1 found most "
        "over-represented and tests each value's count against Bin(n, P(Y = v)), Bonferroni over "
        "every bit pattern of those bins, then over the two components. False-alarm rate <= alpha "
        "per stage (union bound; the watch list depends on stage 1 only). Effect: the worst bin's "
        "excess as a share of the samples (a value written instead of the law's draw 1e-5 of the "
        "time shows as 1e-5). MDE: the extra point mass whose median count reaches the level "
        "alpha/K critical count in the heaviest bin (worst case)."
    ),
    unit=SPIKES_UNIT,
    mde=lambda law, n, shape, alpha: spikes_mde(law, n, alpha),
)

SCAN = statistical(
    "scan", check_scan,
    doc='No bump or hole at any scale: every interval of a multiscale family, exact binomial tests.',
    method=(
        "Bumps and holes at every scale: a multiscale scan over the same bins as spikes (every "
        "value for 16-bit dtypes, the mass bins for 32/64-bit). Intervals: windows of w "
        "consecutive blocks of 2^l bins starting at every block, w in {4, 6} at every level l and "
        "w in {1, 2, 3} at l = 0 (lengths 1, 2, 3, 4, 6, 8, 12, ...: any run of bins contains an "
        "interval of the family longer than half of it). Null: iid draws of the rounded law; each "
        "interval's count is Bin(n, exact mass): exact two-sided binomial test (doubled smaller "
        "tail); each family (l, w) gets alpha/F, Bonferroni over its intervals (union bound; "
        "only intervals beyond 3 sd are priced, which can only raise p). A count where the law "
        "has no mass is decisive. Finds a narrow excess or an empty interval that chi-square "
        "averages away. False-alarm rate <= alpha. Effect: the worst interval's (observed - "
        "expected) / n, negative for a hole. MDE: the mass of an interval never produced (a "
        "hole) that, at the median alignment with typical bins, contains a whole scan interval "
        "whose empty count is significant (power >= 0.5)."
    ),
    unit="hole mass (share of samples)",
    mde=lambda law, n, shape, alpha: scan_mde(law, n, alpha),
)

POSITION = statistical(
    "position", check_position,
    doc='The law of elements by position: first, last, vector-loop remainders, row ends.',
    method=(
        "The law of elements by their flat position in the tensor: the first and the last element, "
        "the remainders of numel modulo 2, 4, 8, 16 and 32 (what a vectorized loop's remainder "
        "writes), the first and last element of every row and the row remainders modulo 8 and 32 "
        "(`harness.bins.position_classes`; empty, whole-tensor and duplicate classes dropped). Each "
        "class's elements, pooled over the calls, are counted in the law's 16 coarse groups of "
        "about equal exact mass (runs of histogram bins; `harness.bins.position_bins`), groups "
        "merged to expect >= 10 elements; Pearson chi-square per class, Bonferroni over the classes "
        "tested (a class needs two merged groups). Null: every position has the law's marginal. "
        "Catches a remainder loop, a boundary block or a row end written by another code path, "
        "however small a share of the tensor it is. False-alarm rate <= alpha up to the chi-square "
        "approximation. Effect: Cohen's w of the worst class. MDE: the w detectable with power 0.5 "
        "in the smallest class tested, at level alpha / classes."
    ),
    unit="Cohen's w (smallest position class)",
    mde=lambda law, n, shape, alpha: position_mde(law, n, tuple(shape), alpha),
)

REPETITION = statistical(
    "repetition", check_repetition,
    doc='No stretch of the output appears twice, in the same tensor or the next call.',
    method=(
        "A stretch of the output that appears again: at another offset of the same tensor (a "
        "counter that wraps inside a big tensor) or in the next call (an offset reused). The engine "
        "hashes 32-element windows at content-defined anchors (the elements whose bit pattern "
        "hashes to 0 modulo 128: a repeated stretch has its anchors at the same places of its "
        "content; a stretch of 1024 elements holds ~8) and counts equal hashes inside each chunk of "
        "calls and against the previous call, over the first 2^24 elements of a draw (and always "
        "its first two calls); memory is one chunk's hashes and one call's. Null: iid draws; two "
        "windows (overlapping or not) are equal with probability <= q^32, q the law's collision "
        "probability, so the equal pairs are at most Poisson(pairs x q^32): exact upper tail; "
        "decisive where that expectation is below 1e-12. Not applicable where it exceeds 0.01 (a "
        "law of a few values). False-alarm rate <= alpha. Effect: equal pairs. MDE: one equal pair "
        "(a repeated stretch of >= 1024 elements gives ~8)."
    ),
    unit="equal window pairs (a repeated stretch of >= 1024 elements gives ~8)",
    mde=lambda law, n, shape, alpha: 1.0,
)

COLLISIONS = statistical(
    "collisions", check_collisions,
    doc='Equal values no more (or less) often than the law allows: the bits of randomness.',
    method=(
        "Equal values, at the resolution of single values (32/64-bit dtypes; 16-bit ones count "
        "every value already). The engine takes the first 2^19 finite values of a draw, pooled "
        "across calls, in blocks of m consecutive values (m = 2^18, halved while m q > 2^-8, q "
        "the law's collision probability; not applicable below m = 256, a law of a few thousand "
        "values judged one by one by fine bins and spikes), sorts each block on the device and "
        "counts its pairs of equal values (the last block shorter). Null: iid draws of the rounded law; a block's pairs "
        "have mean C(m, 2) q and variance C(m, 2) [(q - q^2) + 2 (m - 2)(q3 - q^2)], q = sum "
        "P(Y = v)^2, q3 = sum P(Y = v)^3 (the reference's, exact from the atoms or from h^(k-1) "
        "int f^k per bin, relative error O((h / std)^2)); blocks are independent. The total T is "
        "tested as T / d ~ Poisson(mean / d), d = variance / mean (d = 1 + ~2e-3 for a wide "
        "law: the exact Poisson test), two-sided by doubling the smaller tail. Catches too few "
        "random bits (23 or 24-bit uniforms behind a float32: x8, x4), arithmetic coarser than "
        "the dtype (float32 values in a float64 tensor: ~2^29 times the law's pairs) and a "
        "dropped last bit (x2). False-alarm rate ~alpha (measured over seeds: "
        "tests/calibration). Effect: obs/exp pairs; the message and the results' `resolution` "
        "column give the figure: log2 of the effective number of equally likely values, (pairs "
        "compared) / (equal pairs), with a 95% CI, next to the law's own log2(1 / q). MDE: the "
        "obs/exp ratio whose median count sits on the upper critical count at alpha / 2 (float32 "
        "N(0, 1) at +-2: ~1.1, a tenth of a bit; float64: ~2^19, the law expects 2^-19 pairs)."
    ),
    unit=COLLISIONS_UNIT,
    mde=lambda law, n, shape, alpha: collisions_mde(law, n, alpha),
)

LATTICES = statistical(
    "lattices", check_lattices,
    doc="No more values on a coarser format's lattice than the law puts there.",
    method=(
        "Values representable in a coarser format: bfloat16 and float16 values in a float32 "
        "tensor, float32 values in a float64 one (a sampler that computes in the coarser format "
        "and writes wider produces nothing else). Among the same first 2^19 finite values of a "
        "draw as collisions, the count on each lattice is Bin(scanned, the law's exact mass on "
        "it) under iid draws of the rounded law (RoundedLaw.lattice_mass: atom by atom where "
        "the support holds <= 2^22 coarse values, always for 16-bit ones; 2^-29 P(2^-126 <= "
        "|X| <= float32 max) for a wide float64 law, relative error ~2^-23); exact two-sided "
        "binomial tests, Bonferroni over the lattices; a count on a lattice the law gives no "
        "mass is decisive. False-alarm rate <= alpha. Effect: obs/exp at the worst lattice. "
        "MDE: the obs/exp ratio at the better-powered lattice whose median count sits on its "
        "upper critical count at alpha / (2 lattices)."
    ),
    unit=LATTICES_UNIT,
    mde=lambda law, n, shape, alpha: lattices_mde(law, n, alpha),
)

LOW_BITS = statistical(
    "low_bits", check_low_bits,
    doc="The last 4 bits of single 32/64-bit values against the law's mass of each class.",
    method=LOW_BITS_DOC,
    unit=LOW_BITS_UNIT,
    mde=lambda law, n, shape, alpha: low_bits_mde(law, n, alpha),
)


DECLARED = (GOF, KS, ATOMS, TAILS, MOMENTS, EXTREMES, INDEPENDENCE, SPIKES, SCAN, POSITION,
            REPETITION, COLLISIONS, LATTICES, LOW_BITS)
