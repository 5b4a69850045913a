"""The torch patch (proposal/trunc_normal.patch): current, applicable, and correct once applied.

The patch is applied with ``patch -p1`` to a copy of torch 2.14.1's torch/nn/init.py (vendored
under proposal/torch-2.14.1/), and the patched module is loaded under the installed torch (its
new torch/nn/_trunc_normal.py registered as ``torch.nn._trunc_normal``, the name the patched
init.py imports). Then: the harness judges the patched ``trunc_normal_`` at the smoke profile,
and torch's own trunc_normal tests (test/nn/test_init.py), written out here from their
published behaviour, run on it.

torch's KS test keeps torch's threshold (p > 1e-4: an exact sampler fails it with probability
1e-4 per tensor over seeds); here every seed is fixed, so each verdict is deterministic, and the
harness's own checks (false-alarm rate <= 1e-6 per check) are what judge the law.
"""

from __future__ import annotations

import importlib.util
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from scipy import stats

ROOT = Path(__file__).resolve().parents[3]
PROPOSAL = ROOT / "proposal"


def _load(name: str, path: Path):
    """The module at `path`, registered as `name` (dataclasses look their module up by name)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build():
    return _load("proposal_build", PROPOSAL / "build.py")


@pytest.fixture(scope="module")
def patched(tmp_path_factory, build):
    """torch.nn.init as torch 2.14.1 ships it, with the patch applied, under the installed torch."""
    if shutil.which("patch") is None:
        pytest.skip("the patch(1) tool is not installed")
    tree = tmp_path_factory.mktemp("torch-2.14.1")
    shutil.copytree(PROPOSAL / "torch-2.14.1" / "torch", tree / "torch")
    done = subprocess.run(["patch", "-p1", "--forward", "-i", str(PROPOSAL / "trunc_normal.patch")],
                          cwd=tree, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    name = "torch.nn._trunc_normal"
    saved = sys.modules.get(name)
    _load(name, tree / "torch" / "nn" / "_trunc_normal.py")
    try:
        yield _load("patched_torch_nn_init", tree / "torch" / "nn" / "init.py")
    finally:
        sys.modules.pop("patched_torch_nn_init", None)
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved


def test_the_patch_is_what_the_sources_give(build):
    """Rebuilt from candidates/fast_exact.py and the vendored init.py: the checked-in patch is
    current (`python proposal/build.py` rewrites it)."""
    assert (PROPOSAL / "trunc_normal.patch").read_text() == build.patch_text()


def test_the_vendored_module_needs_torch_only(patched):
    source = Path(sys.modules["torch.nn._trunc_normal"].__file__).read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all(line.split()[1].split(".")[0] in {"__future__", "math", "collections", "dataclasses",
                                                 "torch"} for line in imports), imports


def test_patched_function_is_fast_exact_bit_for_bit(patched):
    from candidates.fast_exact import fast_exact_trunc_normal_

    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
        for params in ((0.0, 0.02, -2.0, 2.0), (0.0, 1.0, 3.0, 10.0), (0.5, 1e-6, -math.inf, math.inf)):
            x = patched.trunc_normal_(torch.empty(3000, dtype=dtype), *params,
                                      generator=torch.Generator().manual_seed(1))
            y = fast_exact_trunc_normal_(torch.empty(3000, dtype=dtype), *params,
                                         generator=torch.Generator().manual_seed(1))
            assert torch.equal(x, y), (dtype, params)


def test_harness_passes_the_patched_function(patched):
    """The harness at smoke on the init cases and a tail, in every dtype: no fail, no error."""
    import harness

    df = harness.check(patched.trunc_normal_, cases=["normal-2sigma", "abs-bounds-trap", "tail-5"],
                       dtypes=["float64", "float32", "float16", "bfloat16"], devices=["cpu"],
                       profile="smoke", progress=False, shapes="none")
    bad = df[df["verdict"].isin(["fail", "error"])]
    assert len(df) and bad.empty, bad[["case", "dtype", "check", "verdict", "message"]].to_string()


# ----------------------------------------------- torch's test/nn/test_init.py, from its behaviour


def _is_trunc_normal(tensor, mean, std, a, b) -> bool:
    """torch's helper: KS of the standardized values against scipy's truncnorm, p > 1e-4."""
    z = ((tensor.view(-1).double() - mean) / std).numpy()
    return stats.kstest(z, "truncnorm", args=((a - mean) / std, (b - mean) / std)).pvalue > 1e-4


def _random_nd_tensor(rng: random.Random, dims: int, size_min: int, size_max: int) -> torch.Tensor:
    return torch.empty([rng.randint(size_min, size_max) for _ in range(dims)])


@pytest.mark.parametrize("dims", (1, 2, 4))
def test_trunc_normal(patched, dims):
    """Random parameters as torch draws them (mean in [-3, 3], std in [1, 5], a in [mean - 2 std,
    mean], b in [mean, mean + 2 std]), tensors of 30..50 per dimension (up to 6.25M values)."""
    rng = random.Random(dims)
    tensor = _random_nd_tensor(rng, dims, 30, 50)
    mean, std = rng.uniform(-3, 3), rng.uniform(1, 5)
    a, b = rng.uniform(mean - 2 * std, mean), rng.uniform(mean, mean + 2 * std)
    patched.trunc_normal_(tensor, mean=mean, std=std, a=a, b=b, generator=torch.Generator().manual_seed(dims))
    assert _is_trunc_normal(tensor, mean, std, a, b)
    assert tensor.min() >= a and tensor.max() <= b


def test_trunc_normal_defaults_and_many_unique_values(patched):
    """Default arguments (N(0, 1) on +-2); 1e4 values hold > 5000 distinct ones (float32)."""
    tensor = patched.trunc_normal_(torch.empty(10_000), generator=torch.Generator().manual_seed(3))
    assert _is_trunc_normal(tensor, 0.0, 1.0, -2.0, 2.0)
    assert tensor.unique().numel() > 5000


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.float16, torch.bfloat16),
                         ids=lambda d: str(d).removeprefix("torch."))
def test_trunc_normal_no_value_on_the_bounds_far_out(patched, dtype):
    """std 0.1 on +-2 (20 sigma): no value on a bound (the <= 2.11 algorithm's erfinv(-1) -> clamp
    put ~0.2 % of bf16 values there)."""
    tensor = patched.trunc_normal_(torch.empty(100_000, dtype=dtype), std=0.1,
                                   generator=torch.Generator().manual_seed(4))
    assert not (tensor == -2).any() and not (tensor == 2).any()
    assert tensor.abs().max() < 1.0


def test_trunc_normal_generator(patched):
    """The same generator seed gives the same values; the global RNG is left untouched."""
    torch.manual_seed(0)
    state = torch.get_rng_state()
    x = patched.trunc_normal_(torch.empty(1000), generator=torch.Generator().manual_seed(42))
    y = patched.trunc_normal_(torch.empty(1000), generator=torch.Generator().manual_seed(42))
    assert torch.equal(x, y)
    assert torch.equal(torch.get_rng_state(), state)
    z = patched.trunc_normal_(torch.empty(1000), generator=torch.Generator().manual_seed(43))
    assert not torch.equal(x, z)


def test_trunc_normal_meta(patched):
    """A meta tensor is returned as is (no storage: nothing to sample)."""
    meta = torch.empty(1000, 1000, device="meta")
    assert patched.trunc_normal_(meta, std=0.02) is meta
    p = torch.nn.Parameter(torch.empty(64, 32))
    assert patched.trunc_normal_(p, std=0.02) is p and p.grad_fn is None
