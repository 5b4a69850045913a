"""Built-in candidates: the installed torch, the gold sampler, scipy, the systems people used, and
known-bad samplers that prove the harness's power.

``REGISTRY`` maps each registered (hyphenated) name to a zero-argument factory returning a `Candidate`.

Good (expected to pass everything):

* ``torch`` — the installed ``torch.nn.init.trunc_normal_`` (the default candidate; not assumed correct).
* ``exact`` — the harness's gold sampler (`exact_trunc_normal_`): u ~ U(0, 1) in float64 from the
  generator on the tensor's device, the exact inverse CDF of `reference.TruncatedNormal` (log space,
  lower tail by ``ppf``, upper tail by ``isf`` so both deep tails are exact), then ONE round-to-nearest
  cast (`candidates.rounding.rn_cast`; torch's own float64 -> 16-bit cast rounds twice). In float64
  one 53-bit u cannot reach every value with its mass, so u picks a block of up to 2^24 values and
  two more uniforms draw the value inside it (`candidates.kernels.refine_float64`).
* ``scipy`` — ``scipy.stats.truncnorm`` in float64 on the CPU, numpy Generator seeded from torch
  generator draws, then the same RN cast.

Systems people used (known bad, or bad in some regime):

* ``torch-legacy`` — the algorithm torch shipped up to 2.11 (2.11.0's ops, bit for bit), in the
  tensor's dtype; 2.12.0 replaced it (`LEGACY_LAST_RELEASE`, `REWRITE_FIRST_RELEASE`).
* ``fp32-upcast`` — torch-legacy in float32, cast back: the common workaround.
* ``rejection-loop`` — ``normal_`` and redraw out-of-bounds elements until none is left.
* ``clamp`` — ``normal_`` then ``clamp_``.

Sharded parameters (DTensors; `candidates.dtensor_samplers`, imported on first use):
``exact-counter`` (good, sharding-invariant: u from a counter-based stream indexed by global
position) and ``local-shard`` (known bad: the seed's DTensor workaround, the local tensor
initialized with the rank's own generator).

Known-bad by construction, each the exact sampler with one defect, named for it:
``scale-2pct-wide``, ``shift-0.02sigma``, ``no-tail-beyond-3.5sigma``, ``antithetic-neighbours``,
``round-toward-zero``, ``point-mass-1e-4-at-a``, ``fallback-mean-1e-5``, ``hole-2e-5``; and
exact except on one class of tensors: ``remainder-loop``, ``small-tensor-path``,
``big-tensor-path``, ``counter-wrap``, ``compile-only-shift``; and exact except in one
region of the parameter space off the grid: ``below-mean-window``, ``narrow-window-midpoint``;
and with a resolution coarser than the dtype (right in every histogram bin): ``uniform-24-bits``,
``float32-widened``, ``dropped-last-bit``; and within an ulp or two of the exact law's values
(`candidates.knownbad_ulp`): ``double-rounding``, ``coarse-intermediate``, ``bound-cell``. Never
"fix" them: they exist to be caught.

The proposal (`candidates.fast_exact`): ``fast-exact`` (good: exact in every dtype with bounded work,
judged like any candidate, never used to judge) and its known-bad twin ``fast-exact-rounds-first``
(the same code testing the bounds after rounding into the dtype).

Every built-in follows torch.nn.init's semantics: fills in place and returns the tensor, works on
non-contiguous views, runs under ``torch.no_grad`` (an ``nn.Parameter`` records no history), and is a
no-op on meta tensors. The exact-based ones and ``scipy`` validate their arguments (`validate_args`):
ValueError for a > b, std <= 0, NaN/inf std, NaN mean, NaN bound; a == b fills with RN(a). With an
explicit generator they leave the global RNG state unchanged; the same seed gives bit-identical output.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import torch

from candidates.fast_exact import (fast_exact_float32_normal_, fast_exact_normal_in_dtype_,
                                   fast_exact_rounds_first_, fast_exact_trunc_normal_,
                                   fast_exact_unrefined_)
from candidates.kernels import (CHUNK, counter_uniform, exact_based, harness_version, inverse_cdf,
                                rn_scalar, truncated_normal, validate_args)
from candidates.knownbad_ulp import bound_cell_, coarse_intermediate_, double_rounding_
from candidates.protocol import Candidate
from candidates.rounding import rn_cast, rz_cast

__all__ = [
    "BUILTINS",
    "exact_trunc_normal_",
    "scipy_trunc_normal_",
    "torch_legacy_trunc_normal_",
    "fp32_upcast_trunc_normal_",
    "rejection_loop_trunc_normal_",
    "clamp_trunc_normal_",
    "scale_2pct_wide_",
    "shift_0p02_sigma_",
    "no_tail_beyond_3p5_sigma_",
    "antithetic_neighbours_",
    "round_toward_zero_",
    "point_mass_at_a_",
    "fallback_at_mean_",
    "hole_",
    "remainder_loop_",
    "small_tensor_path_",
    "big_tensor_path_",
    "counter_wrap_",
    "compile_only_shift_",
    "below_mean_window_",
    "narrow_window_midpoint_",
    "uniform_24_bits_",
    "float32_widened_",
    "dropped_last_bit_",
]

# --------------------------------------------------------------------------------------------- good


def exact_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The gold sampler: exact inverse CDF in float64 (log space), one round-to-nearest cast.

    Draws u ~ U(0,1) in float64 with ``generator`` on the tensor's device, maps it through
    `reference.TruncatedNormal` (ppf below the median, isf above, so both deep tails are exact) and
    rounds once to the tensor's dtype: its output law *is* the harness's rounded law. A float64
    tensor gets the draw refined value by value (`candidates.kernels.refine_float64`; ~1.6x the
    float32 time).
    """
    return exact_based(tensor, mean, std, a, b, generator)


def scipy_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """scipy.stats.truncnorm in float64 on the CPU, then one RN cast and a copy to the tensor's device.

    The numpy Generator is seeded with four 62-bit words drawn from the torch generator (or the global
    torch RNG of the tensor's device), so torch seeds fully determine the output.
    """
    import scipy.stats

    mean, std, a, b = validate_args(mean, std, a, b)
    if tensor.is_meta:
        return tensor
    with torch.no_grad():
        n = tensor.numel()
        if n == 0:
            return tensor
        if a == b:
            tensor.copy_(rn_scalar(a, tensor).expand(tensor.shape))
            return tensor
        dev = generator.device if generator is not None else tensor.device
        words = torch.randint(0, 2**62, (4,), generator=generator, device=dev).tolist()
        rng = np.random.default_rng(words)
        law = scipy.stats.truncnorm((a - mean) / std, (b - mean) / std, loc=mean, scale=std)
        out = tensor.view(-1) if tensor.is_contiguous() else torch.empty(n, dtype=tensor.dtype, device=tensor.device)
        for start in range(0, n, CHUNK):
            k = min(CHUNK, n - start)
            x = torch.from_numpy(np.asarray(law.rvs(size=k, random_state=rng), dtype=np.float64))
            out[start:start + k].copy_(rn_cast(x, tensor.dtype).to(tensor.device))
        if not tensor.is_contiguous():
            tensor.copy_(out.view(tensor.shape))
        return tensor


# ------------------------------------------------------------------------------ systems people used

#: torch's releases as read from their wheels' torch/nn/init.py: the last one whose
#: ``_no_grad_trunc_normal_`` is the inverse-CDF algorithm ``torch-legacy`` reproduces, and the
#: first one with the rejection rewrite. The docs' version statements are held to these.
LEGACY_LAST_RELEASE = "2.11.0"
REWRITE_FIRST_RELEASE = "2.12.0"


#: torch-legacy warns (a UserWarning) when the mean lies more than this many std outside [a, b],
#: the condition under which the algorithm it reproduces warned.
LEGACY_WARNING_STDS = 2.0


def _erf_bound(z: float) -> float:
    """erf(z / sqrt 2) = 2 Phi(z) - 1, the end of the uniform range for the standardized bound z.

    Taken through 1 + erf(...) and back, as the reproduced code did (it formed Phi, then 2 Phi - 1):
    the round trip keeps multiples of 2^-53 only, and the range's ends, hence the output, depend
    on those bits."""
    return (1.0 + math.erf(z / math.sqrt(2.0))) - 1.0


def torch_legacy_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """torch.nn.init.trunc_normal_'s inverse-CDF algorithm as shipped up to torch 2.11, the same
    ops in the same order (bit for bit what 2.11.0 writes; 2.12.0 replaced it).

    Every step runs in place in the tensor's dtype: u uniform on [erf(alpha / sqrt 2),
    erf(beta / sqrt 2)), z = erfinv(u), then the tensor is z * std * sqrt 2 + mean clamped to
    [a, b]. Defect: with bounds far out (std 0.02, ±2 = ±100σ) the range is [-1, 1); in bfloat16
    u = -1 exactly is common (~0.2%), erfinv(-1) = -inf, and the clamp turns it into ``a``: a
    point mass 100σ out, and the upper tail cut near 2.7σ.
    Caught by: atoms, extremes, tails, gof (and ks/moments at larger n).
    """
    if mean < a - LEGACY_WARNING_STDS * std or mean > b + LEGACY_WARNING_STDS * std:
        warnings.warn(f"torch-legacy: the mean {mean} lies more than {LEGACY_WARNING_STDS:g} std "
                      f"outside [{a}, {b}]; this algorithm then draws a poor approximation of the law",
                      stacklevel=2)
    scale = std * math.sqrt(2.0)
    with torch.no_grad():
        tensor.uniform_(_erf_bound((a - mean) / std), _erf_bound((b - mean) / std), generator=generator)
        tensor.erfinv_().mul_(scale).add_(mean).clamp_(min=a, max=b)
    return tensor


def fp32_upcast_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The circulated workaround: torch-legacy on a float32 copy, then cast back with copy_.

    Defect: the same failure as torch-legacy, at ~2**-24 per element (a uniform draw of exactly -1 in
    float32 becomes a point mass at ``a``), plus float32's own tail cut; a float64 tensor is *down*cast.
    Caught by: atoms/tails at the nightly n (a few -100σ values in 600M elements), not at pr n.
    """
    if tensor.is_meta:
        return tensor
    with torch.no_grad():
        tmp = torch.empty(tensor.shape, dtype=torch.float32, device=tensor.device)
        torch_legacy_trunc_normal_(tmp, mean, std, a, b, generator=generator)
        tensor.copy_(tmp)
        return tensor


def rejection_loop_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """normal_, then redraw the out-of-bounds elements with normal_ until none is left.

    Correct in law up to rounding (it compares in the tensor's dtype, i.e. rounds first and truncates
    after, so the atom at RN(a) gets a whole rounding cell), but it loops practically forever when
    [a, b] holds little mass ([5, inf): 2.9e-7; [10, 1000]: 7.6e-24) and forever for a > b.
    Deliberately no iteration cap. Caught by: hang (deep tails, a > b), arguments, atoms (16-bit).
    """
    if tensor.is_meta:
        return tensor
    with torch.no_grad():
        tensor.normal_(mean, std, generator=generator)
        while True:
            bad = (tensor < a) | (tensor > b)
            k = int(bad.sum())
            if k == 0:
                return tensor
            tensor[bad] = torch.empty(k, dtype=tensor.dtype, device=tensor.device).normal_(
                mean, std, generator=generator)


def clamp_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """normal_ then clamp_(a, b): the mass outside [a, b] piles up on the bounds.

    Defect: atoms at a and b of mass Φ(α) and 1-Φ(β) (4.6% together at ±2σ), scale too narrow.
    Caught by: atoms, gof, ks, moments, tails (and hang-free, so every check sees it).
    """
    if tensor.is_meta:
        return tensor
    with torch.no_grad():
        tensor.normal_(mean, std, generator=generator)
        tensor.clamp_(min=a, max=b)
        return tensor


# -------------------------------- known-bad: a law off in scale, location, tails, pairs or rounding


def scale_2pct_wide_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler with std*1.02 (bounds unchanged): a scale 2% too wide.

    Models a sampler whose σ is off (e.g. a wrong variance correction). Caught by: moments (std,
    kurtosis), gof, ks — on cases where the bounds do not hide the scale (not the near-uniform ones).
    """
    return exact_based(tensor, mean, std, a, b, generator,
                        make_dist=lambda m, s, lo, hi: truncated_normal(m, s * 1.02, lo, hi))


def shift_0p02_sigma_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler with mean + 0.02*std: a location shifted by 0.02σ.

    Models an off-by-a-bit location (e.g. a bias from an asymmetric rounding of the mean).
    Caught by: moments (mean), ks, gof.
    """
    return exact_based(tensor, mean, std, a, b, generator,
                        make_dist=lambda m, s, lo, hi: truncated_normal(m + 0.02 * s, s, lo, hi))


def no_tail_beyond_3p5_sigma_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact law additionally truncated to mean ± 3.5σ: no mass beyond 3.5σ.

    Models a sampler with a hard internal cut (a fixed-width table, a float32 erfinv saturating). Where
    [a, b] lies entirely beyond 3.5σ ([5, inf), [10, 1000]) the window is empty and it writes the bound
    nearest the cut. Caught by: tails, extremes, gof (kurtosis in moments at large n).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    lo, hi = max(a, mean - 3.5 * std), min(b, mean + 3.5 * std)
    if lo > hi:
        point = a if a > mean else b
        return exact_based(tensor, mean, std, point, point, generator)
    return exact_based(tensor, mean, std, a, b, generator,
                        make_dist=lambda m, s, _a, _b: truncated_normal(m, s, lo, hi))


def _antithetic(u: torch.Tensor) -> torch.Tensor:
    # Odd elements mirror their even neighbour: u' = 1 - u - 2**-53 maps the midpoint lattice onto its
    # mirror image, so quantile p becomes exactly 1 - p.
    u = u.clone()
    m = u.numel() // 2
    u[1:2 * m:2] = (1.0 - u[0:2 * m:2]) - 2.0**-53
    return u


def antithetic_neighbours_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but every odd element (flattened, row-major) uses 1-u of its even neighbour.

    Each element is marginally exact, so every marginal check passes; only the pairs are dependent
    (correlation -1 in quantile space, strongly negative in value). Caught by: independence (lag-1
    along the last dimension).
    """
    return exact_based(tensor, mean, std, a, b, generator, u_map=_antithetic)


def round_toward_zero_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact float64 draw, cast by chopping toward zero instead of rounding to nearest.

    Models 16-bit output made by truncating float32 bits (the cheap bf16 conversion). Identical to
    exact for float64; for float32 one ulp toward zero where RN moved away. Caught by: gof (16-bit: each
    atom gets the wrong cell), moments (mean biased toward zero where the lattice is coarse, e.g. mean
    100 on [98, 102] in bf16), atoms.
    """
    return exact_based(tensor, mean, std, a, b, generator, cast=rz_cast)


def point_mass_at_a_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but each element independently replaced by RN(a) with probability 1e-4.

    Models the torch-legacy failure at a known rate (a uniform draw hitting its lower end, erfinv
    giving -inf, the clamp moving it to a). Identity when a is -inf. Caught by: atoms (RN(a)), tails and
    extremes when a is far out (the ±100σ trap), gof.
    """
    def put_a(x: torch.Tensor) -> torch.Tensor:
        hit = torch.rand(x.numel(), dtype=torch.float64, device=x.device, generator=generator) < 1e-4
        return torch.where(hit, torch.tensor(float(a), dtype=torch.float64, device=x.device), x)

    if math.isinf(float(a)):
        return exact_based(tensor, mean, std, a, b, generator)
    return exact_based(tensor, mean, std, a, b, generator, x_map=put_a)


# ----------------------------------------------- known-bad: rare defects (a fallback value, a hole)

#: fallback-mean-1e-5: the share of elements written as RN(mean)
FALLBACK_RATE = 1e-5
#: hole-2e-5: the quantiles [HOLE_AT, HOLE_AT + HOLE_MASS) of the law are never produced
HOLE_AT = 0.3
HOLE_MASS = 2e-5


def fallback_at_mean_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but each element independently replaced by RN(mean) with probability 1e-5.

    Models a fallback fill value: ``torch.where(bad, mean, x)`` after a failed step, ``nan_to_num``
    of a rare NaN, "after N rejection rounds, write the mean". One value gets an extra 1e-5 of the
    samples: invisible to every omnibus check (a float32 main histogram bin near the mean holds
    ~1e-4). Where the mean lies outside [a, b] the fallback is out of bounds. Caught by: spikes (the
    value's bin, and at stage 2 the value itself), scan.
    """
    def put_mean(x: torch.Tensor) -> torch.Tensor:
        hit = torch.rand(x.numel(), dtype=torch.float64, device=x.device, generator=generator) < FALLBACK_RATE
        return torch.where(hit, torch.tensor(float(mean), dtype=torch.float64, device=x.device), x)

    return exact_based(tensor, mean, std, a, b, generator, x_map=put_mean)


def _skip_quantiles(u: torch.Tensor) -> torch.Tensor:
    # u in [0, 1) -> [0, 1) minus [HOLE_AT, HOLE_AT + HOLE_MASS): uniform on the rest, so the output
    # is the law conditioned on X outside the hole (each other quantile keeps its relative weight).
    u = u * (1.0 - HOLE_MASS)
    return torch.where(u >= HOLE_AT, u + HOLE_MASS, u)


def hole_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but the law's quantiles [0.3, 0.3 + 2e-5) are never produced: a narrow
    interval inside the support holding 2e-5 of the mass is empty.

    Models a hole from a coarse uniform lattice or a table lookup that skips an entry. For N(0, 1)
    on +-2 sigma the hole is [-0.4984, -0.4983] (~1800 float32 values; ~0.4 of one main histogram
    bin, so gof and ks do not see it at pr n). In 16-bit dtypes the hole is narrower than one
    value's cell and only thins that value by 2e-5. Caught by: scan (an empty run of mass bins).
    """
    return exact_based(tensor, mean, std, a, b, generator, u_map=_skip_quantiles)


# ------------------------------------------------------------------ known-bad: one class of tensors
# Each is exact except on one class of tensors real kernels dispatch on: the grid's 256x256 tensors
# never meet the defect, the shape axis (and the paths) do.

#: remainder-loop: the vector width whose scalar remainder loop is wrong
REMAINDER_WIDTH = 8
#: small-tensor-path: tensors of at most this many elements take the broken fast path
SMALL_TENSOR = 16
#: big-tensor-path: tensors of at least this many elements take the broken path
BIG_TENSOR = 1 << 24
#: counter-wrap: the element counter wraps after this many elements
COUNTER_WRAP = 1 << 22


def _flat_assign(tensor: torch.Tensor, start: int, values: torch.Tensor) -> None:
    """tensor's elements start.. (row-major, any layout) = values."""
    idx = np.arange(start, tensor.numel())
    if tensor.is_contiguous():
        tensor.view(-1)[start:] = values
        return
    multi = tuple(torch.as_tensor(i, device=tensor.device) for i in np.unravel_index(idx, tensor.shape))
    tensor[multi] = values


def remainder_loop_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but the last (numel mod 8) elements, a vector loop's scalar remainder,
    get a uniform draw on [max(a, mean - 3 std), min(b, mean + 3 std)] instead of the law.

    Exact on every tensor whose size 8 divides (the grid's); wrong on 4087 = 61 x 67 in 7 of 4087
    elements. Caught by: position (the tail-8 class), on the shape axis."""
    exact_based(tensor, mean, std, a, b, generator)
    n = tensor.numel()
    r = n % REMAINDER_WIDTH
    if tensor.is_meta or r == 0 or a == b:
        return tensor
    lo, hi = max(a, mean - 3 * std), min(b, mean + 3 * std)
    with torch.no_grad():
        u = torch.rand(r, dtype=torch.float64, device=tensor.device, generator=generator)
        _flat_assign(tensor, n - r, rn_cast(lo + u * (hi - lo), tensor.dtype))
    return tensor


def small_tensor_path_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but a tensor of at most 16 elements takes a fast path that forgets to
    truncate: ``normal_(mean, std)``. Caught by: bounds (and the marginal checks) on the shape
    axis's tiny tensors."""
    if tensor.is_meta or tensor.numel() > SMALL_TENSOR:
        return exact_based(tensor, mean, std, a, b, generator)
    validate_args(mean, std, a, b)
    with torch.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def big_tensor_path_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but a tensor of at least 2^24 elements takes a path whose std is 3%
    too large. Caught by: moments, ks, gof on the shape axis's big tensor."""
    if tensor.numel() < BIG_TENSOR:
        return exact_based(tensor, mean, std, a, b, generator)
    return exact_based(tensor, mean, std, a, b, generator,
                       make_dist=lambda m, s, lo, hi: truncated_normal(m, s * 1.03, lo, hi))


def counter_wrap_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """A counter-based sampler (exact inverse CDF of a SplitMix64 stream indexed by position,
    like exact-counter) whose counter wraps after 2^22 elements: a bigger tensor repeats itself
    every 2^22 elements. Exact in law everywhere; exact outright below 2^22 elements. Caught by:
    repetition, on the shape axis's big tensor."""
    mean, std, a, b = validate_args(mean, std, a, b)
    if tensor.is_meta or tensor.numel() == 0:
        return tensor
    with torch.no_grad():
        if a == b:
            tensor.copy_(rn_scalar(a, tensor).expand(tensor.shape))
            return tensor
        dev = generator.device if generator is not None else tensor.device
        key = int(torch.randint(0, 2**62, (1,), generator=generator, device=dev).item())
        dist = truncated_normal(mean, std, a, b)
        n = tensor.numel()
        out = tensor.view(-1) if tensor.is_contiguous() else torch.empty(n, dtype=tensor.dtype,
                                                                         device=tensor.device)
        for start in range(0, n, CHUNK):
            k = min(CHUNK, n - start)
            u = counter_uniform(key, np.arange(start, start + k, dtype=np.int64) % COUNTER_WRAP)
            x = inverse_cdf(dist, torch.from_numpy(u))
            out[start:start + k].copy_(rn_cast(x, tensor.dtype).to(tensor.device))
        if not tensor.is_contiguous():
            tensor.copy_(out.view(tensor.shape))
        return tensor


def _is_compiling() -> bool:
    check = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(check()) if check is not None else False


def compile_only_shift_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but under ``torch.compile`` the traced code adds 0.1 std (clamped back
    into [a, b]): a defect only the compiled path has. Caught by: moments, ks, gof, atoms on the
    compile path."""
    exact_based(tensor, mean, std, a, b, generator)
    if _is_compiling() and not tensor.is_meta:
        with torch.no_grad():
            tensor.add_(0.1 * std).clamp_(a, b)
    return tensor


# ----------------------------------------------------- known-bad: one region of the parameter space
# Each is exact except in one region of the parameter space that no grid case visits: only an
# exploration (`--explore`) meets them, and its shrinking finds where the region ends.

#: below-mean-window: a window whose upper bound lies more than this many std below the mean
BELOW_MEAN_BETA = -3.0
#: narrow-window-midpoint: a window narrower than this many std
NARROW_WIDTH = 3e-6


def _fill_value(tensor: torch.Tensor, value: float) -> torch.Tensor:
    with torch.no_grad():
        tensor.copy_(rn_scalar(value, tensor).expand(tensor.shape))
    return tensor


def below_mean_window_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but a window entirely more than 3 std below the mean ((b - mean) / std
    < -3: no grid case has one) takes a branch that writes RN(b) everywhere. Caught by: atoms,
    spikes, gof, ... on an explored case; shrinking finds beta = -3."""
    mean, std, a, b = validate_args(mean, std, a, b)
    if tensor.is_meta or tensor.numel() == 0 or (b - mean) / std >= BELOW_MEAN_BETA:
        return exact_based(tensor, mean, std, a, b, generator)
    return _fill_value(tensor, b)


def narrow_window_midpoint_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but a window narrower than 3e-6 std (the grid's narrowest is 1e-5 std)
    takes a branch that writes RN((a + b) / 2) everywhere. Caught by: spikes, gof, ... where the
    dtype resolves the window (float64, float32); shrinking finds the width 3e-6 std."""
    mean, std, a, b = validate_args(mean, std, a, b)
    if tensor.is_meta or tensor.numel() == 0 or not (a < b and b - a < NARROW_WIDTH * std):
        return exact_based(tensor, mean, std, a, b, generator)
    return _fill_value(tensor, a / 2 + b / 2)


# ------------------------------------------------------ known-bad: resolution coarser than the dtype
# Each puts the right mass into every histogram bin, so every binned check passes; only the
# checks at the resolution of single values (equal-value pairs, coarse lattices, last bits) see them.

#: Random bits of a float32 uniform (torch.rand in float32: multiples of 2^-24).
UNIFORM_BITS = 24


def _uniform_24_bits(u: torch.Tensor) -> torch.Tensor:
    """u kept to its first 24 bits, at the middle of its 2^-24 cell (0 and 1 never occur)."""
    scale = float(1 << UNIFORM_BITS)
    return (torch.floor(u * scale) + 0.5) / scale


def uniform_24_bits_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact float64 quantile, fed uniforms with 24 random bits (what a float32 uniform holds).

    At most 2^24 distinct outputs: in float32 a law of ~2^26 equally likely values (N(0, 1) on
    +-2) repeats values ~4 times as often as it should. Caught by: collisions."""
    return exact_based(tensor, mean, std, a, b, generator, u_map=_uniform_24_bits)


def _through_float32(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float32).to(torch.float64)


def float32_widened_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact draw rounded to float32, then written into the tensor's dtype (float64 widened
    from float32: a computation done in float32, or JAX without x64). Every float64 value is a
    float32 value: ~2^29 times the law's equal pairs, and its last 29 bits are 0. Caught by:
    collisions, lattices, low_bits."""
    return exact_based(tensor, mean, std, a, b, generator, x_map=_through_float32)


def _drop_last_bit(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """RN into dtype, then the significand's last bit cleared (a last step that truncates)."""
    y = rn_cast(x, dtype)
    width = {torch.float64: torch.int64, torch.float32: torch.int32}.get(dtype, torch.int16)
    return y.view(width).bitwise_and_(-2).view(dtype)


def dropped_last_bit_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact draw, rounded once, its last significand bit then cleared: only even patterns,
    each with its odd neighbour's mass too (twice the law's equal pairs, and no odd last bit).
    Caught by: collisions (float32; in float64 the law expects too few pairs to see it) and
    low_bits."""
    return exact_based(tensor, mean, std, a, b, generator, cast=_drop_last_bit)


# ---------------------------------------------------------------------------------------- registry


def _make(name: str, fn: Callable, version: Callable[[], str] = harness_version, **kw) -> Callable[[], Candidate]:
    def factory() -> Candidate:
        return Candidate(fn, name=name, spec=name, version=version(), torch_init_semantics=True, **kw)

    factory.__name__ = f"make_{name.replace('-', '_').replace('.', 'p')}"
    factory.__doc__ = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else name
    return factory


def _torch_fn():
    # Looked up at resolve time, so a patched or rebuilt torch.nn.init is what gets tested.
    return torch.nn.init.trunc_normal_


def _scipy_version() -> str:
    import scipy

    return scipy.__version__


#: name -> zero-argument factory of the built-in candidates (`candidates.catalog` lists them).
BUILTINS: dict[str, Callable[[], Candidate]] = {
    "torch": lambda: Candidate(_torch_fn(), name="torch", spec="torch", version=torch.__version__,
                               torch_init_semantics=True),
    "exact": _make("exact", exact_trunc_normal_),
    "scipy": _make("scipy", scipy_trunc_normal_, version=_scipy_version),
    "torch-legacy": _make("torch-legacy", torch_legacy_trunc_normal_, known_bad=True,
                          defect="uniform/erfinv/clamp in the tensor's dtype (torch <= 2.11)",
                          caught_by=("atoms", "extremes", "tails", "gof")),
    "fp32-upcast": _make("fp32-upcast", fp32_upcast_trunc_normal_, known_bad=True,
                         defect="torch-legacy in float32: point mass at a at ~2**-24 per element",
                         caught_by=("atoms", "tails")),
    "rejection-loop": _make("rejection-loop", rejection_loop_trunc_normal_, known_bad=True,
                            defect="redraws until in bounds: hangs when [a, b] holds little mass",
                            caught_by=("hang", "arguments")),
    "clamp": _make("clamp", clamp_trunc_normal_, known_bad=True,
                   defect="normal_ then clamp_: mass outside [a, b] piles up on the bounds",
                   caught_by=("atoms", "gof", "ks", "moments", "tails")),
    "scale-2pct-wide": _make("scale-2pct-wide", scale_2pct_wide_, known_bad=True,
                             defect="std 2% too large", caught_by=("moments", "gof", "ks")),
    "shift-0.02sigma": _make("shift-0.02sigma", shift_0p02_sigma_, known_bad=True,
                             defect="mean shifted by 0.02 std", caught_by=("moments", "ks", "gof")),
    "no-tail-beyond-3.5sigma": _make("no-tail-beyond-3.5sigma", no_tail_beyond_3p5_sigma_, known_bad=True,
                                     defect="no mass beyond mean +- 3.5 std",
                                     caught_by=("tails", "extremes", "gof")),
    "antithetic-neighbours": _make("antithetic-neighbours", antithetic_neighbours_, known_bad=True,
                                   defect="odd elements use 1-u of their even neighbour",
                                   caught_by=("independence",)),
    "round-toward-zero": _make("round-toward-zero", round_toward_zero_, known_bad=True,
                               defect="cast by chopping toward zero instead of round-to-nearest",
                               caught_by=("gof", "moments", "atoms")),
    "point-mass-1e-4-at-a": _make("point-mass-1e-4-at-a", point_mass_at_a_, known_bad=True,
                                  defect="each element replaced by RN(a) with probability 1e-4",
                                  caught_by=("atoms", "tails", "extremes", "gof")),
    "fallback-mean-1e-5": _make("fallback-mean-1e-5", fallback_at_mean_, known_bad=True,
                                defect="each element replaced by RN(mean) with probability 1e-5",
                                caught_by=("spikes", "scan")),
    "remainder-loop": _make("remainder-loop", remainder_loop_, known_bad=True,
                            defect="the last numel mod 8 elements (a scalar remainder loop) are uniform",
                            caught_by=("position",)),
    "small-tensor-path": _make("small-tensor-path", small_tensor_path_, known_bad=True,
                               defect="tensors of <= 16 elements are not truncated",
                               caught_by=("bounds", "gof")),
    "big-tensor-path": _make("big-tensor-path", big_tensor_path_, known_bad=True,
                             defect="tensors of >= 2^24 elements get a std 3% too large",
                             caught_by=("moments", "ks", "gof")),
    "counter-wrap": _make("counter-wrap", counter_wrap_, known_bad=True,
                          defect="the element counter wraps after 2^22 elements: big tensors repeat",
                          caught_by=("repetition",)),
    "compile-only-shift": _make("compile-only-shift", compile_only_shift_, known_bad=True,
                                defect="under torch.compile the output is shifted by 0.1 std",
                                caught_by=("moments", "ks", "gof")),
    "below-mean-window": _make("below-mean-window", below_mean_window_, known_bad=True,
                               defect="a window more than 3 std below the mean gets b everywhere",
                               caught_by=("atoms", "spikes", "gof")),
    "narrow-window-midpoint": _make("narrow-window-midpoint", narrow_window_midpoint_, known_bad=True,
                                    defect="a window narrower than 3e-6 std gets its midpoint everywhere",
                                    caught_by=("spikes", "gof")),
    "hole-2e-5": _make("hole-2e-5", hole_, known_bad=True,
                       defect="the quantiles [0.3, 0.3 + 2e-5) are never produced (a narrow hole)",
                       caught_by=("scan",)),
    "uniform-24-bits": _make("uniform-24-bits", uniform_24_bits_, known_bad=True,
                             defect="the exact quantile fed uniforms of 24 random bits",
                             caught_by=("collisions",)),
    "float32-widened": _make("float32-widened", float32_widened_, known_bad=True,
                             defect="the exact draw rounded to float32, then widened",
                             caught_by=("collisions", "lattices", "low_bits")),
    "dropped-last-bit": _make("dropped-last-bit", dropped_last_bit_, known_bad=True,
                              defect="the last significand bit cleared after the RN cast",
                              caught_by=("collisions", "low_bits")),
    "double-rounding": _make("double-rounding", double_rounding_, known_bad=True,
                             defect="16-bit output cast from float64 through float32 (two RN steps)",
                             caught_by=("atoms", "gof")),
    "coarse-intermediate": _make("coarse-intermediate", coarse_intermediate_, known_bad=True,
                                 defect="mean + std z computed in the next-coarser dtype",
                                 caught_by=("lattices", "collisions", "gof", "moments")),
    "bound-cell": _make("bound-cell", bound_cell_, known_bad=True,
                        defect="the value one ulp inside each bound written at the bound",
                        caught_by=("atoms", "gof")),
    "fast-exact": _make("fast-exact", fast_exact_trunc_normal_, sharding_invariant=True),
    "fast-exact-rounds-first": _make("fast-exact-rounds-first", fast_exact_rounds_first_, known_bad=True,
                                     defect="fast-exact truncating after rounding: the atom at a representable "
                                            "bound gets its whole cell (torch's 16-bit defect)",
                                     caught_by=("atoms",)),
    "fast-exact-float32-normal": _make("fast-exact-float32-normal", fast_exact_float32_normal_,
                                       known_bad=True,
                                       defect="fast-exact's float32 output from torch's float32 normal_ "
                                              "and a float32 affine step (the 16-bit outputs' draw)",
                                       caught_by=("collisions",)),
    "fast-exact-unrefined": _make("fast-exact-unrefined", fast_exact_unrefined_, known_bad=True,
                                  defect="fast-exact's float64 output without the refinement of "
                                         "its last bits (mean + std z in float64)",
                                  caught_by=("low_bits",)),
    "fast-exact-normal-in-dtype": _make("fast-exact-normal-in-dtype", fast_exact_normal_in_dtype_,
                                        known_bad=True,
                                        defect="fast-exact's 16-bit draw by normal_ in the 16-bit "
                                               "dtype (8-bit uniforms in bfloat16)",
                                        caught_by=("gof",)),
}

