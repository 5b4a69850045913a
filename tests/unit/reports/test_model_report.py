"""model.md (`reports.model`): one line per parameter with the call, the sampler that judged it,
the verdict and the worst check; linked from summary.md; absent for a run that recorded no model."""

from __future__ import annotations

import pandas as pd
from report_rows import row

from reports.model import model_markdown, worst_row
from reports.overview import summary_markdown

CALLS = [
    {"case": "m-0", "model": "m.py:build", "call": "torch.nn.init.trunc_normal_(mean=0, std=0.02, "
     "a=-2, b=2)", "calls": 1, "parameters": ["pos_embed"], "sampler": "torch", "shape": "1x17x8",
     "dtype": "bfloat16", "drawn_in": ""},
    {"case": "m-1", "model": "m.py:build", "call": "timm.layers.trunc_normal_(mean=0, std=0.02, "
     "a=-2, b=2)", "calls": 2, "parameters": ["a.weight", "b.weight"], "sampler": "timm",
     "shape": "8x8", "dtype": "bfloat16", "drawn_in": "float32"},
]


def rows(candidates=None):
    """The rows of the two calls: torch's passes, timm's fails atoms (worst) and tails."""
    judge = candidates or {"m-0": "torch", "m-1": "timm"}
    return pd.DataFrame([
        row("m-0", "bfloat16", "gof", candidate=judge["m-0"], p_value=0.2),
        row("m-0", "bfloat16", "moments", candidate=judge["m-0"], p_value=0.01,
            message="moments closest"),
        row("m-1", "bfloat16", "tails", "fail", candidate=judge["m-1"], p_value=1e-9),
        row("m-1", "bfloat16", "atoms", "fail", candidate=judge["m-1"], p_value=0.0,
            message="worst RN(a) = -2: 444 observed vs 0 expected"),
        row("m-1", "bfloat16", "gof", candidate=judge["m-1"]),
        row("api", "bfloat16", "arguments", "fail", candidate="torch"),
    ])


def test_one_line_per_parameter_with_call_sampler_verdict_and_worst_check():
    text = model_markdown(rows(), {"recorded": CALLS})
    lines = {ln.split(" | ")[0]: ln for ln in text.splitlines() if ln.startswith("| `")}
    assert set(lines) == {"| `pos_embed`", "| `a.weight`", "| `b.weight`"}
    torch_line, timm_line = lines["| `pos_embed`"], lines["| `a.weight`"]
    assert "| torch | ✔ pass |" in torch_line and "**moments**: moments closest" in torch_line
    assert "| timm | ✘ fail |" in timm_line and "**atoms**: worst RN(a) = -2" in timm_line
    assert "8x8 bfloat16 (drawn in float32, cast)" in timm_line and "--candidate timm" in timm_line
    assert "3 truncated-normal call(s), 2 distinct" in text


def test_a_candidate_that_is_not_the_recorded_sampler_is_named_so():
    text = model_markdown(rows({"m-0": "exact", "m-1": "exact"}), {"recorded": CALLS})
    assert "exact (the model calls timm)" in text and "exact (the model calls torch)" in text


def test_no_model_no_report_and_summary_links_it_only_when_there_is_one():
    df = rows()
    assert model_markdown(df, {}) is None
    assert "model.md" not in summary_markdown(df, {})
    assert "[model.md](model.md)" in summary_markdown(df, {"recorded": CALLS})


def test_worst_row_is_the_worst_verdict_then_the_smallest_p():
    df = rows()
    assert worst_row(df[df.case == "m-1"])["check"] == "atoms"
    assert worst_row(df[df.case == "m-0"])["check"] == "moments"
