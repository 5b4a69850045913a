"""The `library-construction` mechanism: a 16-bit law built the way a library builds it, each
step rounded into the dtype, pushed value by value by the reference's arithmetic (the judge never
calls the library).

Four families of constructions, each read from the library's source:

* an inverse CDF whose uniform is itself drawn in the 16-bit dtype (JAX's
  ``jax.random.truncated_normal``, keras' jax backend; MLX's ``random::truncated_normal``):
  ``sqrt2 erfinv(u)``, u uniform on [erf(lower / sqrt2), erf(upper / sqrt2)), every step in the
  dtype, then the user's ``x * std + mean`` in the dtype. JAX's uniform is j 2^-m, j uniform on
  0..2^m - 1 (m the dtype's mantissa bits: 128 values in bfloat16, 1024 in float16); MLX's is a
  32-bit integer k, ``min(k / (2^32 - 1), below_one)`` in float32, cast into the dtype;
* the standard law rounded into the dtype, then scaled and shifted in the dtype (TensorFlow's
  ``truncated_normal``: its standard truncated normal drawn in float32 and cast; keras' torch
  backend: four standard normals drawn in the dtype, the first in the open (-2, 2) kept, else the
  first of the four, then ``mul_(stddev).add_(mean)``; TensorFlow's parameterized sampler on its
  normal-rejection branch, the bounds computed in the dtype);
* TensorFlow's parameterized sampler on its exponential-rejection branch, every step in the
  dtype, its proposals and its test drawn from the dtype's 2^m uniforms (`TfExponentialRejection`);
* Paddle's CPU kernel, which computes a 16-bit output in float32 and casts it
  (`library_kernels.PaddleSteps`, its float32 law cast value by value).

A library's float32 erf and erfinv are polynomial approximations, not the correctly rounded
functions: where an error of `APPROX` (relative) could move a value across a rounding boundary
of the dtype, the values on both sides are pooled into one bin of the fit (the split between
them is the approximation's, which the reference does not model). The histogram, which holds
every value in 16-bit, must fit one construction (chi-square p >= AGREE_LEVEL) where it departs
from the rounded law at the false-match rate: the chi-square rejects the law, or the likelihood
ratio of the construction over the law reaches len(CONSTRUCTIONS) / FALSE_MATCH
(`Evidence.departs_toward`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from reference import TruncatedNormal, rounded_law

from ...checks.hard import FINITE
from ...families.common import cached_on_law
from ..evidence import AGREE_LEVEL, Evidence, chi2_fit
from ..library_ops.affine import first_index
from ..library_ops.library_kernels import PaddleSteps
from ..match import Match, Mechanism
from .bound_atoms import BINNED
from .coarse_construction import JAX_USERS, window_law
from .proposals import in_accumulator, in_dtype

#: The relative error allowed to a library's float32 erf and erfinv (XLA's and MLX's are
#: polynomials accurate to a few float32 ulps; measured on JAX 0.10 float16: 2 of 1024 values
#: land on the other side of a rounding boundary, both within 2^-19 of it).
APPROX = 2.0 ** -19


@dataclass(frozen=True)
class Pushed:
    """A construction's law over the dtype's ordered keys (`probs`), with `group`, the fit's
    bin of each key (keys an approximation could swap share one)."""

    probs: np.ndarray
    group: np.ndarray

    def fit(self, hist: np.ndarray) -> float | None:
        size = int(self.group[-1]) + 1
        pooled = np.bincount(self.group, weights=self.probs, minlength=size)
        return chi2_fit(np.bincount(self.group, weights=hist, minlength=size), pooled)


def scalar(fmt, x: float) -> float:
    """A Python float as the library holds it in the dtype (through float32, as MLX and XLA's
    conversions do)."""
    return float(fmt.round_torch(np.array([x]))[0])


def law_of(fmt, out: np.ndarray, weights: np.ndarray, spread: np.ndarray | None = None) -> Pushed:
    """The law of the output values `out` with `weights`, normalised; `spread` holds, for each
    output, the other value an approximation could write instead (pooled with it)."""
    probs = np.zeros(1 << fmt.bits, dtype=np.float64)
    keep = ~np.isnan(out) & (weights > 0)
    keys = fmt.ordered_keys(out[keep]).astype(np.int64)
    np.add.at(probs, keys, weights[keep])
    total = probs.sum()
    if total > 0:
        probs /= total
    joined = np.zeros(probs.size, dtype=bool)  # joined[k]: key k pooled with key k - 1
    if spread is not None:
        other = fmt.ordered_keys(spread[keep]).astype(np.int64)
        lo, hi = np.minimum(keys, other), np.maximum(keys, other)
        for start, stop in zip(lo[hi > lo], hi[hi > lo]):
            joined[start + 1:stop + 1] = True
    return Pushed(probs, np.cumsum(~joined) - 1)


# -- the inverse CDF with its uniform in the dtype ----------------------------------------------

def jax_uniforms(fmt) -> tuple[np.ndarray, np.ndarray]:
    """JAX's ``uniform``: the dtype's mantissa bits of a random word under exponent 0, minus 1:
    j 2^-m, each j once."""
    m = fmt.man_bits
    return np.ldexp(np.arange(1 << m, dtype=np.float64), -m), np.ones(1 << m)


def mlx_uniforms(fmt) -> tuple[np.ndarray, np.ndarray]:
    """MLX's ``uniform``: k / (2^32 - 1) in float32 (the divisor rounds to 2^32), capped at the
    dtype's largest value below 1, cast into the dtype; each value with the count of the 2^32
    k that write it (bisection on k: the value rises with k)."""
    below_one = float(fmt.next_down(np.array([1.0]))[0])

    def value(k):
        v = in_accumulator(in_accumulator(k.astype(np.float64), fmt) * 2.0 ** -32, fmt)
        return fmt.round(np.minimum(v, below_one))

    keys = np.arange(int(fmt.ordered_keys(np.array([0.0]))[0]),
                     int(fmt.ordered_keys(np.array([below_one]))[0]) + 2, dtype=np.uint64)
    first = first_index(lambda k: fmt.ordered_keys(value(k)), keys, 0, (1 << 32) - 1)
    counts = (first[1:] - first[:-1]).astype(np.float64)
    return fmt.values_from_keys(keys[:-1]), counts


@dataclass(frozen=True)
class InverseCdf:
    """One library's inverse CDF in the dtype: its uniform, whether ``w f + a`` is one rounding
    (XLA's float16) or two, and whether the clip is to the open interval (JAX: nextafter of the
    bounds) or the closed one (MLX)."""

    label: str
    uniforms: Callable
    fused: Callable[[object], bool]
    open_clip: bool
    kernel: str = ""
    users: frozenset = frozenset()

    def law(self, fmt, mean: float, std: float, a: float, b: float) -> Pushed | None:
        f, counts = self.uniforms(fmt)
        lower, upper = scalar(fmt, (a - mean) / std), scalar(fmt, (b - mean) / std)
        sqrt2 = scalar(fmt, math.sqrt(2.0))
        bounds = {}
        for side, bound in (("a", lower), ("b", upper)):
            e = special.erf(in_dtype(np.array([bound / sqrt2]), fmt))
            found = {float(in_dtype(e * (1 + s * APPROX), fmt)[0]) for s in (0, -1, 1)}
            if len(found) > 1:
                return None  # the approximation decides the uniform's range: not modelled
            bounds[side] = found.pop()
        lo, hi = bounds["a"], bounds["b"]
        if not hi > lo:
            return None
        w = float(in_dtype(np.array([hi - lo]), fmt)[0])
        with np.errstate(over="ignore", invalid="ignore"):
            if self.fused(fmt):
                u = in_dtype(f * w + lo, fmt)
            else:
                u = in_dtype(in_dtype(f * w, fmt) + lo, fmt)
            u = np.maximum(u, lo)
            x = special.erfinv(u)
            outs = [self.finish(fmt, in_dtype(x * (1 + s * APPROX), fmt), sqrt2, lower, upper,
                                mean, std) for s in (0, -1, 1)]
        spread = np.where(outs[1] != outs[0], outs[1], outs[2])
        return law_of(fmt, outs[0], counts, spread)

    def finish(self, fmt, z, sqrt2, lower, upper, mean, std):
        """sqrt2 z, clipped, then the user's ``x * std + mean``, each in the dtype."""
        x = in_dtype(sqrt2 * z, fmt)
        if self.open_clip:
            lower = float(fmt.next_up(np.array([lower]))[0])
            upper = float(fmt.next_down(np.array([upper]))[0])
        x = np.minimum(np.maximum(x, lower), upper)
        x = in_dtype(x * scalar(fmt, std), fmt)
        return in_dtype(x + scalar(fmt, mean), fmt)


# -- the standard law rounded, then scaled and shifted in the dtype ----------------------------

@dataclass(frozen=True)
class StandardThenScaled:
    """A standard normal in the dtype, then ``x * std + mean`` in the dtype. `window(fmt, mean,
    std, a, b)` gives the standard bounds the library keeps the normal in, and whether it
    compares them strictly (None: the library cannot express the law, or takes another path).
    `rounds_first`: the normal is rounded into the dtype and then compared (keras' torch
    backend: the first of `tries` draws inside, else the first of them whatever its value; 0:
    until one falls inside), else truncated before the rounding (TensorFlow: its float32 draw
    compared with 2). `torch_scalars`: the factor enters float32 as is (torch's ``mul_``), else
    it is cast into the dtype first (TensorFlow's tensors)."""

    label: str
    window: Callable
    rounds_first: bool
    tries: int
    torch_scalars: bool
    kernel: str = ""
    users: frozenset = frozenset()

    def law(self, fmt, mean: float, std: float, a: float, b: float) -> Pushed | None:
        found = self.window(fmt, mean, std, a, b)
        if found is None:
            return None
        lo, hi, strict = found
        base = (-math.inf, math.inf) if self.rounds_first else (lo, hi)
        probs = np.asarray(rounded_law(TruncatedNormal(0.0, 1.0, *base), fmt).hist_bin_probs(),
                           dtype=np.float64)
        keys = np.nonzero(probs)[0]
        z, weights = fmt.values_from_keys(keys.astype(np.uint64)), probs[keys]
        if self.rounds_first:
            inside = ((z > lo) & (z < hi)) if strict else ((z >= lo) & (z <= hi))
            p_in = float(weights[inside].sum())
            if not p_in > 0:
                return None
            miss = (1.0 - p_in) ** self.tries if self.tries else 0.0
            weights = np.where(inside, weights * (1.0 - miss) / p_in,
                               weights * miss / max(1.0 - p_in, 1e-300))
        factor = (float(in_accumulator(np.array([std]), fmt)[0]) if self.torch_scalars
                  else scalar(fmt, std))
        with np.errstate(over="ignore", invalid="ignore"):
            x = in_dtype(in_dtype(z * factor, fmt) + scalar(fmt, mean), fmt)
        return law_of(fmt, x, weights)


def two_sigma(fmt, mean: float, std: float, a: float, b: float, strict: bool):
    """+-2, the only window of a sampler without bounds (None for other bounds)."""
    if math.isclose(a, mean - 2.0 * std) and math.isclose(b, mean + 2.0 * std):
        return -2.0, 2.0, strict
    return None


#: Where TensorFlow's parameterized sampler draws normals and rejects those outside the bounds
#: (``kStdDevsInsideBoundsToUseRandnSampler``); elsewhere it samples uniform or exponential
#: proposals, not modelled here.
TF_RANDN_INSIDE = 1.3


def tf_randn_window(fmt, mean: float, std: float, a: float, b: float):
    """The standard bounds of ``stateless_parameterized_truncated_normal``'s normal-rejection
    branch, computed in the dtype like its kernel (``(minval - mean) / stddev``, closed); None
    where the kernel takes its uniform or exponential branch, or swaps the bounds."""
    m, s, lo, hi = (scalar(fmt, v) for v in (mean, std, a, b))
    if math.isinf(lo) or hi < m or not s > 0:
        return None  # the kernel mirrors the law first
    with np.errstate(over="ignore", invalid="ignore"):
        n_lo, n_hi = (float(in_dtype(in_dtype(np.array([v - m]), fmt) / s, fmt)[0])
                      for v in (lo, hi))
    inside = TF_RANDN_INSIDE
    if (n_lo < -inside and n_hi >= 0.0) or (n_hi > inside and n_lo <= 0.0):
        return n_lo, n_hi, False
    return None


@dataclass(frozen=True)
class TfExponentialRejection:
    """TensorFlow's parameterized sampler off its normal branch, where the window's width beats
    its cutoff (one-sided and far windows): Robert's exponential proposals, each step in the
    dtype (its kernel is templated on the dtype: half arithmetic, each operation through float),
    ``z = -log(u) / alpha + normMin``, accepted where ``u' <= exp(-x^2 / 2)`` and ``z < normMax``,
    then ``z * stddev + mean``. The dtype's uniforms are j 2^-m, j uniform on 0..2^m - 1 (m the
    mantissa bits), so the law is a sum over the 2^m proposals, each weighted by its acceptance
    (the share of the 2^m values of u' at or below its g)."""

    label: str
    kernel: str = ""
    users: frozenset = frozenset()

    def law(self, fmt, mean: float, std: float, a: float, b: float) -> Pushed | None:
        m, s, lo, hi = (scalar(fmt, v) for v in (mean, std, a, b))
        if math.isinf(lo) or hi < m or not s > 0:
            return None

        def op(x):
            return in_dtype(np.asarray(x, dtype=np.float64), fmt)

        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            n_lo, n_hi = (float(op(op(v - m) / s)) for v in (lo, hi))
            root = float(op(np.sqrt(op(op(n_lo * n_lo) + 4.0))))
            cutoff = float(op(op(2.0 * op(np.exp(op(0.5 + op(op(n_lo * op(n_lo - root)) / 4.0)))))
                              / op(n_lo + root)))
            randn = ((n_lo < -TF_RANDN_INSIDE and n_hi >= 0.0)
                     or (n_hi > TF_RANDN_INSIDE and n_lo <= 0.0))
            if randn or not float(op(n_hi - n_lo)) >= cutoff:
                return None  # the normal or the uniform branch
            alpha = float(op(op(n_lo + root) / 2.0))
            size = 1 << fmt.man_bits
            u = np.ldexp(np.arange(size, dtype=np.float64), -fmt.man_bits)
            log_u = np.log(u)
            outs, weights = [], None
            for sign in (0, -1, 1):
                z = op(op(-op(log_u * (1 + sign * APPROX)) / alpha) + n_lo)
                if weights is None:
                    x = op(alpha - z) if n_lo < alpha else np.full(size, float(op(n_lo - alpha)))
                    g = op(np.exp(op(op(-x * x) / 2.0)))
                    accepted = np.minimum(size, np.floor(g * size) + 1.0)
                    weights = np.where((g >= 0) & (z < n_hi), accepted, 0.0)
                outs.append(op(op(z * s) + m))
        spread = np.where(outs[1] != outs[0], outs[1], outs[2])
        return law_of(fmt, outs[0], weights, spread)


@dataclass(frozen=True)
class PaddleKernel:
    """Paddle's CPU kernel for a 16-bit output: its float32 law (`PaddleSteps`: the kernel's
    uniform, Erfinv and clamp repeated exactly, enumerated over the window's float32 values of
    p), each value then cast into the dtype (round to nearest even)."""

    label: str
    kernel: str = ""
    users: frozenset = frozenset()

    def law(self, fmt, mean: float, std: float, a: float, b: float) -> Pushed | None:
        steps = PaddleSteps.on(fmt, mean, std, a, b)
        coarse = window_law(steps) if steps is not None else None
        if coarse is None:
            return None
        probs = np.zeros(1 << fmt.bits, dtype=np.float64)
        probs[coarse.keys.astype(np.int64)] = coarse.probs
        return Pushed(probs, np.arange(probs.size))


def _xla_fuses(fmt) -> bool:
    # Measured on JAX 0.10's CPU backend: float16's ``f * (b - a) + a`` is rounded once (XLA
    # keeps the product in float32), bfloat16's twice (each op normalised through float32).
    return fmt.name == "float16"


#: The constructions, each with the libraries it stands for (`kernel`) and the registered
#: candidates that run it (`users`: the catalog names a construction only for them).
CONSTRUCTIONS = (
    InverseCdf("JAX's inverse CDF, its uniform j 2^-m in the dtype (jax, keras-jax)",
               jax_uniforms, _xla_fuses, open_clip=True, kernel="JAX's truncated_normal kernel",
               users=JAX_USERS),
    InverseCdf("MLX's inverse CDF, its uniform a 32-bit k / 2^32 cast into the dtype",
               mlx_uniforms, lambda fmt: False, open_clip=False,
               kernel="MLX's truncated_normal kernel", users=frozenset({"mlx"})),
    StandardThenScaled("the standard law on [-2, 2] rounded, then x std + mean in the dtype "
                       "(TensorFlow's truncated_normal)",
                       lambda *law: two_sigma(*law, strict=True), rounds_first=False, tries=0,
                       torch_scalars=False, kernel="TensorFlow's truncated_normal kernel",
                       users=frozenset({"tensorflow"})),
    StandardThenScaled("keras' torch backend: a standard normal in the dtype, the first of four "
                       "in the open (-2, 2), then mul_(std).add_(mean)",
                       lambda *law: two_sigma(*law, strict=True), rounds_first=True, tries=4,
                       torch_scalars=True, kernel="keras' torch-backend truncated_normal",
                       users=frozenset({"keras-torch"})),
    StandardThenScaled("a standard normal in the dtype kept in the bounds computed in the "
                       "dtype, then x std + mean in the dtype (TensorFlow's "
                       "parameterized_truncated_normal, its normal-rejection branch)", tf_randn_window,
                       rounds_first=True, tries=0, torch_scalars=False,
                       kernel="TensorFlow's parameterized_truncated_normal kernel",
                       users=frozenset({"tensorflow-param"})),
    TfExponentialRejection("TensorFlow's parameterized_truncated_normal (its exponential-"
                           "rejection branch): the dtype's uniforms j 2^-m through -log(u) / "
                           "alpha + normMin and the test u' <= exp(-x^2 / 2), in the dtype",
                           kernel="TensorFlow's parameterized_truncated_normal kernel",
                           users=frozenset({"tensorflow-param"})),
    PaddleKernel("Paddle's truncated_gaussian_random kernel in float32 (its uniform from a "
                 "64-bit word, its own Erfinv, the clamp to float32 bounds), cast into the dtype",
                 kernel="Paddle's truncated_gaussian_random kernel", users=frozenset({"paddle"})),
)


def construction_law(law, index: int) -> Pushed | None:
    """CONSTRUCTIONS[index]'s law on a RoundedLaw's parameters (None: not expressible)."""
    dist = law.dist
    return CONSTRUCTIONS[index].law(law.fmt, float(dist.loc), float(dist.scale), float(dist.a),
                                    float(dist.b))


class LibraryConstruction(Mechanism):
    name = "library-construction"
    explains = BINNED
    doc = ("A library's own construction with every step rounded into the 16-bit dtype: an "
           "inverse CDF whose uniform is drawn in the dtype (JAX: j 2^-m; MLX: a 32-bit draw "
           "cast into the dtype), or the standard law rounded and then scaled and shifted in "
           "the dtype (TensorFlow, keras' torch backend). Prediction: that law value by value; "
           "the per-value histogram departs from the rounded law (chi-square, or the likelihood ratio "
           "toward the construction) and fits it.")

    def test(self, ev: Evidence) -> Match | None:
        if ev.bins is None or ev.summary.hist_bits != ev.law.fmt.bits:
            return None
        fitting = []
        for index, construction in enumerate(CONSTRUCTIONS):
            pushed = cached_on_law(ev.law, f"_library_construction_{index}",
                                   lambda law, i=index: construction_law(law, i) or False)
            if not pushed or np.count_nonzero(pushed.probs) < 2:
                # a construction writing one value fits any sampler stuck on that value:
                # point-mass and outside-support name it, not a library
                continue
            p = pushed.fit(ev.hist)
            if p is None or p < AGREE_LEVEL or not ev.departs_toward(pushed.probs,
                                                                     len(CONSTRUCTIONS)):
                continue
            fitting.append((construction, pushed, p))
        if not fitting:
            return None
        # the first that fits names the note; every one that fits says whose kernel it may be
        construction, pushed, p = fitting[0]
        keys = np.nonzero(pushed.probs)[0]
        values = ev.law.fmt.values_from_keys(keys.astype(np.uint64))
        note = (f"the histogram fits {construction.label} (chi-square p {p:.2g}): "
                f"{keys.size} values written, where the law writes "
                f"{int(np.count_nonzero(ev.bins.probs))}; not the rounded law "
                f"(p {ev.canonical_fit:.2g}; likelihood ratio "
                f"e^{ev.log_likelihood_ratio(pushed.probs):.3g} for the construction)")
        if len(fitting) > 1:
            note += "; it fits " + ", ".join(f"{c.kernel} too (p {q:.2g})"
                                             for c, _, q in fitting[1:])
        explains = self.explains
        infinite = float(pushed.probs[keys[~np.isfinite(values)]].sum())
        if infinite > 0:
            # erfinv(+-1) = +-inf kept by a clip to an infinite bound: the fit holds them
            explains = explains | {FINITE.name}
            note += f"; {infinite:.3g} of the values infinite (erfinv of +-1)"
        return self.match(note, parameter=keys.size, explains=explains,
                          kernel=" or ".join(dict.fromkeys(c.kernel for c, _, _ in fitting)),
                          kernel_of=frozenset().union(*(c.users for c, _, _ in fitting)))
