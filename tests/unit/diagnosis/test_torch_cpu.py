"""torch's float32 CPU kernels as the diagnosis repeats them
(`harness.diagnosis.library_ops.torch_cpu`): ``uniform_``'s lattice, fused or rounded twice as this
torch measures, bit for bit against torch's own draws, and both kinds of build told apart.

Deterministic: fixed generator seeds; nothing here is a probabilistic assertion.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from harness.diagnosis.library_ops import torch_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def end(alpha: float) -> float:
    """2 Phi(alpha) - 1 as timm writes it in Python floats."""
    return 2.0 * ((1.0 + math.erf(alpha / math.sqrt(2.0))) / 2.0) - 1.0


#: (lo, hi) of uniform_ windows: timm's on normal-2sigma, huge-std, sub-ulp-window and
#: mean-outside-3-4 (near 1, where to - from is a few ulps and draws round onto `to`).
WINDOWS = [(end(-2.0), end(2.0)), (end(-1e-3), end(1e-3)), (end(0.3), end(0.30001)),
           (end(3.0), end(4.0)), (-0.7, 0.3)]


@pytest.mark.parametrize("lo,hi", WINDOWS)
def test_the_lattice_repeats_torchs_uniform_bit_for_bit(lo, hi):
    """65 536 draws of torch's float32 uniform_ on each window are the model's image of the
    same 32-bit words' low 24 bits, value for value (`to` written as `from` included)."""
    fused = torch_cpu.uniform_fused()
    assert fused is not None
    n, seed = 1 << 16, 7
    drawn = torch.empty(n, dtype=torch.float32).uniform_(lo, hi, generator=torch.Generator()
                                                         .manual_seed(seed))
    j = (torch_cpu.generator_words(seed, n) & np.uint64((1 << 24) - 1)).astype(np.int64)
    assert np.array_equal(drawn.numpy().astype(np.float64),
                          torch_cpu.uniform_image(j, lo, hi, fused))


def test_the_other_rounding_differs_on_a_wide_window():
    """The fused and twice-rounded lattices differ on a large share of a wide window's points,
    so the probe tells them apart."""
    j = np.arange(0, 1 << 24, 97, dtype=np.int64)
    lo, hi = torch_cpu.PROBE_WINDOW
    differ = torch_cpu.uniform_image(j, lo, hi, True) != torch_cpu.uniform_image(j, lo, hi, False)
    assert differ.mean() > 0.3


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "AMD64"),
                    reason="torch's CPU capabilities without AVX2 are an x86 build's")
def test_a_build_without_fma_reads_as_rounded_twice():
    """torch's kernels for x86 without AVX2 (ATEN_CPU_CAPABILITY=default) round x (to - from)
    and then the sum: the probe reads them as rounded twice."""
    code = "from harness.diagnosis.library_ops import torch_cpu; print(torch_cpu.uniform_fused())"
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
