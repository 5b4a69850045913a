"""The fold works a big call a slice at a time (`harness.engine.SLICE_ELEMENTS`): the repetition
family's anchors and window hashes and the independence family's row hashes must not depend on
where the slices fall. Checked against a brute-force reading of the anchors, and as whole
Summaries folded with slices of 2^18 elements and of a few dozen, on output with a repeated
stretch and repeated rows (so the counts compared are not all zero)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.cases import Case
from harness.checks import summarize_samples
from harness.engine import Fold, new_summary
from harness.families import independence, repetition
from reference import TruncatedNormal, rounded_law

DTYPES = (torch.bfloat16, torch.float32, torch.float64)


def _law(case, dtype):
    return rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)


def _anchors_by_brute_force(ints: np.ndarray, bits: int) -> np.ndarray:
    """The flat offsets whose element starts a whole window and whose hash's top
    REPEAT_SPACING_BITS bits are all zero, by Python integers."""
    width = 64 if bits == 64 else 32
    mult = (repetition.ANCHOR_MULT64 if bits == 64 else repetition.ANCHOR_MULT32) % (1 << width)
    calls, numel = ints.shape
    out = []
    for call in range(calls):
        for pos in range(numel - repetition.REPEAT_WINDOW + 1):
            key = (int(ints[call, pos]) * mult) % (1 << width)
            if key >> (width - repetition.REPEAT_SPACING_BITS) == 0:
                out.append(call * numel + pos)
    return np.asarray(out, dtype=np.int64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(5, 70), (1, 3000), (3, 900)], ids=str)
@pytest.mark.parametrize("slice_elements", [64, 1 << 18])
def test_anchors_are_those_of_every_element(dtype, shape, slice_elements, monkeypatch):
    monkeypatch.setattr(repetition, "SLICE_ELEMENTS", slice_elements)
    case = Case("slices", 0.0, 1.0, -2.0, 2.0, (shape[1],))
    law = _law(case, dtype)
    bits = torch.finfo(dtype).bits
    g = torch.Generator().manual_seed(sum(shape) + bits)
    x = torch.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1, shape, generator=g,
                      dtype=torch.int64).to({16: torch.int16, 32: torch.int32, 64: torch.int64}[bits])
    fold = Fold(new_summary(law, case.shape, dtype), dtype, "cpu", law, families=())
    got = repetition.anchor_starts(fold, x)
    want = _anchors_by_brute_force(x.numpy(), bits)
    assert want.size > 0
    assert np.array_equal(got.numpy(), want)


def _bad_batch(dtype) -> torch.Tensor:
    """Three calls of 96 x 40 with a stretch of call 0 repeated at another offset of call 1, and
    rows 3 and 50 of call 2 equal."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn((3, 96, 40), generator=g).clamp_(-2, 2).to(dtype)
    x.view(3, -1)[1, 1000:1600] = x.view(3, -1)[0, 200:800]
    x[2, 50] = x[2, 3]
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_fold_in_small_slices_is_the_fold_in_big_ones(dtype, monkeypatch):
    case = Case("slices", 0.0, 1.0, -2.0, 2.0, (96, 40))
    law = _law(case, dtype)
    batch = _bad_batch(dtype)
    whole = summarize_samples(batch, law)
    for module in (repetition, independence):
        monkeypatch.setattr(module, "SLICE_ELEMENTS", 50)  # a window, a row and a bit per slice
    sliced = summarize_samples(batch, law)
    assert whole.repetition.equal > 0 and whole.independence.n_duplicate_rows == 1
    assert sliced.repetition == whole.repetition
    for name in ("n_duplicate_rows", "n_rows_compared", "rows_kept"):
        assert getattr(sliced.independence, name) == getattr(whole.independence, name), name
