"""Build the torch patch: fast-exact as the body of ``torch.nn.init._no_grad_trunc_normal_``.

The sampler is `candidates.fast_exact` (with the pieces of `candidates.rounding`,
`candidates.kernels` and `candidates.dtensor` it uses); this script copies those definitions,
by name, into one self-contained module for torch (``torch/nn/_trunc_normal.py``: torch and
math only, no numpy), and rewrites torch 2.14.1's ``torch/nn/init.py`` (vendored here, unchanged,
under ``torch-2.14.1/``) to call it. The output is ``trunc_normal.patch``, a unified diff a
maintainer applies with ``patch -p1`` (or ``git apply``) at the root of a torch checkout.

    python proposal/build.py            # rewrite proposal/trunc_normal.patch
    python proposal/build.py --check    # exit 1 if the patch is not what the sources give

The test (tests/unit/proposal/test_patch.py) rebuilds it, applies it to a copy of the vendored
file and runs the harness and torch's published trunc_normal tests on the patched function.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ORIGINAL = HERE / "torch-2.14.1" / "torch" / "nn" / "init.py"
PATCH = HERE / "trunc_normal.patch"
MODULE_PATH = "torch/nn/_trunc_normal.py"

#: (source file, top-level names copied from it, in order)
PIECES = (
    ("candidates/rounding.py", ("_odd_float32", "rn_cast")),
    ("candidates/kernels.py", ("validate_args", "chunk_sizes", "REFINE_MAX_BITS", "REFINE_WIDTH_BITS",
                               "_MANTISSA_BITS", "_EXPONENT_BIAS", "refine_float64")),
    ("candidates/dtensor.py", ("is_dtensor", "mesh_rank", "broadcast_from_origin", "local_box")),
)
FAST_EXACT = "candidates/fast_exact.py"
#: fast_exact's definitions left out: the known-bad twins the harness proves its power with
LEFT_OUT = {"__all__", "fast_exact_rounds_first_", "fast_exact_float32_normal_",
            "fast_exact_unrefined_", "fast_exact_normal_in_dtype_"}
#: fast_exact's definitions replaced: the flat index in torch ops (the harness's uses numpy)
REPLACED = {"_local_flat_index": '''def _local_flat_index(tensor) -> torch.Tensor:
    """Row-major flat index, in the whole DTensor, of each element of this rank's part."""
    shape = tuple(tensor.shape)
    offsets, local_shape = local_box(tensor)
    if math.prod(local_shape) == 0:
        return torch.zeros(0, dtype=torch.int64)
    index = torch.zeros(1, dtype=torch.int64)
    for dim, (offset, size) in enumerate(zip(offsets, local_shape)):
        stride = math.prod(shape[dim + 1:])
        index = (index[:, None] + torch.arange(offset, offset + size) * stride).flatten()
    return index'''}

HEADER = '''"""Truncated normal sampling for ``torch.nn.init.trunc_normal_``: exact in every dtype.

Writes Y = RN(X), X ~ TN(mean, std, a, b), rounded once to nearest even into the tensor's dtype,
in bounded work (at most 17 proposal rounds over the rejected elements, then a fixed-step
inversion). Per dtype, the cheapest construction a conformance harness cannot tell from that law:
float64 values refined in their last bits; float32 from float64 proposals (a vectorized float64
Box-Muller); float16/bfloat16 from a float32 draw rounded once, with exact float32 bounds and
float64 tails beyond 4 std. Deterministic for a given generator state; DTensors hold the values
of a plain tensor filled with the same seed.

Generated from the conformance harness's ``candidates/fast_exact.py`` (proposal/build.py).
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["trunc_normal_"]
'''

FOOTER = '''

trunc_normal_ = fast_exact_trunc_normal_
'''

NEW_BODY = '''def _no_grad_trunc_normal_(
    tensor: Tensor,
    mean: float,
    std: float,
    a: float,
    b: float,
    generator: torch.Generator | None = None,
) -> Tensor:
    # Y = RN(X), X ~ TN(mean, std, a, b) drawn exactly and rounded once into the tensor's
    # dtype, in bounded work, for any window (torch/nn/_trunc_normal.py). Meta tensors are a
    # no-op there; parameters that define no truncated normal raise ValueError.
    return _exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)


'''

OLD_DOC = '''    The values are effectively drawn from the
    normal distribution :math:`\\mathcal{N}(\\text{mean}, \\text{std}^2)`
    with values outside :math:`[a, b]` redrawn until they are within
    the bounds. The method used for generating the random values works
    best when :math:`a \\leq \\text{mean} \\leq b`.

    For reduced-precision types (``torch.float16`` and ``torch.bfloat16``),
    sampling quality depends on the underlying ``normal_()`` and ``uniform_()``
    implementations which operate at higher internal precision to avoid
    quantization artifacts.
'''
NEW_DOC = '''    The values are drawn from the normal distribution
    :math:`\\mathcal{N}(\\text{mean}, \\text{std}^2)` restricted to :math:`[a, b]`
    (absolute bounds), exactly, and rounded once to the nearest value of the
    tensor's dtype: a bound representable in the dtype gets only the half of
    its rounding cell inside :math:`[a, b]`. Any window works, including one
    far from the mean or narrower than one ulp, in bounded work.
'''


def _definitions(path: Path) -> dict[str, str]:
    """Top-level name -> source text of its definition (functions, classes, assignments)."""
    text = path.read_text()
    tree = ast.parse(text)
    out = {}
    for node in tree.body:
        names = []
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        if not names:
            continue
        start = node.lineno
        if getattr(node, "decorator_list", None):
            start = min(d.lineno for d in node.decorator_list)
        lines = text.splitlines()
        # the `#:` comment lines right above a constant document it
        while start > 1 and lines[start - 2].startswith("#:"):
            start -= 1
        segment = "\n".join(lines[start - 1:node.end_lineno])
        for name in names:
            out[name] = segment
    return out


def vendored_module() -> str:
    """The text of torch/nn/_trunc_normal.py."""
    parts = [HEADER]
    for rel, names in PIECES:
        defs = _definitions(ROOT / rel)
        parts.append(f"\n# {'-' * 60} from the harness's {rel}\n")
        parts.extend("\n\n" + defs[name] for name in names)
    defs = _definitions(ROOT / FAST_EXACT)
    parts.append(f"\n\n# {'-' * 60} from the harness's {FAST_EXACT}\n")
    seen = set()
    for name, segment in defs.items():
        if name in LEFT_OUT or segment in seen:
            continue
        seen.add(segment)
        parts.append("\n\n" + REPLACED.get(name, segment))
    parts.append(FOOTER)
    return "".join(parts).rstrip() + "\n"


def patched_init(original: str) -> str:
    """torch 2.14.1's init.py with _no_grad_trunc_normal_ calling the vendored sampler."""
    start = original.index("def _no_grad_trunc_normal_(")
    end = original.index("def _no_grad_fill_(")
    text = original[:start] + NEW_BODY + original[end:]
    if OLD_DOC not in text:
        raise SystemExit("torch/nn/init.py: trunc_normal_'s docstring is not 2.14.1's")
    text = text.replace(OLD_DOC, NEW_DOC)
    anchor = "from torch import Tensor\n"
    return text.replace(anchor, anchor + "from torch.nn._trunc_normal import trunc_normal_ as "
                        "_exact_trunc_normal_\n", 1)


def patch_text() -> str:
    original = ORIGINAL.read_text()
    init_diff = difflib.unified_diff(original.splitlines(keepends=True),
                                     patched_init(original).splitlines(keepends=True),
                                     "a/torch/nn/init.py", "b/torch/nn/init.py")
    module_diff = difflib.unified_diff([], vendored_module().splitlines(keepends=True),
                                       "/dev/null", f"b/{MODULE_PATH}")
    return "".join(init_diff) + "".join(module_diff)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if trunc_normal.patch is stale")
    args = p.parse_args(argv)
    text = patch_text()
    if args.check:
        current = PATCH.read_text() if PATCH.exists() else ""
        if current != text:
            print(f"{PATCH.relative_to(ROOT)} is stale: run python proposal/build.py", file=sys.stderr)
            return 1
        return 0
    PATCH.write_text(text)
    print(f"wrote {PATCH.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
