"""The `coarse-construction` mechanism: an inverse-CDF sampler whose uniform's image is rounded
into a 32/64-bit dtype where that dtype holds few values, so that the sample takes only the few
values the construction can reach, each with the share of the uniform's lattice that writes it.

The libraries' inverse CDFs (JAX, MLX, timm and torch <= 2.11; NumPyro and Paddle in Phi space,
each with steps of its own) draw

    u = RN(j 2^-k)                               (k random bits: 23, 24 or 32 in float32)
    v = RN(lo + RN(span u))                      (erf or Phi space, in the dtype)
    x = the steps from v to the output value     (erfinv or Phi^-1, scale, shift, clip)

and on a window far from the mean, [lo, hi] sits near +-1 where the dtype's grid is coarse:
erf(3 / sqrt2) .. erf(4 / sqrt2) holds ~45 000 float32 values, erf(10 / sqrt2) and beyond round
to 1 (every draw writes one value), and a window narrower than an ulp holds a handful. There the
law of x is a short list, enumerated exactly: the dtype's values v in [lo, hi] (at most
`MAX_VALUES`), each with the count of lattice points j that write it (bisection on the
non-decreasing map j -> v, as `harness.diagnosis.library_ops.uniform_bits` finds a run), each carried
to its output value by scipy's erfinv and ndtri in float64, every step rounded into the dtype like
the library's kernel, or (below) by the kernel itself repeated. These laws name a mechanism; the
candidate is still judged against the reference's law alone.

From that law each check's statistic is predicted and set against the Summary, and a check is
explained only where its prediction agrees (`value_law.read`): the equal pairs at sum p^2
(MODEL_TOL) and the equal successive elements at the same rate; the judged histogram (main or fine
bins) and the localized mass bins by a chi-square fit at AGREE_LEVEL; the coarser lattices and
the last bits' classes where they agree with the law's shares. A library's float32 erfinv is an
approximation a few ulps off the correctly rounded one: the output values it could move across a
bin's edge (an error of `APPROX` relative) pool their bins in each fit (which then explains its
checks only where the rounded law, pooled alike, is still rejected), and the last bits, which
the approximation decides, are explained only where the reference's happen to fit. The match
names the constructions that read alike, and the candidates that run them
(`Match.kernel_of`): the catalog names it only for those.

JAX's float32 construction is exact instead: its ends, its fused ``f (b - a) + a`` and its erfinv
are XLA's CPU kernel step by step (`harness.diagnosis.library_ops.xla_cpu`), so its law carries the
kernel's last bits, and no pooling. So is timm's (torch <= 2.11's) in float32: torch's CPU
``uniform_``, fused or not as this torch measures, and torch's own erfinv
(`harness.diagnosis.library_ops.torch_cpu`). So is MLX's in float32 (its erf, its uniform and its erfinv
through the C library's logf, `harness.diagnosis.library_ops.mlx_cpu`). Where the window holds more than
MAX_VALUES values of v and the equal pairs, the last bits, the tails, the scan or the histogram
depart with no earlier row explaining them, that law is pushed over the whole 2^23-point (timm:
2^24) lattice (a few seconds), which reaches any window: the huge-std case's million values.
NumPyro's float32 sampler (JAX's uniform through Phi-space and JAX's ndtri, op by op,
`library_kernels.NumpyroSteps`) and TensorFlow's float32 rejection samplers
(`library_kernels.TensorflowSteps`, each proposal weighted by the chance the kernel keeps it)
are only ever pushed that way; in float64 both are held on cells (below). Paddle's kernel
(`library_kernels.PaddleSteps`, read from its C++ source: its uniform from a 64-bit word, its
own Erfinv, double and float steps as C++ mixes them, the clamp to float32 bounds) is repeated
exactly too, enumerated over its window's values of p with each value's share of the 64-bit
words (`window_law`). Where that window holds more values than the enumeration takes (float64 on
a sub-ulp window: ~10^11) and the bins depart, its law is held on 2^21 cells of the uniform
instead (`cell_law`), and so are TensorFlow's and NumPyro's float64 kernels (52-bit uniforms;
where the others are pushed whole): each cell's mass is known and its values lie between the
images of the points drawn in its neighbours, so the histogram and the mass bins are predicted
(their bins pooled over each cell's range); the value at the point drawn in each cell makes a
stratified sample of the law, from which the last bits' shares are estimated (their fit's
chi-square divided by 1 + n / the cells, the two samples' variance); the equal pairs and the
lattices, which need the law's own values, are not predicted. Far out two constructions can
predict alike (TensorFlow's and NumPyro's float64 last bits on tail-5): the note names every
one that reads as well, and the row the closest fit.

It is the catalog's last row and claims only the checks no earlier row explains. It reads only
32/64-bit Summaries, and departs only where the equal pairs (the collisions check), the last
bits' classes, the tails, the scan of the mass bins or the judged histogram (main or fine bins,
chi-square) depart from the rounded law at FALSE_MATCH: five events, <= 5 FALSE_MATCH for an
exact sampler, so an exact sampler's law almost never costs the enumeration.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from ...families.binned import GOF
from ...families.common import cached_on_law
from ...families.independence import INDEPENDENCE
from ...families.localized import SCAN
from ...families.resolution import COLLISIONS, LATTICES, LOW_BITS
from ...families.tails import TAILS
from ..evidence import FALSE_MATCH, Evidence, chi2_fit
from ..library_ops import mlx_cpu, torch_cpu, xla_cpu
from ..library_ops.affine import first_index
from ..library_ops.library_kernels import NumpyroSteps, PaddleSteps, TensorflowSteps
from ..match import Match, Mechanism
from ..scope import TORCH_INVERSE_CDF
from . import value_law
from .bound_atoms import BINNED
from .proposals import in_accumulator
from .value_law import CoarseLaw

#: The most dtype values of v a law is enumerated over (beyond: many values, not this regime).
MAX_VALUES = 1 << 20
#: The widest uniform an exact kernel's law is pushed through point by point beyond MAX_VALUES
#: (JAX's float32: 2^23 points, about a second; torch's: 2^24).
WHOLE_LATTICE_BITS = 24
#: Lattice points pushed at once on that path.
CHUNK = 1 << 16
#: Cells of the uniform a kernel's law is held on where its lattice holds more values than
#: the enumeration takes (Paddle's float64 window: ~10^11 on a sub-ulp window; TensorFlow's
#: 52-bit uniform), the ulps each cell's image is widened by (the kernel is monotone up to its
#: last bits), and the seed of the point drawn in each cell.
CELLS = 1 << 21
CELL_MARGIN_ULPS = 2
CELL_SEED = 20261205
#: The relative error allowed to a library's erfinv in float32 (XLA's, MLX's and torch's are
#: polynomials a few ulps off the correctly rounded value) and in float64.
APPROX = {32: 2.0 ** -20, 64: 2.0 ** -46}


def rn(fmt, x) -> np.ndarray:
    """x rounded into the dtype (one operation of the dtype's arithmetic: float64 holds the
    exact sum or product of two float32 values)."""
    return fmt.round(np.asarray(x, dtype=np.float64))


def scalar(fmt, x: float) -> float:
    return float(rn(fmt, np.array([x]))[0])


@dataclass(frozen=True)
class Construction:
    """One library's inverse CDF. `space`: where its uniform lives, erf (v in
    erf(alpha / sqrt2) .. erf(beta / sqrt2), then sqrt2 erfinv: the generic `Steps`) or cdf
    (Phi, then Phi^-1: constructions with steps of their own); `bits`: the uniform's width by
    dtype width; `ends_in_dtype`: the ends computed in the dtype from the bounds in sigma units
    (JAX, MLX) or in float64 and rounded once (torch's Python scalars); `standard`: the
    standard law on the bounds in sigma units, then ``x * std + mean`` in the dtype; `finish`:
    the steps from z = erfinv(v) to the output (a function of fmt, z and the law); `xla`: in
    float32 the ends, the uniform's image and erfinv are XLA's CPU kernel step by step
    (`harness.diagnosis.library_ops.xla_cpu`: the law exact, no erfinv error to allow for);
    `torch_kernels`: in float32 the uniform's image and erfinv are torch's CPU kernels
    (`harness.diagnosis.library_ops.torch_cpu`: exact too, where this torch's uniform_ is one the model
    repeats); `mlx_kernels`: in float32 the ends, the uniform's image and erfinv are MLX's
    CPU kernels step by step (`harness.diagnosis.library_ops.mlx_cpu`: exact); `steps`: a
    construction whose steps are its own (`NumpyroSteps`, `PaddleSteps`, `TensorflowSteps`),
    each with its own enumeration; `kernel`, `users`: whose kernel it is, and the registered
    candidates that run it (the catalog names the construction only for them)."""

    label: str
    short: str
    space: str
    bits: dict
    ends_in_dtype: bool
    standard: bool
    finish: Callable | None
    xla: bool = False
    torch_kernels: bool = False
    mlx_kernels: bool = False
    steps: Callable | None = None  # a RoundedLaw -> the construction's own steps (or None)
    #: the library kernel it repeats, in words, and the registered candidates that run it
    kernel: str = ""
    users: frozenset = frozenset()


def torch_finish(fmt, z, mean, std, a, b):
    """timm / torch <= 2.11: ``mul_(std sqrt2)``, ``add_(mean)``, ``clamp_(a, b)`` in the dtype."""
    x = rn(fmt, rn(fmt, z * scalar(fmt, std * math.sqrt(2.0))) + scalar(fmt, mean))
    return np.clip(x, scalar(fmt, a), scalar(fmt, b))


def sigma_clip(open_clip: bool):
    """JAX (open) and MLX (closed): sqrt2 z clipped to the bounds in sigma units in the dtype."""

    def finish(fmt, z, mean, std, a, b):
        lower, upper = scalar(fmt, (a - mean) / std), scalar(fmt, (b - mean) / std)
        if open_clip:
            lower = float(fmt.next_up(np.array([lower]))[0])
            upper = float(fmt.next_down(np.array([upper]))[0])
        return np.clip(rn(fmt, scalar(fmt, math.sqrt(2.0)) * z), lower, upper)

    return finish


#: The registered candidates that run JAX's truncated_normal (keras' jax backend calls it).
JAX_USERS = frozenset({"jax", "jax-init", "keras-jax"})

#: The constructions tried, in order (bits: by the dtype's width).
CONSTRUCTIONS = (
    Construction("torch's uniform_ on [erf(alpha/sqrt2), erf(beta/sqrt2)), erfinv, x std sqrt2 "
                 "+ mean, clamp, in the dtype (timm's trunc_normal_)", "timm", "erf",
                 {32: 24, 64: 53}, ends_in_dtype=False, standard=False, finish=torch_finish,
                 torch_kernels=True, kernel="torch <= 2.11's and timm's trunc_normal_ kernel",
                 users=frozenset({"timm"}) | TORCH_INVERSE_CDF),
    Construction("the same on the standard law, then x std + mean in the dtype (timm's "
                 "trunc_normal_tf_)", "timm-tf", "erf", {32: 24, 64: 53}, ends_in_dtype=False,
                 standard=True, finish=torch_finish, torch_kernels=True,
                 kernel="timm's trunc_normal_tf_ kernel", users=frozenset({"timm-tf"})),
    Construction("JAX's uniform j 2^-k on [erf(lower/sqrt2), erf(upper/sqrt2)) in the dtype, "
                 "sqrt2 erfinv clipped open, then x std + mean", "JAX", "erf", {32: 23, 64: 52},
                 ends_in_dtype=True, standard=True, finish=sigma_clip(open_clip=True), xla=True,
                 kernel="JAX's truncated_normal kernel", users=JAX_USERS),
    Construction("MLX's uniform (a 32-bit word / 2^32 in float32) on [erf(lower/sqrt2), "
                 "erf(upper/sqrt2)], sqrt2 erfinv clipped, then x std + mean", "MLX", "erf",
                 {32: 32, 64: 53}, ends_in_dtype=True, standard=True,
                 finish=sigma_clip(open_clip=False), mlx_kernels=True,
                 kernel="MLX's truncated_normal kernel", users=frozenset({"mlx"})),
    Construction("Paddle's truncated_gaussian_random kernel: its float32 (float64) uniform "
                 "from a 64-bit word on [Phi(a), Phi(b)], its own Erfinv(2p - 1), sqrt2 std + "
                 "mean in double, clamped to the float32 bounds", "Paddle", "cdf",
                 {32: 64, 64: 64}, ends_in_dtype=True, standard=False, finish=None,
                 steps=PaddleSteps.of, kernel="Paddle's truncated_gaussian_random kernel",
                 users=frozenset({"paddle"})),
    Construction("TensorFlow's parameterized_truncated_normal kernel: uniform rejection on a "
                 "narrow window, Robert's exponential proposals in a tail, -log(u) / alpha + "
                 "normMin and z stddev + mean in the dtype through the C library's log",
                 "TensorFlow", "cdf", {32: 23, 64: 52}, ends_in_dtype=True, standard=False,
                 finish=None, steps=TensorflowSteps.of,
                 kernel="TensorFlow's parameterized_truncated_normal kernel",
                 users=frozenset({"tensorflow-param"})),
    Construction("NumPyro's TruncatedNormal: JAX's uniform j 2^-k on [tiny, 1) (k = 23, 52), "
                 "Phi^-1((1 - u) Phi(low) + u Phi(high)) mirrored about the mean when the "
                 "window lies above it, every step in the dtype", "NumPyro", "cdf",
                 {32: 23, 64: 52}, ends_in_dtype=True, standard=False, finish=None,
                 steps=NumpyroSteps.of, kernel="NumPyro's TruncatedNormal kernel",
                 users=frozenset({"numpyro"})),
)


def exact_xla(fmt, c: Construction) -> bool:
    """Whether `c` runs XLA's float32 kernel, emulated step by step."""
    return c.xla and fmt.name == "float32"


def exact_mlx(fmt, c: Construction) -> bool:
    """Whether `c` runs MLX's float32 CPU kernels, repeated step by step (`mlx_cpu`)."""
    return c.mlx_kernels and fmt.name == "float32"


def exact_torch(fmt, c: Construction) -> bool:
    """Whether `c` runs torch's float32 CPU kernels, repeated (`torch_cpu.uniform_fused`)."""
    return c.torch_kernels and fmt.name == "float32" and torch_cpu.uniform_fused() is not None


def python_end(alpha: float) -> float:
    """2 Phi(alpha) - 1 as timm and torch <= 2.11 write it in Python floats:
    ``2 * ((1 + erf(alpha / sqrt2)) / 2) - 1``. Near +-1 the sum with 1 drops erf's last bit, so
    in float64 the end lies on a lattice twice as coarse as erf's own values."""
    cdf = (1.0 + math.erf(alpha / math.sqrt(2.0))) / 2.0
    return 2.0 * cdf - 1.0


def ends(fmt, c: Construction, alpha: float, beta: float) -> tuple[float, float]:
    """(lo, hi) of the uniform's image, as the library computes them."""
    if exact_xla(fmt, c):
        # XLA turns the division by the constant sqrt2 into a product with its reciprocal
        inverse = xla_cpu.f32(1.0) / xla_cpu.f32(math.sqrt(2.0))
        e = xla_cpu.erf(xla_cpu.f32([alpha, beta]) * inverse)
        return float(e[0]), float(e[1])
    if exact_mlx(fmt, c):
        e = mlx_cpu.erf(xla_cpu.f32([alpha, beta]) / xla_cpu.f32(math.sqrt(2.0)))
        return float(e[0]), float(e[1])
    with np.errstate(over="ignore", invalid="ignore"):
        if not c.ends_in_dtype:
            lo, hi = (float(v) for v in rn(fmt, [python_end(v) for v in (alpha, beta)]))
            return lo, hi
        t = rn(fmt, rn(fmt, np.array([alpha, beta])) / scalar(fmt, math.sqrt(2.0)))
        e = rn(fmt, special.erf(t))
        return float(e[0]), float(e[1])


@dataclass(frozen=True)
class Steps:
    """A construction on one law: the uniform's width, the ends of its image, and the law it is
    run on (the standard one where the library scales afterwards)."""

    c: Construction
    fmt: object
    bits: int
    lo: float
    hi: float
    span: float
    on: tuple  # (mean, std, a, b) the construction runs on
    scale: tuple  # (mean, std) of the final x std + mean (None: none)

    @classmethod
    def of(cls, law, c: Construction) -> Steps | None:
        fmt, dist = law.fmt, law.dist
        bits = c.bits.get(fmt.bits)
        mean, std, a, b = (float(dist.loc), float(dist.scale), float(dist.a), float(dist.b))
        if bits is None or not std > 0:
            return None
        on = (0.0, 1.0, (a - mean) / std, (b - mean) / std) if c.standard else (mean, std, a, b)
        lo, hi = ends(fmt, c, (on[2] - on[0]) / on[1], (on[3] - on[0]) / on[1])
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
            return None
        return cls(c, fmt, bits, lo, hi, scalar(fmt, hi - lo), on,
                   (mean, std) if c.standard else None)

    @property
    def exact(self) -> bool:
        return (exact_xla(self.fmt, self.c) or exact_torch(self.fmt, self.c)
                or exact_mlx(self.fmt, self.c))

    def v_of(self, j, wrapped: bool = True) -> np.ndarray:
        """The uniform's image v of lattice points j (`wrapped`: torch's image as it writes it,
        ``to`` written as ``from``; otherwise non-decreasing in j, for the bisection)."""
        fmt = self.fmt
        if exact_torch(fmt, self.c):
            return torch_cpu.uniform_image(j, self.lo, self.hi, torch_cpu.uniform_fused(),
                                           wrapped)
        if exact_mlx(fmt, self.c):
            return mlx_cpu.uniform_image(j, self.lo, self.hi, self.bits)
        if self.exact:
            # XLA fuses f (b - a) + a into one rounding; max(a, .) as JAX writes it
            f = np.ldexp(np.asarray(j, dtype=np.float64), -self.bits)
            return np.maximum(self.lo, xla_cpu.fma(f, self.span, self.lo)).astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            u = rn(fmt, in_accumulator(np.ldexp(np.asarray(j, dtype=np.float64), -self.bits),
                                       fmt))
            return np.clip(rn(fmt, self.lo + rn(fmt, self.span * u)), self.lo, self.hi)

    def x_of(self, v, error: float = 0.0) -> np.ndarray:
        """The output values of v, erfinv's result moved by a relative `error`."""
        fmt = self.fmt
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if exact_torch(fmt, self.c):
                z = torch_cpu.erfinv(v)
            elif exact_mlx(fmt, self.c):
                z = mlx_cpu.erfinv(v).astype(np.float64)
            elif self.exact:
                z = xla_cpu.erfinv(v).astype(np.float64)
            else:
                z = rn(fmt, special.erfinv(v) * (1.0 + error))
            x = self.c.finish(fmt, z, *self.on)
            if self.scale is not None:
                x = rn(fmt, rn(fmt, x * scalar(fmt, self.scale[1])) + scalar(fmt, self.scale[0]))
        return x

    def values(self, j) -> np.ndarray:
        """The output values of lattice points j (a sample of the construction, for tests)."""
        return self.x_of(self.v_of(j))


def construction_law(law, c: Construction, whole: bool = False,
                     cells: bool = False) -> CoarseLaw | None:
    """The law of `c` on a RoundedLaw, enumerated over the dtype's values of v (None: more than
    MAX_VALUES of them, an empty window, or a construction for another width). `whole`: beyond
    MAX_VALUES, an exact kernel is pushed over its whole lattice where it has at most
    WHOLE_LATTICE_BITS bits (a second or two); a construction with steps of its own enumerates
    itself (its `enumeration`). `cells`: beyond MAX_VALUES, a kernel enumerated over its window
    is held on CELLS cells of its uniform (`cell_law`: bins and estimated last bits, not
    values); a kernel with too wide a lattice to push is held so where `whole`."""
    if c.steps is not None:
        own = c.steps(law)
        if own is None:
            return None
        if own.enumeration == "whole":
            return whole_lattice_law(own) if whole else None
        if own.enumeration == "cells":
            return cell_law(own) if whole else None
        return window_law(own) or (cell_law(own) if cells else None)
    steps = Steps.of(law, c)
    if steps is None:
        return None
    guess = ((lambda v: np.round((v - steps.lo) / steps.span * 2.0 ** steps.bits))
             if steps.span > 0 else None)
    found = window_runs(steps.fmt, steps.lo, steps.hi, lambda j: steps.v_of(j, wrapped=False),
                        (1 << steps.bits) - 1, guess)
    if found is None:
        if whole and steps.exact and steps.bits <= WHOLE_LATTICE_BITS:
            return whole_lattice_law(steps)
        return None
    v, first = found
    counts = np.diff(first).astype(np.float64)
    if exact_torch(steps.fmt, steps.c) and v.size > 1:
        counts[0], counts[-1] = counts[0] + counts[-1], 0.0  # torch writes `from` for `to`
    keep = counts > 0
    return pushed_law(steps, v[keep], counts[keep])


def window_runs(fmt, lo: float, hi: float, v_of, top: int, guess=None):
    """(the dtype's values v in [lo, hi], and for each the first lattice point in 0..top whose
    image reaches it, the last entry one past the window), by bisection on the non-decreasing
    map `v_of` (`affine.first_index`; `guess`, a function of the values and hi, narrows it);
    None where the window holds more than MAX_VALUES values."""
    k0, k1 = (int(k) for k in fmt.ordered_keys(np.array([lo, hi])))
    if k1 - k0 + 1 > MAX_VALUES:
        return None
    base = np.uint64(k0)
    rel = np.arange(k1 - k0 + 2, dtype=np.int64)
    v = fmt.values_from_keys(rel[:-1].astype(np.uint64) + base)

    def rel_key(j):
        # uint64 keys (float64's reach 2^64): the difference wraps into int64 exactly
        return (fmt.ordered_keys(v_of(j)).astype(np.uint64) - base).astype(np.int64)

    start = guess(np.append(v, hi)) if guess is not None else None
    return v, first_index(rel_key, rel, 0, top, start)


def window_law(steps: PaddleSteps) -> CoarseLaw | None:
    """The law of a kernel whose lattice is the keys of its uniform c in [0, 1), enumerated over
    the values of p in its window [lo, hi], each with the mass of the cells of c that write it
    (None: more than MAX_VALUES of them)."""
    found = window_runs(steps.window_format, steps.lo, steps.hi, steps.v_of, steps.top - 1)
    if found is None:
        return None
    p, first = found
    counts = np.diff(steps.midpoints(first))
    keep = counts > 0
    return pushed_law(steps, p[keep], counts[keep])


def cell_law(steps: PaddleSteps | TensorflowSteps | NumpyroSteps) -> CoarseLaw | None:
    """The law of a kernel whose lattice is too wide to enumerate, held on CELLS equal cells of
    its uniform c (`steps.on_cells`: the output and the chance the kernel keeps it at given
    uniforms): each cell's mass is its width times that chance at a point drawn uniformly in
    the cell (CELL_SEED; the uniform's own lattice is far finer). The kernel is monotone in c,
    so a cell's values lie between the images of the points drawn in the cells on either side
    (of 0 and 1 at the ends; widened by CELL_MARGIN_ULPS), the range each fit pools its bins
    over. The drawn points' values are a stratified sample of the law's: their last bits'
    shares are an estimate, with the effective number of cells as its sample size."""
    edges = np.arange(CELLS + 1, dtype=np.float64) / CELLS
    points = edges[:-1] + np.random.default_rng(CELL_SEED).random(CELLS) / CELLS
    x, weight = steps.on_cells(points)
    ends, _ = steps.on_cells(np.array([0.0, 1.0]))
    below = np.concatenate([ends[:1], x[:-1]])
    above = np.concatenate([x[1:], ends[1:]])
    below, above = np.where(np.isnan(below), x, below), np.where(np.isnan(above), x, above)
    mass = np.diff(edges) * weight
    keep = (mass > 0) & ~np.isnan(x)
    if not np.any(keep):
        return None
    law = gathered(steps.fmt, [x[keep], below[keep], above[keep]], mass[keep], CELLS,
                   exact=False)
    margin = np.uint64(CELL_MARGIN_ULPS)
    lo = np.where(law.lo_keys > margin, law.lo_keys - margin, np.uint64(0))
    kept = mass[keep]
    size = float(kept.sum() ** 2 / np.sum(kept ** 2))
    return CoarseLaw(law.keys, law.probs, lo, law.hi_keys + margin, CELLS, sample_size=size)


def whole_lattice_law(steps: Steps | NumpyroSteps | TensorflowSteps) -> CoarseLaw | None:
    """The law of an exact kernel pushed point by point over its whole lattice, in chunks that
    stay in the processor's cache; a rejection sampler's points (`TensorflowSteps`) each
    weighted by the chance the kernel keeps it."""
    fmt, keys, weights = steps.fmt, [], []
    rejection = isinstance(steps, TensorflowSteps)
    for start in range(0, 1 << steps.bits, CHUNK):
        j = np.arange(start, start + CHUNK)
        if rejection:
            z, share = steps.proposals(j)
            x, kept = steps.outputs(z), share > 0
            x, share = x[kept], share[kept]
        else:
            x = steps.x_of(steps.v_of(j))
        good = ~np.isnan(x)
        keys.append(fmt.ordered_keys(x[good]).astype(np.uint64))
        if rejection:
            weights.append(share[good])
    keys = np.concatenate(keys)
    if keys.size == 0:
        return None
    if rejection:
        uniq, inverse = np.unique(keys, return_inverse=True)
        probs = np.bincount(inverse, weights=np.concatenate(weights), minlength=uniq.size)
        return CoarseLaw(uniq, probs / probs.sum(), uniq, uniq, 1 << steps.bits)
    # the kernel is monotone up to its last bits (rising, or falling where mirrored): a merge
    # sort on nearly sorted runs is ~linear
    keys.sort(kind="stable")
    change = np.empty(keys.size, dtype=bool)
    change[0] = True
    np.not_equal(keys[1:], keys[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    counts = np.empty(starts.size, dtype=np.float64)
    counts[:-1] = starts[1:] - starts[:-1]
    counts[-1] = keys.size - starts[-1]
    uniq = keys[starts]
    return CoarseLaw(uniq, counts / counts.sum(), uniq, uniq, 1 << steps.bits)


def pushed_law(steps: Steps | PaddleSteps, v: np.ndarray, counts: np.ndarray) -> CoarseLaw | None:
    """The output law of the values v of the uniform's image, each written by `counts` lattice
    points, with the key range an erfinv error could move each output over (none for an exact
    kernel)."""
    error = 0.0 if steps.exact else APPROX[max(steps.fmt.bits, 32)]
    outs = [steps.x_of(v, s * error) for s in ((0,) if steps.exact else (0, -1, 1))]
    return gathered(steps.fmt, outs, counts, int(v.size), steps.exact)


def gathered(fmt, outs: list, weights: np.ndarray, v_values: int, exact: bool) -> CoarseLaw | None:
    """The law of output values `outs[0]` weighted by `weights`, each value's key range the
    widest of it and its alternatives `outs[1:]` (None: no finite value)."""
    good = ~np.isnan(outs[0])
    if not np.any(good):
        return None
    out_keys = [fmt.ordered_keys(x[good]).astype(np.uint64) for x in outs]
    weights = weights[good]
    uniq, inverse = np.unique(out_keys[0], return_inverse=True)
    probs = np.bincount(inverse, weights=weights, minlength=uniq.size)
    if exact:
        return CoarseLaw(uniq, probs / probs.sum(), uniq, uniq, v_values)
    lo_k = np.full(uniq.size, np.iinfo(np.uint64).max, dtype=np.uint64)
    hi_k = np.zeros(uniq.size, dtype=np.uint64)
    for ks in out_keys:
        np.minimum.at(lo_k, inverse, ks)
        np.maximum.at(hi_k, inverse, ks)
    return CoarseLaw(uniq, probs / probs.sum(), lo_k, hi_k, v_values)


def earlier_explained(ev: Evidence) -> set:
    """The checks the catalog's earlier rows explain on this Summary (`catalog.diagnose`)."""
    explained = set()
    for match in ev.memo.get("earlier", ()):
        explained |= match.explains
    return explained


class CoarseConstruction(Mechanism):
    name = "coarse-construction"
    explains = BINNED | {COLLISIONS.name, LATTICES.name, LOW_BITS.name, INDEPENDENCE.name}
    doc = ("A library's inverse CDF whose uniform's image is rounded into a 32/64-bit dtype "
           "where the dtype holds few values (windows far out, near erf = +-1, or narrower than "
           "an ulp): its law enumerated value by value over the dtype's values of v, each with "
           "its share of the uniform's lattice "
           "(`harness.diagnosis.mechanisms.coarse_construction`). "
           "Prediction: equal pairs and equal successive elements at sum p^2, the histogram, the "
           "mass bins, the lattices and the last bits from that law; each check explained only "
           "where its prediction agrees.")

    def test(self, ev: Evidence) -> Match | None:
        if not ev.has("resolution") or ev.law.fmt.bits < 32:
            return None
        departing = self.departing(ev)
        if not departing:
            return None
        read = []
        # a whole lattice's push where what departs is left unexplained by the earlier rows: a
        # uniform lattice coarser than the dtype, or a library's own arithmetic
        whole = bool(departing - earlier_explained(ev))
        # a law held on cells explains bins only: built where the bins depart
        cells = bool(departing - {COLLISIONS.name, LOW_BITS.name})
        for index, c in enumerate(CONSTRUCTIONS):
            coarse = cached_on_law(ev.law, f"_coarse_construction_{index}_{whole}_{cells}",
                                   lambda law, c=c: construction_law(law, c, whole, cells)
                                   or False)
            found = self.read(ev, coarse) if coarse else None
            if found is not None:
                read.append((c, *found, coarse))
        if not read:
            return None
        # the most checks explained; among as many, the closest fit (constructions far out can
        # predict alike: TensorFlow's and NumPyro's float64 last bits on a tail)
        c, explains, text, _, coarse = max(read, key=lambda r: (len(r[1]), r[3]))
        # far out the constructions often write one law: the note names every one that reads
        # as well, not only the first
        alike = [r[0] for r in read if r[1] == explains]
        note = (f"{c.label} (the constructions that read alike: "
                f"{', '.join(a.short for a in alike)}): {text}")
        # the catalog's earlier rows keep what they explain (`catalog.diagnose`)
        explains -= earlier_explained(ev)
        if not explains:
            return None
        return self.match(note, parameter=coarse.keys.size, explains=frozenset(explains),
                          kernel=" or ".join(dict.fromkeys(a.kernel for a in alike)),
                          kernel_of=frozenset().union(*(a.users for a in alike)))

    @staticmethod
    def departing(ev: Evidence) -> set:
        """The checks among collisions, low_bits, tails, scan and gof whose statistic departs
        from the rounded law at FALSE_MATCH (gof's: the judged histogram's chi-square): five
        events. A window moved by a fraction of a bin shows in the tails and the scan while the
        histogram's chi-square still fits."""
        found = set()
        for family, check in (("resolution", COLLISIONS), ("resolution", LOW_BITS),
                              ("binned", TAILS), ("localized", SCAN)):
            if ev.has(family):
                out = ev.outcome(check)
                if out.applicable and out.p_value < FALSE_MATCH:
                    found.add(check.name)
        judged = ev.judged_hist
        if judged is not None:
            p = chi2_fit(judged[1], judged[0].probs)
            if p is not None and p < FALSE_MATCH:
                found.add(GOF.name)
        return found

    @staticmethod
    def read(ev: Evidence, coarse: CoarseLaw) -> tuple[set, str, float] | None:
        """(the checks whose statistic agrees with `coarse`, the note, the smallest p of the
        fits that agree); None where neither the equal pairs nor the histogram does (the
        construction is not this sampler: `value_law.read`)."""
        if coarse.values_exact:
            written = f"{coarse.keys.size} values written (from {coarse.v_values} values of v)"
        else:
            written = (f"held on {coarse.v_values} cells of its uniform, a point drawn in each "
                       f"(too many values to enumerate: the bins, and the last bits' shares "
                       f"estimated)")
        return value_law.read(ev, coarse, written)
