"""Adapter for ``paddle.nn.init.trunc_normal_`` (``paddle``).

``paddle.nn.init.trunc_normal_(tensor, mean, std, a, b)`` fills a *paddle* tensor in place,
absolute bounds (torch.nn.init's convention); it builds
``paddle.nn.initializer.TruncatedNormal(mean, std, a, b)``, whose kernel
``truncated_gaussian_random`` draws with paddle's global generator. The adapter creates a paddle
tensor of the output dtype (``paddle.empty``), seeds paddle's global generator with a fresh 63-bit
seed drawn from the harness's generator (``paddle.seed``), calls the library, and copies the
result's bits (``.numpy()``; bfloat16 comes back as its uint16 bit patterns) into the torch
tensor. Paddle's initializer means to compute float16/bfloat16 in float32 and cast, but its dtype
test compares a dygraph ``paddle.float16`` with ``VarDesc.VarType.FP16`` and never matches in
eager mode, so the 16-bit kernels are called directly: CPU has a bfloat16 kernel and *no* float16
one (float16 raises NotFound; the harness records that as fail rows). CPU only (paddlepaddle).

Paddle draws in a child process (`candidates.libraries.child`): ``import paddle`` silently kills a
process that imported TensorFlow before it (measured: paddlepaddle 3.3.1 after tensorflow-cpu
2.21.0), and one harness process may run the ``tensorflow`` candidates too.
"""

from __future__ import annotations

from candidates.libraries.common import (distribution_version, draw_seed,
                                         missing_reason, to_torch)
from candidates.protocol import Candidate
from reference.dtypes import dtype_name

__all__ = ["CANDIDATES", "paddle_trunc_normal"]


def paddle_trunc_normal(shape, mean, std, a, b, *, dtype, device, generator):
    """paddle.nn.init.trunc_normal_(paddle.empty(shape, dtype), mean, std, a, b), in a child."""
    from candidates.libraries.child import server

    what = "paddle.nn.init.trunc_normal_"
    request = {"shape": tuple(shape), "mean": float(mean), "std": float(std), "a": float(a),
               "b": float(b), "dtype": dtype_name(dtype), "seed": draw_seed(generator)}
    return to_torch(server("paddle").draw(request, what), dtype, tuple(shape), what).to(device)


def _start_child() -> None:
    """The candidate's ``prepare``: start paddle's child before the timed calls."""
    from candidates.libraries.child import server

    server("paddle").ensure_started()


CANDIDATES = {
    "paddle": lambda: Candidate(
        paddle_trunc_normal, name="paddle", spec="paddle", version=distribution_version("paddlepaddle"),
        convention="functional", devices=("cpu",), torch_init_semantics=False,
        accepts_generator=True, unavailable=missing_reason("paddle", "paddlepaddle"),
        prepare=_start_child),
}
