"""The figure data of a group, taken from a Summary the engine folded: every sample is in one
coalesced group or a non-finite bin, the full-resolution bins are the law's own bins with the
histogram's counts, and what `reports.case_data` keeps of it reads back value for value."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.checks import summarize_samples
from harness.figure_data import figure_data
from reference import TruncatedNormal, rounded_law
from reports.case_data import load_case_data, save_case_data


def clamped_normal(law, n: int, dtype) -> torch.Tensor:
    """A sampler with a known defect: a normal clamped to the bounds, cast to `dtype`."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, generator=g, dtype=torch.float64).clamp(law.dist.a, law.dist.b)
    return x.to(dtype).reshape(1, -1)


@pytest.fixture(scope="module", params=[torch.bfloat16, torch.float32], ids=str)
def folded(request):
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), request.param)
    summary = summarize_samples(clamped_normal(law, 1 << 16, request.param), law)
    return summary, law, figure_data(summary, law)


def test_every_sample_is_in_a_group(folded):
    summary, _, data = folded
    assert data["n"] == summary.n == 1 << 16
    assert data["g_count"].sum() + data["n_nonfinite_bins"] == summary.n
    assert data["g_prob"].sum() == pytest.approx(1.0, abs=1e-9)
    assert np.all(data["g_lo"] <= data["g_hi"])


def test_the_full_resolution_bins_are_the_laws(folded):
    summary, law, data = folded
    hist = summary.binned.hist
    probs = law.hist_bin_probs()
    lo, hi = law.fmt.hist_bin_bounds()
    k = data["f_bin"]
    assert np.array_equal(data["f_count"], hist[k])
    assert np.array_equal(data["f_prob"], probs[k])
    assert np.array_equal(data["f_lo"], lo[k]) and np.array_equal(data["f_hi"], hi[k])
    # The clamp's atoms at both bounds sit inside their windows, at full resolution.
    for bound, window in ((law.rn_a, data["lower_window"]), (law.rn_b, data["upper_window"])):
        holds = (data["f_lo"] <= bound) & (bound <= data["f_hi"])
        assert holds.sum() == 1 and window[0] <= k[holds][0] <= window[1]
        assert data["f_count"][holds][0] > 0
    assert (data["rn_a"], data["rn_b"], data["a"], data["b"]) == (law.rn_a, law.rn_b, -2.0, 2.0)


def test_what_is_kept_reads_back_value_for_value(folded, tmp_path):
    summary, _, data = folded
    path = save_case_data(str(tmp_path / "c-normal-2sigma-d-cpu.npz"), data, meta={"case": "x"})
    back = load_case_data(path)
    assert back["meta"]["case"] == "x" and back["meta"]["dtype"] == summary.dtype
    assert back["meta"]["mean"] == 0.0 and back["meta"]["std"] == 1.0
    for key, value in data.items():
        if key != "about":
            assert np.array_equal(np.asarray(back[key]), value, equal_nan=True), key


def test_the_counts_a_title_states_are_the_summarys(folded):
    """The clamp piles the normal's tails on the bounds: the atoms' counts are what the samples
    hold at RN(a) and RN(b), and nothing is outside the bounds or not finite."""
    summary, law, data = folded
    x = clamped_normal(law, 1 << 16, summary.dtype if isinstance(summary.dtype, torch.dtype)
                       else getattr(torch, str(summary.dtype))).double()
    assert data["n_at_rn_a"] == int((x == law.rn_a).sum()) > 1000  # P(Z < -2) n ~ 1491
    assert data["n_at_rn_b"] == int((x == law.rn_b).sum()) > 1000
    for name in ("n_nan", "n_posinf", "n_neginf", "n_unwritten", "n_outside_rounded",
                 "n_outside_strict"):
        assert data[name] == 0, name
    assert np.isnan(data["worst_outside"])


def test_a_nan_written_is_counted_for_the_title():
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float32)
    x = clamped_normal(law, 1 << 12, torch.float32)
    x[0, :7] = float("nan")
    x[0, 7:10] = float("inf")
    data = figure_data(summarize_samples(x, law), law)
    assert (data["n_nan"], data["n_posinf"], data["n_neginf"]) == (7, 3, 0)
