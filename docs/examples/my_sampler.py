"""An example of your own sampler, declared for the harness: the σ convention (bounds in units of
std around the mean, as JAX, TensorFlow and timm's ``trunc_normal_tf_`` take them).

    pytest suites --candidate docs/examples/my_sampler.py:my_trunc_normal --profile smoke

The inverse CDF in float64 (scipy's ``ndtr``/``ndtri``, accurate deep in the lower tail), on the
side of the mean where the normal CDF keeps its relative precision (a window right of the mean is
drawn as the mirror image of the one left of it), then one cast into the tensor's dtype.
torch's float64 -> bfloat16/float16 cast rounds twice (through float32): the harness's `exact`
avoids that (candidates/rounding.py); this example does not.
"""

import math

import torch
from scipy.special import ndtr, ndtri

from candidates import candidate


@candidate(convention="sigma", dtypes=("float64", "float32", "bfloat16"), name="my-trunc-normal",
           version="0.1")
def my_trunc_normal(tensor, mean, std, a_sigma, b_sigma, generator=None):
    if not (math.isfinite(mean) and math.isfinite(std) and std > 0):
        raise ValueError(f"mean must be finite and std finite and > 0, got {mean}, {std}")
    if math.isnan(a_sigma) or math.isnan(b_sigma) or a_sigma > b_sigma:
        raise ValueError(f"need a <= b, got {a_sigma}, {b_sigma} (in units of std)")
    flip = a_sigma > 0                       # right of the mean: draw -Z on [-b, -a]
    lo, hi = (-b_sigma, -a_sigma) if flip else (a_sigma, b_sigma)
    p_lo, p_hi = ndtr(lo), ndtr(hi)
    u = torch.rand(tensor.shape, dtype=torch.float64, generator=generator).numpy()
    z = ndtri(p_lo + (p_hi - p_lo) * u).clip(lo, hi)
    x = torch.as_tensor(-z if flip else z, dtype=torch.float64) * std + mean
    with torch.no_grad():
        tensor.copy_(x)
    return tensor
