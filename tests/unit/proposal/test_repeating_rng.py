"""The proposal ends on any generator, even one that repeats every draw; torch's own sampler does not.

A generator whose state is restored around every random op (what a DTensor RNG tracker does when
it restores the state around each op, as under FSDP2 CPU offload) hands each op the numbers the one before
it got. A sampler that redraws its rejected values until they pass then draws the same rejected
values forever. `candidates.selftest.RepeatingRandomness` makes such a generator of any generator.

* the proposal, both strategies, every dtype, the init windows and the tails: every call ends,
  every value lies in [RN(a), RN(b)], and two calls give the same tensor (the repeats);
* the harness sees the repeats: ``selftest-repeating-rng-fast-exact`` fails its repetition and
  independence checks and passes bounds, finite and hang;
* torch's trunc_normal_ on that generator does not end on +-2 sigma nor on the tail [3, 10]
  within `HANG_S` seconds (a child process, killed then), and ends on the trap (no value to
  redraw there); the same child ends with the proposal.

No statistics: each assertion is exact or a deadline.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from candidates.fast_exact import STRATEGIES, fast_exact_trunc_normal_
from candidates.rounding import rn_cast
from candidates.selftest import on_a_repeating_generator

ROOT = Path(__file__).resolve().parents[3]
#: (mean, std, a, b): the init windows, an asymmetric window and the tails
WINDOWS = {
    "abs-bounds-trap": (0.0, 0.02, -2.0, 2.0),
    "normal-2sigma": (0.0, 1.0, -2.0, 2.0),
    "asym-window-1-3": (0.0, 1.0, 1.0, 3.0),
    "tail-3-10": (0.0, 1.0, 3.0, 10.0),
    "tail-5": (0.0, 1.0, 5.0, math.inf),
    "deep-window-10-1000": (0.0, 1.0, 10.0, 1000.0),
    "narrow-window-8": (0.0, 1.0, 8.0, 8.01),
}
DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
#: seconds a child process is given to fill one tensor (the proposal needs well under one)
HANG_S = 20.0


def _rounded(v: float, dtype: torch.dtype) -> float:
    return float(rn_cast(torch.tensor(v, dtype=torch.float64), dtype))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("window", WINDOWS.values(), ids=WINDOWS.keys())
def test_the_proposal_ends_in_bounds_and_repeats(window, strategy):
    def fill(tensor, mean, std, a, b, generator=None):
        return fast_exact_trunc_normal_(tensor, mean, std, a, b, generator, strategy=strategy)

    repeating = on_a_repeating_generator(fill)
    mean, std, a, b = window
    for dtype in DTYPES:
        generator = torch.Generator().manual_seed(7)
        first = repeating(torch.empty(4096, dtype=dtype), *window, generator=generator)
        second = repeating(torch.empty(4096, dtype=dtype), *window, generator=generator)
        assert torch.isfinite(first).all(), dtype
        assert first.min() >= _rounded(a, dtype) and first.max() <= _rounded(b, dtype), dtype
        assert torch.equal(first, second), f"{dtype}: the generator did not repeat"


def test_the_harness_flags_the_repeats():
    import harness

    df = harness.check("selftest-repeating-rng-fast-exact", cases=["normal-2sigma"],
                       dtypes=["float32"], devices=["cpu"], profile="smoke", progress=False,
                       shapes="none")
    verdicts = dict(zip(df["check"], df["verdict"]))
    assert verdicts["repetition"] == "fail" and verdicts["independence"] == "fail", verdicts
    assert all(verdicts[c] == "pass" for c in ("bounds", "finite", "hang", "written")), verdicts


CHILD = textwrap.dedent("""
    import sys
    import torch
    from candidates.fast_exact import fast_exact_trunc_normal_
    from candidates.selftest import on_a_repeating_generator

    fill = {"torch": torch.nn.init.trunc_normal_, "proposal": fast_exact_trunc_normal_}[sys.argv[1]]
    window = [float(v) for v in sys.argv[2:6]]
    tensor = on_a_repeating_generator(fill)(torch.empty(4096), *window,
                                            generator=torch.Generator().manual_seed(7))
    print("ended", float(tensor.min()), float(tensor.max()))
""")


def _ends(sampler: str, window: tuple) -> bool:
    """Whether `sampler` on a repeating generator fills one tensor within HANG_S seconds (a child
    process, killed at the deadline)."""
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, sampler, *map(str, window)], cwd=ROOT,
                              capture_output=True, text=True, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        return False
    assert done.returncode == 0 and done.stdout.startswith("ended"), done.stderr[-2000:]
    return True


@pytest.mark.parametrize("case", ["normal-2sigma", "tail-3-10"])
def test_torch_hangs_where_the_proposal_ends(case):
    assert _ends("proposal", WINDOWS[case])
    assert not _ends("torch", WINDOWS[case]), f"torch's trunc_normal_ ended on {case}"


def test_torch_ends_where_it_has_nothing_to_redraw():
    """On the trap (+-100 sigma) torch accepts its first draw: the repeating generator alone does
    not stop a sampler; redrawing does."""
    assert _ends("torch", WINDOWS["abs-bounds-trap"])
